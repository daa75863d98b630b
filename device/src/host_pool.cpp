#include "manycl/device/host_pool.h"

#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "fiber_locals.h"
#include "manycl/device/adaptive_mutex.h"
#include "manycl/device/host_placement.h"
#include "manycl/env.h"
#include "manycl/fiber_switch.h"

#if defined(__SANITIZE_ADDRESS__)
#define MANYCL_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MANYCL_ASAN_FIBERS 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MANYCL_TSAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MANYCL_TSAN_FIBERS 1
#endif
#endif

#ifdef MANYCL_ASAN_FIBERS
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef MANYCL_TSAN_FIBERS
#include <sanitizer/tsan_interface.h>
#endif

namespace manycl::device {

namespace {
// Native functions run on fiber stacks (the caller drains its own batch there), so the stacks
// are as large as a thread's usual one; pages are only committed when touched.
constexpr size_t kFiberStackBytes = size_t{8} << 20;
constexpr size_t kGuardBytes = 4096;

// How long an idle worker watches for new work before it sleeps (MANYCL_HOST_SPIN_US).
constexpr long kDefaultSpinUs = 50;
// The first part of a watch only spins; after it the watcher yields its core between looks.
constexpr auto kPureSpin = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Fiber-local (swapped with each fiber, fiber_locals.h): a team member is inside a task.
thread_local bool t_inside_task = false;
thread_local Fiber *t_fiber = nullptr; // the fiber running on this thread, if any

struct TaskScope {
  bool saved = std::exchange(t_inside_task, true);
  ~TaskScope() { t_inside_task = saved; }
};

using Clock = std::chrono::steady_clock;
} // namespace

void swap_pool_locals(FiberLocals &saved) {
  std::swap(t_inside_task, saved.inside_task);
}

// The members of one run_team() call still running, and the calling fiber to wake when the
// last one returns (null for a calling thread, which waits on `done`). Under the pool's mutex.
// The caller is woken once, by the last member: with a condition shared by every fiber, each
// member's return woke every cluster thread waiting for a team (a futex storm under
// MANYCL_COST=0 teams).
struct FiberTeam {
  unsigned running = 0;
  Fiber *waiter = nullptr;
  std::condition_variable done;
};

struct Fiber {
  enum class State : uint8_t { Ready, Running, Parked, Finished };
  fiber::Context context;
  void *stack = nullptr;
  const std::function<void()> *job = nullptr;            // run_cooperative's job, or
  const std::function<void(unsigned)> *member = nullptr; // run_team's member...
  unsigned member_index = 0;                             // ...with this index
  FiberTeam *team = nullptr;
  std::condition_variable *done_signal = nullptr; // run_cooperative's caller waits on it
  HostPool *pool = nullptr;
  HostPool::Worker *worker = nullptr;
  State state = State::Ready; // under the pool's mutex
  bool started = false;       // a worker took it up (under the pool's mutex)
  bool returned = false;      // its job returned (worker thread only)
  bool wake_pending = false;  // woken while still running towards park_locked()
  bool done = false;          // the job returned and the fiber left its stack
  Clock::time_point deadline = Clock::time_point::max();
  FiberLocals locals; // the fiber's thread-locals while it is not running
#ifdef MANYCL_TSAN_FIBERS
  void *tsan = nullptr;
#endif
#ifdef MANYCL_ASAN_FIBERS
  void *asan_fake_stack = nullptr;
#endif
};

struct HostPool::Batch {
  const std::function<void(unsigned)> *task = nullptr;
  unsigned count = 0;
  std::atomic<unsigned> next{0}; // next task index to hand out
  unsigned users = 0;            // workers inside drain(), under the pool's mutex
  Fiber *waiter = nullptr;       // the caller, parked until users == 0 (fiber callers)
};

struct HostPool::Worker {
  unsigned index = 0;
  std::thread thread;
  std::condition_variable wake; // under the pool's mutex
  bool idle = false;
  std::deque<Fiber *> ready;   // fibers to resume, oldest first
  std::vector<Fiber *> parked; // fibers waiting (for their deadlines)
  fiber::Context scheduler;    // where a fiber returns when it yields
#ifdef MANYCL_TSAN_FIBERS
  void *tsan = nullptr;
#endif
#ifdef MANYCL_ASAN_FIBERS
  const void *stack_bottom = nullptr;
  size_t stack_size = 0;
#endif
  // Where the worker's time went (MANYCL_HOST_POOL_STATS): running fibers, running tasks of
  // batches, watching for work, sleeping. Written by the worker, read at exit.
  std::atomic<uint64_t> ns_fibers{0}, ns_tasks{0}, ns_watching{0}, ns_sleeping{0}, sleeps{0};
};

namespace {

uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

} // namespace

namespace {

// Switches from the running context to `to`, telling the sanitizers about the stack change.
// `to_stack`/`to_size` describe the destination stack for ASan (null: a thread's own stack,
// whose bounds the worker recorded).
void switch_context(fiber::Context &from, const fiber::Context &to,
                    [[maybe_unused]] void **fake_stack_save, [[maybe_unused]] const void *to_stack,
                    [[maybe_unused]] size_t to_size, [[maybe_unused]] void *tsan_to) {
#ifdef MANYCL_TSAN_FIBERS
  __tsan_switch_to_fiber(tsan_to, 0);
#endif
#ifdef MANYCL_ASAN_FIBERS
  __sanitizer_start_switch_fiber(fake_stack_save, to_stack, to_size);
#endif
  fiber::switch_to(from, to);
#ifdef MANYCL_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(fake_stack_save ? *fake_stack_save : nullptr, nullptr, nullptr);
#endif
}

void *allocate_stack() {
  void *p = mmap(nullptr, kFiberStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
  mprotect(p, kGuardBytes, PROT_NONE); // overflow faults instead of corrupting a neighbour
  return p;
}

} // namespace

HostPool::HostPool(unsigned threads)
    : stats_(env::flag("MANYCL_HOST_POOL_STATS")),
      spin_(std::chrono::microseconds(
          std::max(0L, env::number("MANYCL_HOST_SPIN_US", kDefaultSpinUs)))) {
  make_adaptive(mutex_);
  threads = std::max(threads, 1u);
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) {
    workers_.push_back(std::make_unique<Worker>());
    workers_.back()->index = i;
  }
  for (auto &w : workers_)
    w->thread = std::thread([this, worker = w.get()] { worker_loop(*worker); });
}

HostPool::~HostPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    work_epoch_.fetch_add(1, std::memory_order_release);
    for (auto &w : workers_)
      w->wake.notify_all();
  }
  for (auto &w : workers_)
    w->thread.join();
  for (void *stack : idle_stacks_)
    munmap(stack, kFiberStackBytes);
}

HostPool &HostPool::shared() {
  // Never destroyed: clusters of devices that outlive static destruction may still use it.
  static HostPool *pool = [] {
    const long forced = env::number("MANYCL_HOST_THREADS", 0);
    auto *created = new HostPool(forced > 0 ? static_cast<unsigned>(forced)
                                            : std::max(1u, HostPlacement::host().host_pus()));
    if (created->stats_)
      std::atexit([] { pool->print_stats(stderr); });
    return created;
  }();
  return *pool;
}

void HostPool::print_stats(std::FILE *out) const {
  std::fprintf(out, "manycl host pool: %zu workers (host CPUs the process may use: %u)\n",
               workers_.size(), HostPlacement::host().host_pus());
  for (const auto &w : workers_) {
    auto ms = [](const std::atomic<uint64_t> &ns) { return double(ns.load()) * 1e-6; };
    std::fprintf(out,
                 "manycl host pool: worker %u: fibers %.1f ms, tasks %.1f ms, watching %.1f ms, "
                 "sleeping %.1f ms (%llu sleeps)\n",
                 w->index, ms(w->ns_fibers), ms(w->ns_tasks), ms(w->ns_watching),
                 ms(w->ns_sleeping), static_cast<unsigned long long>(w->sleeps.load()));
  }
}

bool HostPool::inside_task() {
  return t_inside_task;
}

bool HostPool::inside_fiber() {
  return t_fiber != nullptr;
}

void HostPool::drain(Batch &batch) {
  TaskScope scope;
  for (;;) {
    const unsigned i = batch.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= batch.count)
      return;
    (*batch.task)(i);
  }
}

void HostPool::wake_idle_workers_locked(unsigned count) {
  for (auto &w : workers_) {
    if (count == 0)
      return;
    if (w->idle && w->ready.empty()) {
      w->idle = false; // one wake-up per worker is enough
      w->wake.notify_one();
      --count;
    }
  }
}

void HostPool::run(unsigned count, const std::function<void(unsigned)> &task) {
  if (count == 0)
    return;
  if (count == 1 || workers_.size() <= 1 || t_inside_task) {
    TaskScope scope;
    for (unsigned i = 0; i < count; ++i)
      task(i);
    return;
  }
  Batch batch;
  batch.task = &task;
  batch.count = count;
  {
    std::lock_guard lock(mutex_);
    batches_.push_back(&batch);
    work_epoch_.fetch_add(1, std::memory_order_release);
    wake_idle_workers_locked(count - 1);
  }
  drain(batch);
  std::unique_lock lock(mutex_);
  // No worker may pick the batch up from now on: the caller owns its storage.
  if (auto it = std::find(batches_.begin(), batches_.end(), &batch); it != batches_.end())
    batches_.erase(it);
  while (batch.users != 0) {
    if (t_fiber) {
      batch.waiter = t_fiber;
      park_locked(lock, Clock::time_point::max());
      batch.waiter = nullptr;
    } else {
      batch_done_.wait(lock);
    }
  }
}

void *HostPool::take_stack_locked(std::unique_lock<std::mutex> &lock) {
  if (!idle_stacks_.empty()) {
    void *stack = idle_stacks_.back();
    idle_stacks_.pop_back();
    return stack;
  }
  lock.unlock();
  void *stack = allocate_stack();
  lock.lock();
  return stack;
}

void HostPool::queue_fresh_locked(Fiber &fiber, Worker &worker) {
  fiber.pool = this;
  fiber.worker = &worker;
  fiber.state = Fiber::State::Ready;
  worker.ready.push_back(&fiber);
  work_epoch_.fetch_add(1, std::memory_order_release);
  if (worker.idle) {
    worker.idle = false;
    worker.wake.notify_one();
  } else {
    wake_idle_workers_locked(1); // another worker may take it up first (steal_fresh_fiber)
  }
}

void HostPool::run_cooperative(unsigned affinity, const std::function<void()> &job) {
  if (t_fiber || t_inside_task) {
    job();
    return;
  }
  Fiber fiber;
  fiber.job = &job;
  // The job sees the submitter's cluster, context and error state, as it would on its thread.
  {
    FiberLocals mine;
    swap_fiber_locals(mine); // takes ours out...
    fiber.locals = mine;
    swap_fiber_locals(mine); // ...and puts them back
  }
  std::unique_lock lock(mutex_);
  fiber.stack = take_stack_locked(lock);
  if (!fiber.stack) {
    lock.unlock();
    job(); // no memory for a stack: run it here, blocking as a thread would
    return;
  }
  std::condition_variable done; // notified under mutex_, so it outlives the notification
  fiber.done_signal = &done;
  queue_fresh_locked(fiber, *workers_[affinity % workers_.size()]);
  done.wait(lock, [&] { return fiber.done; });
  idle_stacks_.push_back(fiber.stack);
}

void HostPool::run_team(unsigned count, unsigned affinity,
                        const std::function<void(unsigned)> &member) {
  if (count == 0)
    return;
  if (count == 1) {
    TaskScope scope;
    member(0);
    return;
  }
  if (t_inside_task && !t_fiber) {
    run_team_on_threads(count, member);
    return;
  }
  // The members see the caller's cluster, context and error state, as PE threads did.
  FiberLocals caller;
  swap_fiber_locals(caller);
  FiberLocals inherited = caller;
  swap_fiber_locals(caller);
  inherited.inside_task = true;

  std::vector<Fiber> fibers(count);
  std::unique_lock lock(mutex_);
  // Every stack first: a team runs whole or not at all (its members wait for each other).
  for (unsigned i = 0; i < count; ++i) {
    fibers[i].stack = take_stack_locked(lock);
    if (!fibers[i].stack) {
      for (unsigned j = 0; j < i; ++j)
        idle_stacks_.push_back(fibers[j].stack);
      lock.unlock();
      run_team_on_threads(count, member); // no memory for stacks: threads, as PEs once were
      return;
    }
  }
  FiberTeam team;
  team.running = count;
  team.waiter = t_fiber;
  for (unsigned i = 0; i < count; ++i) {
    Fiber &fiber = fibers[i];
    fiber.member = &member;
    fiber.member_index = i;
    fiber.team = &team;
    fiber.locals = inherited;
    queue_fresh_locked(fiber, *workers_[(affinity + i) % workers_.size()]);
  }
  if (t_fiber) {
    while (team.running != 0)
      park_locked(lock, Clock::time_point::max());
  } else {
    team.done.wait(lock, [&] { return team.running == 0; });
  }
  for (Fiber &fiber : fibers)
    idle_stacks_.push_back(fiber.stack);
}

void HostPool::run_team_on_threads(unsigned count, const std::function<void(unsigned)> &member) {
  FiberLocals caller;
  swap_fiber_locals(caller);
  FiberLocals inherited = caller;
  swap_fiber_locals(caller);
  inherited.inside_task = true;
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (unsigned i = 0; i < count; ++i)
    threads.emplace_back([&member, inherited, i]() mutable {
      swap_fiber_locals(inherited); // a fresh thread: nothing of its own to keep
      member(i);
    });
  for (auto &thread : threads)
    thread.join();
}

void HostPool::ready_locked(Fiber &fiber) {
  switch (fiber.state) {
  case Fiber::State::Parked: {
    fiber.state = Fiber::State::Ready;
    Worker &w = *fiber.worker;
    w.parked.erase(std::find(w.parked.begin(), w.parked.end(), &fiber));
    w.ready.push_back(&fiber);
    work_epoch_.fetch_add(1, std::memory_order_release);
    if (w.idle) {
      w.idle = false;
      w.wake.notify_one();
    }
    break;
  }
  case Fiber::State::Running:
    fiber.wake_pending = true;
    break;
  case Fiber::State::Ready:
  case Fiber::State::Finished:
    break;
  }
}

void HostPool::park_locked(std::unique_lock<std::mutex> &lock, Clock::time_point deadline) {
  Fiber &fiber = *t_fiber;
  if (std::exchange(fiber.wake_pending, false))
    return;
  fiber.state = Fiber::State::Parked;
  fiber.deadline = deadline;
  fiber.worker->parked.push_back(&fiber);
  lock.unlock();
  // Only this fiber's worker resumes it, and that worker is this thread: a wake-up that
  // arrives before the switch below completes waits in the ready queue. The worker swaps
  // the thread-locals out and back in.
  Worker &worker = *fiber.worker;
#ifdef MANYCL_ASAN_FIBERS
  switch_context(fiber.context, worker.scheduler, &fiber.asan_fake_stack, worker.stack_bottom,
                 worker.stack_size, nullptr);
#elif defined(MANYCL_TSAN_FIBERS)
  switch_context(fiber.context, worker.scheduler, nullptr, nullptr, 0, worker.tsan);
#else
  switch_context(fiber.context, worker.scheduler, nullptr, nullptr, 0, nullptr);
#endif
  lock.lock();
}

namespace {
void fiber_entry(void *) {
#ifdef MANYCL_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  Fiber &fiber = *t_fiber;
  if (fiber.member)
    (*fiber.member)(fiber.member_index);
  else
    (*fiber.job)();
  // Back to the worker for good: it sees the flag and completes the job.
  fiber.returned = true;
  HostPool::Worker *worker = fiber.worker;
#ifdef MANYCL_ASAN_FIBERS
  // nullptr fake-stack slot: this stack is being left for good.
  switch_context(fiber.context, worker->scheduler, nullptr, worker->stack_bottom,
                 worker->stack_size, nullptr);
#elif defined(MANYCL_TSAN_FIBERS)
  switch_context(fiber.context, worker->scheduler, nullptr, nullptr, 0, worker->tsan);
#else
  switch_context(fiber.context, worker->scheduler, nullptr, nullptr, 0, nullptr);
#endif
  std::abort(); // a finished fiber is never resumed
}
} // namespace

Fiber *HostPool::steal_fresh_fiber_locked(Worker &thief) {
  for (auto &w : workers_) {
    if (w.get() == &thief)
      continue;
    // The newest fresh fiber: the victim runs its oldest ones first.
    for (auto it = w->ready.rbegin(); it != w->ready.rend(); ++it) {
      Fiber *f = *it;
      if (!f->started) {
        w->ready.erase(std::next(it).base());
        f->worker = &thief;
        return f;
      }
    }
  }
  return nullptr;
}

void HostPool::worker_loop(Worker &worker) {
  // Workers serve every cluster: never the binding of the cluster thread that made the pool.
  HostPlacement::host().unbind_current_thread();
  {
    char name[16];
    std::snprintf(name, sizeof name, "manycl-pool-%u", worker.index);
    pthread_setname_np(pthread_self(), name);
  }
#ifdef MANYCL_TSAN_FIBERS
  worker.tsan = __tsan_get_current_fiber();
#endif
#ifdef MANYCL_ASAN_FIBERS
  {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&attr, &addr, &size);
      worker.stack_bottom = addr;
      worker.stack_size = size;
      pthread_attr_destroy(&attr);
    }
  }
#endif
  std::unique_lock lock(mutex_);
  bool watched = false; // watched for work since the last time this worker found some
  for (;;) {
    if (!worker.ready.empty()) {
      watched = false;
      Fiber &fiber = *worker.ready.front();
      worker.ready.pop_front();
      fiber.state = Fiber::State::Running;
      const bool fresh = !fiber.started;
      fiber.started = true;
      lock.unlock();
      if (fresh) {
        fiber::prepare(fiber.context, static_cast<char *>(fiber.stack) + kGuardBytes,
                       kFiberStackBytes - kGuardBytes, fiber_entry, nullptr);
#ifdef MANYCL_TSAN_FIBERS
        fiber.tsan = __tsan_create_fiber(0);
#endif
      }
      t_fiber = &fiber;
      swap_fiber_locals(fiber.locals);
      const auto ran_from = stats_ ? Clock::now() : Clock::time_point{};
#ifdef MANYCL_ASAN_FIBERS
      void *fake = nullptr;
      switch_context(worker.scheduler, fiber.context, &fake,
                     static_cast<char *>(fiber.stack) + kGuardBytes, kFiberStackBytes - kGuardBytes,
                     nullptr);
#elif defined(MANYCL_TSAN_FIBERS)
      switch_context(worker.scheduler, fiber.context, nullptr, nullptr, 0, fiber.tsan);
#else
      switch_context(worker.scheduler, fiber.context, nullptr, nullptr, 0, nullptr);
#endif
      // The fiber parked or returned.
      if (stats_)
        worker.ns_fibers.fetch_add(ns_since(ran_from), std::memory_order_relaxed);
      swap_fiber_locals(fiber.locals);
      t_fiber = nullptr;
      lock.lock();
      if (fiber.returned) {
        fiber.state = Fiber::State::Finished;
#ifdef MANYCL_TSAN_FIBERS
        __tsan_destroy_fiber(fiber.tsan);
#endif
        fiber.done = true;
        // A team's caller waits for its last member (a calling fiber is made ready, a
        // calling thread waits on the team's condition); run_cooperative's caller waits on a
        // condition of its own: a shared one woke every cluster thread whose fiber still ran
        // at each return (five clusters' threads at the end of every inference).
        if (!fiber.team) {
          fiber.done_signal->notify_one();
        } else if (--fiber.team->running == 0) {
          if (fiber.team->waiter)
            ready_locked(*fiber.team->waiter);
          else
            fiber.team->done.notify_one();
        }
      }
      continue;
    }
    if (!batches_.empty()) {
      Batch &batch = *batches_.front();
      if (batch.next.load(std::memory_order_relaxed) >= batch.count) {
        batches_.pop_front(); // every task handed out: the ones still running finish elsewhere
        continue;
      }
      ++batch.users;
      watched = false;
      lock.unlock();
      const auto drained_from = stats_ ? Clock::now() : Clock::time_point{};
      drain(batch);
      if (stats_)
        worker.ns_tasks.fetch_add(ns_since(drained_from), std::memory_order_relaxed);
      lock.lock();
      if (--batch.users == 0) {
        if (batch.waiter)
          ready_locked(*batch.waiter);
        else
          batch_done_.notify_all();
      }
      continue;
    }
    // Nothing of our own: take a fiber another worker has not started yet. It has no frames
    // on its stack, so nothing it runs can have kept this thread's or another's thread-local
    // addresses; once started, it stays with us.
    if (Fiber *fresh = steal_fresh_fiber_locked(worker)) {
      worker.ready.push_back(fresh);
      continue;
    }
    if (stopping_ && worker.parked.empty())
      return;
    // Nothing to do: watch for new work a little before sleeping. Clusters post work in quick
    // succession (a batch per native function, a wake-up per barrier), and a sleeping worker
    // costs the poster a futex wake and itself a context switch each time.
    // After the watch, everything is checked again under the lock (work, stopping_) before
    // the worker sleeps: a notification sent while it watched is not lost.
    if (!stopping_ && !watched) {
      const uint64_t seen = work_epoch_.load(std::memory_order_acquire);
      lock.unlock();
      const auto watched_from = Clock::now();
      const auto spin_end = watched_from + spin_;
      for (unsigned i = 1; work_epoch_.load(std::memory_order_acquire) == seen; ++i) {
        if ((i & 63) == 0) {
          const auto now = Clock::now();
          if (now >= spin_end)
            break;
          // Past the first few microseconds, give the core to any other runnable thread
          // between looks: on a host with more runnable threads than cores a watcher that
          // only spins would delay the very worker whose batch it is waiting for.
          if (now - watched_from >= kPureSpin)
            std::this_thread::yield();
        }
        cpu_relax();
      }
      worker.ns_watching.fetch_add(ns_since(watched_from), std::memory_order_relaxed);
      lock.lock();
      watched = true;
      continue;
    }
    // Idle: sleep until a fiber of ours is ready or a batch arrives; parked fibers with a
    // deadline are woken when it passes (their waits then time out).
    Clock::time_point next_deadline = Clock::time_point::max();
    for (Fiber *f : worker.parked)
      next_deadline = std::min(next_deadline, f->deadline);
    worker.idle = true;
    const auto slept_from = Clock::now();
    if (next_deadline == Clock::time_point::max())
      worker.wake.wait(lock);
    else
      worker.wake.wait_until(lock, next_deadline);
    worker.ns_sleeping.fetch_add(ns_since(slept_from), std::memory_order_relaxed);
    worker.sleeps.fetch_add(1, std::memory_order_relaxed);
    worker.idle = false;
    const auto now = Clock::now();
    for (size_t i = 0; i < worker.parked.size();) {
      Fiber *f = worker.parked[i];
      if (f->deadline <= now)
        ready_locked(*f); // erases it from parked
      else
        ++i;
    }
  }
}

// ---------------------------------------------------------------------------------------
// CoopBarrier

void CoopBarrier::release_locked(std::unique_lock<std::mutex> &lock) {
  arrived_ = 0;
  ++phase_;
  lock.unlock();
  released_.notify_all();
}

void CoopBarrier::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (++arrived_ >= expected_) {
    release_locked(lock);
    return;
  }
  const uint64_t phase = phase_;
  released_.wait_until(lock, Clock::time_point::max(), [&] { return phase_ != phase; });
}

void CoopBarrier::arrive_and_drop() {
  std::unique_lock lock(mutex_);
  --expected_;
  if (arrived_ != 0 && arrived_ >= expected_)
    release_locked(lock);
}

// ---------------------------------------------------------------------------------------
// CoopCondition

CoopCondition::CoopCondition() {
  make_adaptive(fibers_mutex_);
}

void CoopCondition::notify_all() {
  cv_.notify_all();
  std::vector<Fiber *> woken;
  {
    std::lock_guard lock(fibers_mutex_);
    if (fibers_.empty())
      return;
    woken.swap(fibers_);
  }
  for (Fiber *f : woken) {
    std::lock_guard lock(f->pool->mutex_);
    f->pool->ready_locked(*f);
  }
}

bool CoopCondition::wait_once(std::unique_lock<std::mutex> &lock, Clock::time_point deadline) {
  if (Clock::now() >= deadline)
    return false;
  if (HostPool::inside_fiber())
    wait_on_fiber(lock, deadline);
  else
    cv_.wait_until(lock, deadline);
  return true;
}

void CoopCondition::wait_on_fiber(std::unique_lock<std::mutex> &lock, Clock::time_point deadline) {
  Fiber *self = t_fiber;
  {
    std::lock_guard guard(fibers_mutex_);
    fibers_.push_back(self);
  }
  // Registered before the caller's mutex is released: a notifier that changes the state
  // under that mutex after us finds this fiber in the list.
  lock.unlock();
  {
    std::unique_lock pool_lock(self->pool->mutex_);
    self->pool->park_locked(pool_lock, deadline);
  }
  {
    std::lock_guard guard(fibers_mutex_);
    if (auto it = std::find(fibers_.begin(), fibers_.end(), self); it != fibers_.end())
      fibers_.erase(it); // woken by the deadline, not by a notify
  }
  lock.lock();
}

} // namespace manycl::device
