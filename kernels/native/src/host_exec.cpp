// Default host execution context: a small thread pool standing in for the cluster's PEs.
#include "manycl/native/exec.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

// Workers spin briefly for the next call before sleeping, so back-to-back calls (layers of a
// network) do not pay a futex wake-up each. Tasks are claimed one at a time under the mutex:
// the caller waits only for tasks that were claimed, never for a worker that has not woken
// up yet (on a busy host a descheduled worker simply takes no task).
struct mcl_native_host_pool {
  uint32_t threads = 1;
  std::vector<std::thread> workers;
  std::mutex run_mutex; // one parallel_for at a time
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::atomic<uint64_t> generation{0};
  bool stop = false;
  // The current call, guarded by `mutex`.
  mcl_native_task_fn body = nullptr;
  void *arg = nullptr;
  uint32_t count = 0, next = 0;
  std::atomic<uint32_t> completed{0};
  std::atomic<uint64_t> cycles{0};

  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  // Claims one task of the current call; false when none is left.
  bool claim(uint32_t &index, mcl_native_task_fn &fn, void *&fn_arg, uint32_t &total) {
    std::lock_guard lock(mutex);
    if (next >= count)
      return false;
    index = next++;
    fn = body;
    fn_arg = arg;
    total = count;
    return true;
  }

  void work(uint32_t pe) {
    uint32_t index, total;
    mcl_native_task_fn fn;
    void *fn_arg;
    while (claim(index, fn, fn_arg, total)) {
      fn(fn_arg, index, pe);
      if (completed.fetch_add(1, std::memory_order_acq_rel) + 1 == total) {
        std::lock_guard lock(mutex);
        finished.notify_all();
      }
    }
  }

  void worker(uint32_t pe) {
    uint64_t seen = 0;
    for (;;) {
      for (int spin = 0; spin < 20000 && generation.load(std::memory_order_acquire) == seen; ++spin)
        relax();
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stop || generation.load() != seen; });
        if (stop)
          return;
        seen = generation.load();
      }
      work(pe);
    }
  }
};

namespace {

void host_parallel_for(void *user, uint32_t n, mcl_native_task_fn body, void *arg) {
  auto *pool = static_cast<mcl_native_host_pool *>(user);
  if (pool->workers.empty() || n <= 1) {
    for (uint32_t i = 0; i < n; ++i)
      body(arg, i, 0);
    return;
  }
  std::lock_guard run(pool->run_mutex);
  {
    std::lock_guard lock(pool->mutex);
    pool->body = body;
    pool->arg = arg;
    pool->count = n;
    pool->next = 0;
    pool->completed.store(0);
    pool->generation.fetch_add(1, std::memory_order_acq_rel);
  }
  pool->wake.notify_all();
  pool->work(0);
  for (int spin = 0; spin < 20000 && pool->completed.load(std::memory_order_acquire) != n; ++spin)
    mcl_native_host_pool::relax();
  std::unique_lock lock(pool->mutex);
  pool->finished.wait(lock, [&] { return pool->completed.load() == n; });
}

void host_account(void *user, uint64_t cycles) {
  static_cast<mcl_native_host_pool *>(user)->cycles += cycles;
}

} // namespace

extern "C" {

mcl_native_host_pool *mcl_native_host_pool_create(uint32_t threads) {
  auto *pool = new mcl_native_host_pool;
  pool->threads = threads == 0 ? 1 : threads;
  for (uint32_t pe = 1; pe < pool->threads; ++pe)
    pool->workers.emplace_back([pool, pe] { pool->worker(pe); });
  return pool;
}

void mcl_native_host_pool_destroy(mcl_native_host_pool *pool) {
  if (!pool)
    return;
  {
    std::lock_guard lock(pool->mutex);
    pool->stop = true;
    pool->generation.fetch_add(1);
  }
  pool->wake.notify_all();
  for (auto &t : pool->workers)
    t.join();
  delete pool;
}

void mcl_native_host_exec_init(mcl_native_exec *exec, mcl_native_host_pool *pool,
                               uint8_t *spm_base, uint64_t spm_size) {
  *exec = mcl_native_exec{}; // optional hooks (resolve, operand, params_view) off
  exec->spm_base = spm_base;
  exec->spm_size = spm_size;
  exec->pe_count = pool ? pool->threads : 1;
  exec->flags = 0;
  exec->parallel_for = pool ? host_parallel_for : nullptr;
  exec->account_cycles = pool ? host_account : nullptr;
  exec->user = pool;
}

uint64_t mcl_native_host_pool_cycles(const mcl_native_host_pool *pool) {
  return pool ? pool->cycles.load() : 0;
}

void mcl_native_host_pool_reset_cycles(mcl_native_host_pool *pool) {
  if (pool)
    pool->cycles = 0;
}

} // extern "C"
