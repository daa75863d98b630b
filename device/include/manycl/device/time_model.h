// The device-wide part of modeled time: the cycle at which each cluster becomes free between
// commands, the calendar of the DDR, and the arbiter that makes every shared resource (the DDR
// calendar, signals, barriers) serve clusters in modeled-time order, whatever order the host
// threads that simulate them happen to run in (docs/device-model.md, "Determinism").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "manycl/device/host_pool.h"
#include "manycl/result.h"

namespace manycl::device {

// Ceil(bytes / bytes_per_cycle), the cycles a link of that bandwidth needs for `bytes`.
uint64_t transfer_cycles(uint64_t bytes, double bytes_per_cycle);

// Busy intervals of one DDR (not thread-safe: its Arbiter serializes it).
class DdrCalendar {
public:
  // Reserves `cycles` of DDR time, not before `not_before`, filling the gaps between earlier
  // reservations (a transfer's DDR time may be split around others: the DDR interleaves
  // requests). Returns the cycle at which the last of them is served.
  uint64_t reserve(uint64_t not_before, uint64_t cycles);
  // Number of separate busy intervals (for tests of its bound).
  size_t intervals() const { return busy_.size(); }

private:
  std::map<uint64_t, uint64_t> busy_; // start -> end, disjoint, not adjacent
};

// How the arbiter sees one cluster's share of one command (a ClusterContext owns it).
struct ArbiterSlot {
  enum class State : uint8_t {
    NotStarted, // the command began, its job has not started on the cluster yet
    Running,    // issuing work: its next shared-resource event is at `time` or later
    Blocked,    // in a barrier or signal wait that another cluster must release
    Done,       // its share of the command is over
  };
  State state = State::NotStarted; // under the arbiter's mutex
  // Running: a lower bound of the modeled time of its next shared-resource event (its compute
  // clock, or a signal wait's release); NotStarted: the command's start. Only grows, except
  // under the arbiter's mutex.
  std::atomic<uint64_t> time{0};
  uint64_t sequence = 0; // DDR reservations committed (under the mutex): the second key
  unsigned cluster = 0;  // device cluster: the third key, and hand-over between commands
  uint64_t command = 0;  // command id: the last key; signals stay inside a command
  bool joined = false;
  ArbiterSlot *prev = nullptr, *next = nullptr;
};

// One DDR domain: the whole device, or the clusters of one sub-device (each owns a fixed share
// of the DDR bandwidth, so that its modeled time does not depend on what other sub-devices run
// meanwhile). Commands of the domain reserve its calendar in the order of the key
// (issue time, reservations so far, cluster, command): a reservation waits, on the host, until
// every other cluster of the domain is known not to issue a smaller key (its clock passed the
// key, it is blocked on a synchronization that another cluster must release, or it is done).
// Its mutex also guards the barriers and signals of the domain's commands, so that a release
// and the released cluster's new time change together.
class Arbiter {
public:
  Arbiter(double ddr_bytes_per_cycle, unsigned device_clusters);
  Arbiter(const Arbiter &) = delete;
  Arbiter &operator=(const Arbiter &) = delete;

  double ddr_bytes_per_cycle() const { return ddr_bytes_per_cycle_; }
  std::mutex &mutex() { return mutex_; }
  CoopCondition &cv() { return cv_; }

  // A command's cluster joins when the command begins (NotStarted at `start`) and leaves when
  // the command ends; start() when its job starts on the cluster, finish() when it is over.
  void join(ArbiterSlot &slot, unsigned cluster, uint64_t command, uint64_t start);
  void leave(ArbiterSlot &slot);
  void start(ArbiterSlot &slot, uint64_t now);
  void finish(ArbiterSlot &slot);
  // The slot's clock advanced to `now` (never moves it back); wakes waiters only when there
  // are some.
  void publish(ArbiterSlot &slot, uint64_t now);
  // Waits for the turn of `slot`, whose clock is `time`, then reserves `cycles` of DDR not
  // before `not_before`. Gives up (error) when `failed` becomes true or after `timeout_ms`.
  Result<uint64_t> reserve_ddr(ArbiterSlot &slot, uint64_t time, uint64_t not_before,
                               uint64_t cycles, const std::atomic<bool> &failed,
                               long long timeout_ms);

  // ---- with mutex() held (barriers and signals of command.cpp) ----
  // Sets a slot's state and time and wakes the waiters.
  void set_locked(ArbiterSlot &slot, ArbiterSlot::State state, uint64_t time);
  // True when no other cluster of slot's command can still post a signal stamped before
  // `time`.
  bool signal_final_locked(const ArbiterSlot &slot, uint64_t time) const;
  // Waiters for other clusters' clocks (they need publish() to wake them).
  std::atomic<unsigned> &clock_waiters() { return clock_waiters_; }

  size_t ddr_intervals() const;

private:
  uint64_t bound_locked(const ArbiterSlot &slot) const;
  bool ddr_turn_locked(const ArbiterSlot &slot, uint64_t time) const;

  const double ddr_bytes_per_cycle_;
  mutable std::mutex mutex_; // adaptive (adaptive_mutex.h)
  CoopCondition cv_;
  std::atomic<unsigned> clock_waiters_{0};
  DdrCalendar calendar_;
  ArbiterSlot *head_ = nullptr;
  std::vector<unsigned> started_on_; // per device cluster: slots Running or Blocked
};

class TimeModel {
public:
  explicit TimeModel(unsigned clusters);

  // The cycle at which cluster `c` finished its last command.
  uint64_t cluster_time(unsigned c) const;
  void set_cluster_time(unsigned c, uint64_t cycle);
  // Latest cluster time: the device's modeled "now" once all commands finished.
  uint64_t device_time() const;

private:
  mutable std::mutex mutex_;
  std::vector<uint64_t> cluster_time_;
};

} // namespace manycl::device
