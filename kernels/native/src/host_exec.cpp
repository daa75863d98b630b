// Default host execution context: a small thread pool standing in for the cluster's PEs.
#include "manycl/native/exec.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

struct mcl_native_host_pool {
  uint32_t threads = 1;
  std::vector<std::thread> workers;
  std::mutex run_mutex; // one parallel_for at a time
  std::mutex mutex;
  std::condition_variable wake, finished;
  uint64_t generation = 0;
  bool stop = false;
  mcl_native_task_fn body = nullptr;
  void *arg = nullptr;
  uint32_t count = 0;
  std::atomic<uint32_t> next{0};
  uint32_t workers_done = 0;
  std::atomic<uint64_t> cycles{0};

  void drain(uint32_t pe) {
    for (uint32_t i = next.fetch_add(1); i < count; i = next.fetch_add(1))
      body(arg, i, pe);
  }

  void worker(uint32_t pe) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stop || generation != seen; });
        if (stop)
          return;
        seen = generation;
      }
      drain(pe);
      std::lock_guard lock(mutex);
      if (++workers_done == workers.size())
        finished.notify_one();
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
    pool->next.store(0);
    pool->workers_done = 0;
    ++pool->generation;
  }
  pool->wake.notify_all();
  pool->drain(0);
  std::unique_lock lock(pool->mutex);
  pool->finished.wait(lock, [&] { return pool->workers_done == pool->workers.size(); });
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
  }
  pool->wake.notify_all();
  for (auto &t : pool->workers)
    t.join();
  delete pool;
}

void mcl_native_host_exec_init(mcl_native_exec *exec, mcl_native_host_pool *pool,
                               uint8_t *spm_base, uint64_t spm_size) {
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
