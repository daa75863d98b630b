// How the simulator uses the host: one pool of worker threads, as many as the host has
// cores, shared by every simulated cluster of every device in the process. It runs two kinds
// of work:
//
//  * cooperative tasks: a cluster's record stream runs as a fiber (its own stack) pinned to
//    one worker; when it waits (a barrier, a signal, its turn at the DDR arbiter, the end of
//    a batch) it yields the worker to another cluster's fiber instead of blocking the thread,
//    so five simulated clusters on two cores cost two running threads and user-space
//    switches, not five threads preempting each other;
//  * teams of cooperative fibers: the PEs of an OpenCL C work-group that meet at barriers
//    (run_team); a member waiting at the team's barrier (CoopBarrier) yields its worker, so
//    sixteen simulated PEs on one core are sixteen fibers, not sixteen blocked threads;
//  * batches of independent tasks: a step's data-parallel work (the modeled PEs of a native
//    function, the work-groups of an OpenCL C kernel). Whichever workers have no fiber ready
//    run them, with the caller, so one cluster's step spreads over all host cores while the
//    other clusters wait.
//
// Nothing here reaches modeled time: the arbiter orders shared resources by modeled time
// (time_model.h), and each modeled PE's cycles are accounted as its own whatever host thread
// ran it. A started fiber never moves to another worker (an idle worker may only take up one
// that has not started), so a thread-local address kept in its frames stays valid; the
// device's thread-locals are saved and restored around every switch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace manycl::device {

struct Fiber;

class HostPool {
public:
  // `threads` workers (at least 1).
  explicit HostPool(unsigned threads);
  ~HostPool();
  HostPool(const HostPool &) = delete;
  HostPool &operator=(const HostPool &) = delete;

  // The process's pool: one worker per host PU, or MANYCL_HOST_THREADS.
  static HostPool &shared();

  unsigned threads() const { return static_cast<unsigned>(workers_.size()); }

  // Runs task(i) for every i in [0, count), on the workers and the calling thread, and returns
  // when all have finished. Tasks must not wait for each other or yield. A task that calls
  // run() again runs that nested batch itself, in order.
  void run(unsigned count, const std::function<void(unsigned)> &task);

  // Runs `job` as a cooperative fiber queued on worker `affinity % threads()` (an idle worker
  // may take it up before it starts) and returns when it has returned; the calling thread
  // blocks meanwhile. Called from a fiber or a worker, runs `job`
  // right there.
  void run_cooperative(unsigned affinity, const std::function<void()> &job);

  // Runs member(i) for every i in [0, count) as cooperative fibers, member i queued on worker
  // (affinity + i) % threads() (an idle worker may take up a member that has not started),
  // and returns when all have returned. Members may wait for each other (CoopBarrier,
  // CoopCondition): each wait yields the member's worker. The calling thread blocks
  // meanwhile; a calling fiber parks. Members count as tasks (inside_task(): a batch a
  // member starts runs in order on the member itself, as on a PE). Called from a task that
  // is not a fiber, which must not wait for the pool's workers, the members run on threads
  // of their own.
  void run_team(unsigned count, unsigned affinity, const std::function<void(unsigned)> &member);

  // True while the calling thread runs a task of some batch.
  static bool inside_task();
  // True while the calling thread runs a cooperative fiber (waits may yield).
  static bool inside_fiber();

  struct Worker; // one host thread and the fibers pinned to it (host_pool.cpp)

  // Where each worker's time went: running fibers, running tasks, watching for work,
  // sleeping (printed at exit when MANYCL_HOST_POOL_STATS is set).
  void print_stats(std::FILE *out) const;

private:
  friend class CoopCondition;
  struct Batch;

  // With mutex_ held: a stack for a fiber, reused or new (null when out of memory; mutex_
  // is released while mapping one).
  void *take_stack_locked(std::unique_lock<std::mutex> &lock);
  // With mutex_ held: queues a fresh fiber on `worker` and wakes a worker for it.
  void queue_fresh_locked(Fiber &fiber, Worker &worker);
  void run_team_on_threads(unsigned count, const std::function<void(unsigned)> &member);

  // Claims and runs tasks of `batch` until none is left to hand out.
  static void drain(Batch &batch);
  void worker_loop(Worker &worker);
  // With mutex_ held: makes a parked fiber runnable (or remembers the wake-up if it is still
  // on its way to parking).
  void ready_locked(Fiber &fiber);
  // On a fiber: gives its worker back until ready_locked() is called for it or `deadline`
  // passes. `lock` holds mutex_ and is held again on return.
  void park_locked(std::unique_lock<std::mutex> &lock,
                   std::chrono::steady_clock::time_point deadline);
  void wake_idle_workers_locked(unsigned count);
  // With mutex_ held: a fiber queued on another worker that has not started yet, now the
  // thief's, or null.
  Fiber *steal_fresh_fiber_locked(Worker &thief);

  std::mutex mutex_;                    // adaptive (adaptive_mutex.h), as the arbiter's
  std::condition_variable batch_done_;  // a batch's last worker left it (non-fiber callers)
  std::deque<Batch *> batches_;         // with tasks still to hand out, oldest first
  std::atomic<uint64_t> work_epoch_{0}; // bumped (under mutex_) whenever work is posted
  const bool stats_; // MANYCL_HOST_POOL_STATS: the workers time their fibers and tasks
  const std::chrono::microseconds spin_; // how long an idle worker watches before sleeping
  bool stopping_ = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<void *> idle_stacks_; // fiber stacks to reuse
};

// A condition variable whose waits yield the worker when called on a cooperative fiber, and
// block the thread otherwise. Used with one std::mutex, like std::condition_variable.
class CoopCondition {
public:
  CoopCondition();
  void notify_all();

  // Waits until pred() (checked with `lock` held) or `deadline`; returns pred().
  template <class Pred>
  bool wait_until(std::unique_lock<std::mutex> &lock,
                  std::chrono::steady_clock::time_point deadline, Pred pred) {
    while (!pred()) {
      if (std::chrono::steady_clock::now() >= deadline)
        return pred();
      if (HostPool::inside_fiber())
        wait_on_fiber(lock, deadline);
      else
        cv_.wait_until(lock, deadline);
    }
    return true;
  }
  // One wait without a predicate (may wake spuriously); false once `deadline` has passed.
  bool wait_once(std::unique_lock<std::mutex> &lock,
                 std::chrono::steady_clock::time_point deadline);

private:
  void wait_on_fiber(std::unique_lock<std::mutex> &lock,
                     std::chrono::steady_clock::time_point deadline);

  std::condition_variable cv_;
  std::mutex fibers_mutex_;     // adaptive
  std::vector<Fiber *> fibers_; // fibers parked on this condition
};

// A barrier for a fixed number of participants (a team's members) whose waits yield the
// worker when called on a cooperative fiber and block the thread otherwise.
class CoopBarrier {
public:
  explicit CoopBarrier(unsigned participants) : expected_(participants) {}
  // Waits until every participant still in the barrier has arrived.
  void arrive_and_wait();
  // Leaves the barrier for good (the phase in progress no longer waits for the caller).
  void arrive_and_drop();

private:
  void release_locked(std::unique_lock<std::mutex> &lock);

  std::mutex mutex_;
  CoopCondition released_;
  unsigned expected_;
  unsigned arrived_ = 0;
  uint64_t phase_ = 0;
};

} // namespace manycl::device
