// The host pool: batches of independent tasks, cooperative fibers whose waits yield their
// worker, and teams of fibers meeting at barriers. A blocking wait on a fiber would deadlock the
// single-worker cases below (the waits have deadlines, so such a bug fails the test instead of
// hanging it).
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "device_test_util.h"
#include "manycl/device/host_pool.h"

using namespace manycl::device;
using namespace manycl::device::test;
using Clock = std::chrono::steady_clock;

namespace {
auto in_seconds(int s) {
  return Clock::now() + std::chrono::seconds(s);
}
} // namespace

TEST(HostPool, BatchRunsEveryTaskOnceFromManyThreads) {
  HostPool pool(3);
  constexpr unsigned kTasks = 97;
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        std::vector<std::atomic<int>> ran(kTasks);
        pool.run(kTasks, [&](unsigned i) {
          ran[i].fetch_add(1);
          if (!HostPool::inside_task())
            bad++;
        });
        for (auto &r : ran)
          if (r.load() != 1)
            bad++;
      }
    });
  for (auto &c : callers)
    c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_FALSE(HostPool::inside_task());
}

TEST(HostPool, BatchSpreadsOverWorkers) {
  HostPool pool(2);
  std::mutex m;
  std::set<std::thread::id> threads;
  std::atomic<int> running{0}, overlapped{0};
  pool.run(16, [&](unsigned) {
    if (running.fetch_add(1) > 0)
      overlapped++;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    running.fetch_sub(1);
    std::lock_guard lock(m);
    threads.insert(std::this_thread::get_id());
  });
  EXPECT_GE(threads.size(), 2u);
  EXPECT_GT(overlapped.load(), 0);
}

TEST(HostPool, FibersOnOneWorkerYieldAtWaits) {
  // Two jobs pinned to the only worker hand a token back and forth 1000 times: each wait
  // must give the worker to the other fiber.
  HostPool pool(1);
  std::mutex m;
  CoopCondition cv;
  int token = 0;
  std::atomic<int> failures{0};
  auto player = [&](int me) {
    for (int round = 0; round < 1000; ++round) {
      std::unique_lock lock(m);
      if (!cv.wait_until(lock, in_seconds(20), [&] { return token % 2 == me; })) {
        failures++;
        return;
      }
      if (!HostPool::inside_fiber())
        failures++;
      ++token;
      lock.unlock();
      cv.notify_all();
    }
  };
  std::thread a([&] { pool.run_cooperative(0, [&] { player(0); }); });
  std::thread b([&] { pool.run_cooperative(0, [&] { player(1); }); });
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(token, 2000);
}

TEST(HostPool, FiberWaitTimesOut) {
  HostPool pool(1);
  std::mutex m;
  CoopCondition cv;
  bool returned = true;
  Clock::duration waited{};
  pool.run_cooperative(0, [&] {
    std::unique_lock lock(m);
    const auto start = Clock::now();
    returned = cv.wait_until(lock, start + std::chrono::milliseconds(50), [] { return false; });
    waited = Clock::now() - start;
  });
  EXPECT_FALSE(returned);
  EXPECT_GE(waited, std::chrono::milliseconds(50));
}

TEST(HostPool, BatchFromFibersWhileOthersWait) {
  // Fibers that run batches while other fibers of the same worker wait for them: the batch's
  // end parks the caller, and the other workers run its tasks.
  HostPool pool(2);
  std::mutex m;
  CoopCondition cv;
  int finished = 0;
  std::atomic<uint64_t> sum{0};
  std::vector<std::thread> submitters;
  for (unsigned f = 0; f < 5; ++f)
    submitters.emplace_back([&, f] {
      pool.run_cooperative(f, [&] {
        for (int round = 0; round < 20; ++round)
          pool.run(16, [&](unsigned i) { sum.fetch_add(i + 1); });
        std::unique_lock lock(m);
        ++finished;
        cv.notify_all();
        // Everyone waits for everyone: only cooperative waits let all five finish.
        EXPECT_TRUE(cv.wait_until(lock, in_seconds(20), [&] { return finished == 5; }));
      });
    });
  for (auto &t : submitters)
    t.join();
  EXPECT_EQ(finished, 5);
  EXPECT_EQ(sum.load(), 5u * 20 * (16 * 17 / 2));
}

namespace {
// A team of `members` on `pool` runs `phases` barrier phases: in each, every member adds its
// index to the phase's slot, then (after the barrier) checks that all members' additions of
// that phase are there. Returns the number of members that saw an incomplete phase or were
// not inside a task.
int run_checked_team(HostPool &pool, unsigned members, unsigned phases) {
  std::vector<std::atomic<unsigned>> sums(phases);
  std::atomic<int> bad{0};
  CoopBarrier barrier(members);
  const unsigned expected = members * (members - 1) / 2;
  pool.run_team(members, 0, [&](unsigned me) {
    if (!HostPool::inside_task())
      bad++;
    for (unsigned p = 0; p < phases; ++p) {
      sums[p].fetch_add(me);
      barrier.arrive_and_wait();
      if (sums[p].load() != expected)
        bad++;
    }
    barrier.arrive_and_drop();
  });
  return bad.load();
}
} // namespace

TEST(HostPool, TeamOfSixteenOnOneWorkerMeetsAtBarriers) {
  // Sixteen members on one worker: a barrier that blocked the thread would never release.
  HostPool pool(1);
  EXPECT_EQ(run_checked_team(pool, 16, 200), 0);
  EXPECT_FALSE(HostPool::inside_task());
}

TEST(HostPool, TeamsOfSeveralCallersShareTheWorkers) {
  // Five callers (the clusters' control threads) each run teams of 16 on two workers: the
  // members of different teams interleave on the workers without waiting for each other.
  HostPool pool(2);
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (unsigned c = 0; c < 5; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 10; ++round)
        bad += run_checked_team(pool, 16, 20);
    });
  for (auto &t : callers)
    t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(HostPool, TeamFromAFiberParksItsCaller) {
  // A fiber that runs a team on a one-worker pool: it parks until its members (on the same
  // worker) are done.
  HostPool pool(1);
  int bad = -1;
  pool.run_cooperative(0, [&] { bad = run_checked_team(pool, 8, 50); });
  EXPECT_EQ(bad, 0);
}

TEST(HostPool, TeamFromATaskRunsOnThreads) {
  // A task may not wait for the pool's workers: a team it starts runs on threads of its own.
  HostPool pool(1);
  std::atomic<int> bad{0};
  pool.run(2, [&](unsigned) { bad += run_checked_team(pool, 4, 20); });
  EXPECT_EQ(bad.load(), 0);
}

TEST(HostPool, BarrierMembersMayLeaveEarly) {
  // Members that drop out at once (a PE without work-items) do not hold the others back.
  HostPool pool(2);
  CoopBarrier barrier(6);
  std::atomic<int> phases{0};
  pool.run_team(6, 0, [&](unsigned me) {
    if (me % 2 == 0) {
      barrier.arrive_and_drop();
      return;
    }
    for (int p = 0; p < 100; ++p) {
      barrier.arrive_and_wait();
      phases++;
    }
    barrier.arrive_and_drop();
  });
  EXPECT_EQ(phases.load(), 300);
}

namespace {
class CooperativeSync : public DeviceTest {};
} // namespace

TEST_F(CooperativeSync, BarriersAndSignalsOnFibersKeepModeledTime) {
  // The device's four clusters as fibers of the shared pool (as many workers as host cores,
  // possibly fewer than the clusters): barriers, signals and DDR reservations wait
  // cooperatively, each fiber sees its own cluster context, and modeled time is the same as
  // with one blocking thread per cluster.
  auto run_once = [&](bool cooperative) {
    const uint64_t block = ddr_block(4096);
    auto rec = begin();
    std::atomic<int> errors{0};
    auto r = rec->run(
        [&](ClusterContext &ctx) {
          for (int round = 0; round < 50; ++round) {
            if (current_cluster_context() != &ctx)
              errors++;
            DmaRequest d(DmaEndpoint::ddr(block + 256 * ctx.group_index()),
                         DmaEndpoint::spm(ctx.device_cluster(), 0), DmaShape::linear(256));
            if (!ctx.dma(d).ok() || !ctx.dma_wait_all().ok())
              errors++;
            ctx.account_cycles(10 * (ctx.group_index() + 1), "work");
            if (!ctx.barrier().ok())
              errors++;
            const unsigned next = (ctx.group_index() + 1) % ctx.group_size();
            if (!ctx.signal_post(next, 0).ok() ||
                !ctx.signal_wait(0, static_cast<uint64_t>(round + 1)).ok())
              errors++;
          }
        },
        cooperative);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(errors.load(), 0);
    return rec->end().cycles();
  };
  const uint64_t threads = run_once(false);
  const uint64_t fibers = run_once(true);
  EXPECT_EQ(fibers, threads);
  EXPECT_GT(fibers, 50u * (100 + 50 + 20));
}
