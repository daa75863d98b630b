// One simulated cluster: its scratchpad memory (an arena of exactly the configured size) and
// a control thread that runs the jobs submitted to the cluster in order. The cluster's PEs
// have no host threads of their own: the work a job spreads over them runs on the process's
// host pool (host_pool.h), as batches of tasks or as a team of cooperative fibers.
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

  // True on this cluster's control thread, in a caller's job of it (run_here_if_idle) and in
  // the fibers such a job starts.
  bool on_cluster_thread() const;

private:
  bool claim_if_idle();
  const Cluster *enter_claim(); // marks the calling thread as this cluster's; returns the previous
  void release_claim(const Cluster *previous);
  void control_loop();

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
};

} // namespace manycl::device
