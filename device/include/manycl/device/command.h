// Running one command (a kernel launch, a record stream, ...) on a group of clusters:
// the RDMA engine of each cluster, synchronization between the clusters of the group,
// modeled time and the statistics and trace events the command produces.
//
// Usage by the runtime, per command:
//
//   auto rec = CommandRecorder::begin(device, "ndrange kernel foo", {0, 1, 2}, not_before);
//   // on each cluster's control thread (Cluster::submit), for group index g:
//   {
//     ScopedClusterContext scope(rec->context(g)); // native code now sees this cluster
//     ... run work-groups / native functions (device_api.h works here) ...
//   }
//   // when every cluster's job has finished:
//   const CommandStats &stats = rec->end(); // also feeds MANYCL_TRACE / MANYCL_STATS
//
// A failure inside a cluster (range error, timeout) marks the command failed (error())
// and wakes every cluster blocked on a barrier or signal of this command, so nothing hangs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "manycl/device/dma.h"
#include "manycl/device/time_model.h"
#include "manycl/result.h"

namespace manycl::device {

class Device;
class Cluster;
class CommandRecorder;

// Signal counters each cluster owns per command (ids 0 .. kSignalsPerCluster-1). Ids from
// kFirstPrivateSignal up are private: only the cluster's own transfers to its own SPM notify
// them, so their increments arrive in the order of its DMA engine and a wait on one needs
// no look at the other clusters' clocks (docs/device-model.md, "Signals").
inline constexpr unsigned kSignalsPerCluster = 64;
inline constexpr unsigned kFirstPrivateSignal = 48;

enum class ElementType { Int8, Int16, Fp16, Fp32 };

struct ClusterStats {
  unsigned cluster = 0;         // device cluster index
  uint64_t end_cycle = 0;       // when its compute and DMA were both done
  uint64_t compute_cycles = 0;  // modeled cycles of compute accounted
  uint64_t dma_busy_cycles = 0; // cycles its RDMA engine was busy
  uint64_t wait_cycles = 0;     // cycles its compute timeline waited (DMA, signal, barrier)
  uint64_t dma_transfers = 0;
  uint64_t barriers = 0;
  uint64_t ddr_bytes_read = 0;
  uint64_t ddr_bytes_written = 0;
  uint64_t noc_bytes = 0;             // bytes its engine put on the NoC
  uint64_t multicast_saved_bytes = 0; // DDR reads avoided by multicast
  uint64_t spm_high_water = 0;        // highest SPM offset touched (+1), or reported
};

struct CommandStats {
  uint64_t id = 0; // process-wide, increasing
  std::string name;
  unsigned device_index = 0;
  std::string device_name;
  double clock_hz = 1;
  uint64_t start_cycle = 0;
  uint64_t end_cycle = 0;
  double host_seconds = 0; // wall time from begin() to end()
  uint64_t ddr_bytes_read = 0;
  uint64_t ddr_bytes_written = 0;
  uint64_t noc_bytes = 0;
  uint64_t multicast_saved_bytes = 0;
  uint64_t spm_high_water = 0; // maximum over clusters
  uint64_t dma_transfers = 0;
  std::vector<ClusterStats> clusters;
  bool ok = true;
  std::string error;

  uint64_t cycles() const { return end_cycle - start_cycle; }
  double modeled_seconds() const { return static_cast<double>(cycles()) / clock_hz; }
  // One JSON object (the format of the runtime's vendor query and MANYCL_STATS files).
  std::string to_json() const;
  // One human-readable line (plus one per cluster).
  std::string to_text() const;
};

// The state of one cluster while it runs one command. All methods are meant to be called
// from that cluster's threads (its control thread or, inside parallel_for, its PE threads),
// except signal posts and multicasts that target it, which come from other clusters.
class ClusterContext {
public:
  ClusterContext(CommandRecorder &command, unsigned group_index, unsigned device_cluster);
  ~ClusterContext();
  ClusterContext(const ClusterContext &) = delete;
  ClusterContext &operator=(const ClusterContext &) = delete;

  CommandRecorder &command() { return command_; }
  Device &device();
  Cluster &cluster();
  unsigned group_index() const { return group_index_; } // 0 .. group_size()-1
  unsigned group_size() const;
  unsigned device_cluster() const { return device_cluster_; } // index in the device
  std::byte *spm_base();
  uint64_t spm_size() const;
  unsigned pe_count() const;

  // ---- modeled time ----
  // The cluster's compute timeline (program order).
  uint64_t now() const;
  // Advances compute by `cycles` (inside parallel_for: the PE's own share; the cluster
  // advances by the slowest PE when the loop ends).
  void account_cycles(uint64_t cycles, const char *label = "compute");
  // Cycles of `macs` multiply-accumulates of `type` spread over `pes` PEs at the configured
  // per-PE coprocessor rates (ceil).
  uint64_t mac_cycles(ElementType type, uint64_t macs, unsigned pes) const;

  // ---- RDMA engine ----
  // Validates every range, then performs the copy and models its time. Transfers of one
  // engine are performed and complete in issue order. On error nothing is copied and the
  // command is marked failed.
  Result<DmaHandle> dma(const DmaRequest &request);
  // Waits for `handle` (and so for every earlier transfer of this engine).
  Result<void> dma_wait(DmaHandle handle);
  Result<void> dma_wait_all();
  // True when the transfer has completed at the current modeled time.
  bool dma_done(DmaHandle handle) const;
  DmaHandle last_handle() const;

  // ---- deferred copies (host work only: modeled time and results are unaffected) ----
  // A DmaRequest::immutable_source transfer of contiguous bytes does not copy them into the
  // SPM: the destination range reads as its source until something needs the SPM bytes.
  // Every other transfer that reads or writes an SPM range first copies the deferred bytes
  // it overlaps (materialize); so must any other reader or writer of the SPM. A multicast of
  // parameters is then one set of bytes the clusters' native functions read, not five copies.
  // The host bytes of [offset, offset + bytes) when that range lies inside one deferred
  // copy, else null (after copying the deferred bytes the range overlaps).
  const std::byte *deferred_view(uint64_t offset, uint64_t bytes);
  // Copies the deferred bytes overlapping [offset, offset + bytes) into the SPM.
  void materialize(uint64_t offset, uint64_t bytes) { cut_deferred(offset, bytes, true); }
  // Forgets the deferred bytes of [offset, offset + bytes): every byte of the range is about
  // to be written.
  void overwrite(uint64_t offset, uint64_t bytes) { cut_deferred(offset, bytes, false); }
  bool has_deferred() const { return deferred_count_.load(std::memory_order_acquire) != 0; }

  // ---- synchronization ----
  // Barrier over all clusters of the command. Compute timelines leave at
  // max(arrivals) + barrier_latency_cycles. Outstanding DMA is not waited for.
  Result<void> barrier();
  // Adds `count` to signal `signal` of cluster `target` (group index) at now() +
  // signal_latency_cycles.
  Result<void> signal_post(unsigned target, unsigned signal, uint64_t count = 1);
  // Blocks until this cluster's signal `signal` reached `value`; the compute timeline moves
  // to the modeled time at which the value-th increment arrived.
  Result<void> signal_wait(unsigned signal, uint64_t value);
  uint64_t signal_value(unsigned signal) const;

  // ---- PEs ----
  // Runs body(index, pe) for index in [0, count): each PE takes a contiguous slice. Runs
  // serially when called from inside another parallel_for.
  Result<void> parallel_for(uint64_t count, const std::function<void(uint64_t, unsigned)> &body);

  // ---- checks ----
  // True when [ptr, ptr + size) lies in this cluster's SPM; also raises the SPM high-water
  // mark. A failure marks the command failed.
  Result<void> check_spm_range(const void *ptr, uint64_t size);
  void note_spm_used(uint64_t end_offset);

  ClusterStats stats() const;
  // The end of this cluster's work: max(compute, DMA engine).
  uint64_t finish_cycle() const;

private:
  friend class CommandRecorder;
  friend class ScopedClusterContext;
  Error fail(std::string message);
  Arbiter &arbiter();
  // The outermost scope on the cluster starts the cluster's share for the arbiter, its end
  // finishes it (the PE threads' scopes nest inside).
  void enter_scope();
  void exit_scope();
  // Reserves DDR for a transfer issued at compute time `issue` (waits for its turn).
  Result<uint64_t> reserve_ddr(uint64_t issue, uint64_t not_before, uint64_t bytes);
  // A signal wait's release: the time of the value-th increment (with mutex() of the arbiter).
  uint64_t signal_release_locked(unsigned signal, uint64_t value) const;
  void advance_to(uint64_t cycle, const char *what, const std::string &detail);
  void receive_signal(unsigned signal, uint64_t count, uint64_t stamp);
  // Records [offset, offset + bytes) of this SPM as reading `source` (merged with adjacent
  // deferred copies of adjacent source bytes).
  void defer(uint64_t offset, uint64_t bytes, const std::byte *source);
  // Removes [offset, offset + bytes) from the deferred copies (copying those bytes into the
  // SPM first with `copy`); the parts of a copy outside the range stay deferred.
  void cut_deferred(uint64_t offset, uint64_t bytes, bool copy);
  void cut_deferred_locked(uint64_t offset, uint64_t bytes, bool copy);

  CommandRecorder &command_;
  unsigned group_index_;
  unsigned device_cluster_;

  mutable std::mutex mutex_; // timelines and statistics
  uint64_t now_ = 0;
  uint64_t engine_free_ = 0;
  DdrCalendar own_ddr_;              // DmaRequest::private_ddr_share transfers (under mutex_)
  std::vector<uint64_t> completion_; // per handle - 1: modeled completion cycle
  ClusterStats stats_;

  ArbiterSlot slot_;
  std::atomic<unsigned> scope_depth_{0};
  // The signal wait in progress (under the arbiter's mutex): a post that satisfies it sets
  // the slot's release time at once, so the arbiter never sees a gap.
  int wait_signal_ = -1;
  uint64_t wait_value_ = 0;
  uint64_t wait_from_ = 0; // compute clock when the wait began

  // Signals: value (atomic for spinning) and the sorted arrival stamps, under the
  // arbiter's mutex. Allocated on first use: most commands never signal, and a short
  // command should not pay for kSignalsPerCluster counters.
  struct Signal {
    std::atomic<uint64_t> value{0};
    std::vector<uint64_t> stamps;
  };
  Signal *signals();
  std::atomic<Signal *> signals_{nullptr};

  struct Deferred {
    uint64_t offset, bytes;
    const std::byte *source;
  };
  std::mutex deferred_mutex_;
  std::vector<Deferred> deferred_; // disjoint ranges (under deferred_mutex_)
  std::atomic<size_t> deferred_count_{0};
};

class CommandRecorder : public std::enable_shared_from_this<CommandRecorder> {
public:
  // Starts a command on the clusters `clusters` (device indices, distinct) of `device`.
  // It starts at max(not_before_cycle, the time each of these clusters became free).
  // `domain`: the DDR domain it reserves (a sub-device's, Device::ddr_domain(clusters));
  // null: the whole device's.
  static Result<std::shared_ptr<CommandRecorder>> begin(Device &device, std::string name,
                                                        std::vector<unsigned> clusters,
                                                        uint64_t not_before_cycle = 0,
                                                        Arbiter *domain = nullptr);
  // A command on one cluster (no vector to build).
  static Result<std::shared_ptr<CommandRecorder>> begin_on_cluster(Device &device, std::string name,
                                                                   unsigned cluster,
                                                                   uint64_t not_before_cycle = 0,
                                                                   Arbiter *domain = nullptr);
  ~CommandRecorder();

  Device &device() { return device_; }
  const std::string &name() const { return name_; }
  uint64_t id() const { return id_; }
  uint64_t start_cycle() const { return start_cycle_; }
  unsigned group_size() const { return solo_ ? 1u : static_cast<unsigned>(contexts_.size()); }
  ClusterContext &context(unsigned group_index) { return solo_ ? *solo_ : *contexts_[group_index]; }

  // Convenience for tests and simple callers: runs body on every cluster of the group, each
  // on its cluster's control thread with the context set, and waits for all of them.
  // Returns the command's error, if any. Does not call end(). `cooperative`: each cluster's
  // body runs as a fiber of the host pool (host_pool.h), as kbin record streams do.
  Result<void> run(const std::function<void(ClusterContext &)> &body, bool cooperative = false);

  // Marks the command failed (the first message is kept) and wakes every waiter.
  void fail(std::string message);
  bool failed() const { return failed_.load(); }
  Error error() const;

  // Models a host-side copy into or out of DDR (clEnqueueRead/Write/CopyBuffer): the DDR
  // is busy for bytes / ddr bandwidth, counted on the first cluster of the group.
  void account_host_transfer(uint64_t ddr_bytes_read, uint64_t ddr_bytes_written);

  // Ends the command: computes its statistics, advances the clusters' free time, emits
  // trace events and the MANYCL_STATS line. Idempotent; call after every cluster finished.
  const CommandStats &end();
  bool ended() const { return ended_; }
  // The statistics (complete after end()).
  const CommandStats &stats() const { return stats_; }

  // Use begin(); public only so that the recorder and its control block are one allocation.
  struct Token {
    explicit Token() = default;
  };
  CommandRecorder(Token, Device &device, Arbiter &domain, std::string name,
                  const unsigned *clusters, size_t count, uint64_t start_cycle);

private:
  friend class ClusterContext;

  Device &device_;
  Arbiter &arbiter_;
  std::string name_;
  uint64_t id_;
  uint64_t start_cycle_;
  std::chrono::steady_clock::time_point host_begin_;
  // The clusters' states: a one-cluster command (most of them) keeps its one in place.
  std::optional<ClusterContext> solo_;
  std::vector<std::unique_ptr<ClusterContext>> contexts_;

  std::atomic<bool> failed_{false};
  mutable std::mutex error_mutex_;
  std::string error_;

  // Barriers and signal waits of the whole command, under the arbiter's mutex.
  std::atomic<uint64_t> barrier_generation_{0};
  unsigned barrier_arrived_ = 0;
  uint64_t barrier_max_arrival_ = 0;
  uint64_t barrier_release_ = 0;

  std::mutex end_mutex_;
  bool ended_ = false;
  CommandStats stats_;
};

// The per-thread current cluster context that device_api.h functions act on.
ClusterContext *current_cluster_context();

// Inside ClusterContext::parallel_for: the PE running the calling thread's slice; else 0.
unsigned current_pe_index();

// Sets the current cluster context of the calling thread for its lifetime (restores the
// previous one after). Cluster::run_on_pes propagates it to the PE threads.
class ScopedClusterContext {
public:
  explicit ScopedClusterContext(ClusterContext *context);
  explicit ScopedClusterContext(ClusterContext &context) : ScopedClusterContext(&context) {}
  ~ScopedClusterContext();
  ScopedClusterContext(const ScopedClusterContext &) = delete;
  ScopedClusterContext &operator=(const ScopedClusterContext &) = delete;

private:
  ClusterContext *previous_;
  ClusterContext *context_;
};

// MANYCL_CHECK=1: native functions verify their operands (mcl_check_spm_range). Read once;
// set_checked_mode overrides it (tests).
bool checked_mode();
void set_checked_mode(bool on);

} // namespace manycl::device
