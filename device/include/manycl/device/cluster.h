// One simulated cluster: its scratchpad memory (an arena of exactly the configured size),
// a control thread that runs the jobs submitted to the cluster in order, and one host
// thread per processing element, started on first use, so that the PEs of a cluster
// really run concurrently (SPMD work-groups synchronise at barriers across them).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace manycl::device {

class Cluster {
public:
  using Job = std::function<void()>;

  Cluster(unsigned id, unsigned cluster_count, unsigned pes, uint64_t spm_bytes);
  ~Cluster();
  Cluster(const Cluster &) = delete;
  Cluster &operator=(const Cluster &) = delete;

  unsigned id() const { return id_; }
  unsigned pe_count() const { return pes_; }
  // The SPM starts at the largest OpenCL C alignment (long16: 128 bytes), so all of it is
  // usable by a kernel's __local arena.
  static constexpr std::align_val_t kSpmAlignment{128};
  std::byte *spm() const { return spm_.get(); }
  uint64_t spm_bytes() const { return spm_bytes_; }

  // Queues a job on the cluster's control thread; jobs of one cluster run one at a time,
  // in submission order.
  void submit(Job job);
  // Jobs queued or running.
  size_t pending() const;

  // Runs `fn` on the calling thread as a job of this cluster, when the cluster is idle
  // (nothing queued or running) and the caller is not a cluster thread: a short command then
  // costs no hand-off to the control thread and back. Jobs submitted meanwhile wait for fn,
  // as they would behind a queued job. Returns false, without running fn, otherwise.
  template <class Fn> bool run_here_if_idle(Fn &&fn) {
    if (!claim_if_idle())
      return false;
    struct Release {
      Cluster *cluster;
      const Cluster *previous;
      ~Release() { cluster->release_claim(previous); }
    } release{this, enter_claim()};
    fn();
    return true;
  }

  // Runs body(pe) for pe in [0, count) concurrently, one PE thread each (count <= PEs),
  // and returns when all have finished. Call it from a job of this cluster. The caller's
  // current cluster context (command.h) is set on the PE threads while they run body.
  void run_on_pes(unsigned count, const std::function<void(unsigned pe)> &body);

  // True while the calling thread runs a body of run_on_pes. A nested run_on_pes runs
  // its bodies one after the other on the calling thread (bodies that wait for each other
  // would deadlock there: don't nest those).
  static bool inside_run_on_pes();

  // True on this cluster's control thread or one of its PE threads.
  bool on_cluster_thread() const;

private:
  bool claim_if_idle();
  const Cluster *enter_claim(); // marks the calling thread as this cluster's; returns the previous
  void release_claim(const Cluster *previous);
  void control_loop();
  void pe_loop(unsigned pe);
  void start_pe_threads();

  unsigned id_;
  unsigned cluster_count_;
  unsigned pes_;
  uint64_t spm_bytes_;
  struct SpmDelete {
    void operator()(std::byte *p) const { ::operator delete[](p, kSpmAlignment); }
  };
  std::unique_ptr<std::byte[], SpmDelete> spm_;

  mutable std::mutex mutex_;
  std::condition_variable job_ready_;
  std::deque<Job> jobs_;
  size_t running_ = 0;
  bool claimed_ = false; // a caller runs a job on its own thread (run_here_if_idle)
  bool stopping_ = false;
  std::thread control_;

  // PE fan-out: a generation counter wakes the PE threads for each run_on_pes call.
  std::mutex pe_mutex_;
  std::condition_variable pe_start_;
  std::condition_variable pe_done_;
  std::vector<std::thread> pe_threads_;
  const std::function<void(unsigned)> *pe_body_ = nullptr;
  unsigned pe_active_count_ = 0;
  unsigned pe_remaining_ = 0;
  uint64_t pe_generation_ = 0;
  bool pe_stopping_ = false;
};

} // namespace manycl::device
