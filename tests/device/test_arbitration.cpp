// Shared resources are served in modeled-time order, whatever order the host threads that
// simulate the clusters reach them in (docs/device-model.md, "Determinism"). Each test runs
// the same program with different host delays and expects the same, hand-computed, times.
// Tiny device (device_test_util.h): DMA latency 100, NoC 16 B/cycle, DDR 8 B/cycle, signal 20.
#include <chrono>
#include <thread>

#include "device_test_util.h"

using namespace manycl::device;
using namespace manycl::device::test;

namespace {

constexpr uint64_t kBytes = 8192; // 1024 DDR cycles, 512 NoC cycles

void host_delay(unsigned ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

class Arbitration : public DeviceTest {
protected:
  DmaRequest get(uint64_t ddr_offset, unsigned cluster) {
    return {DmaEndpoint::ddr(ddr_offset), DmaEndpoint::spm(cluster, 0), DmaShape::linear(kBytes)};
  }

  // Each cluster of {0, 1} sleeps delay_ms[g] on the host, accounts compute_before[g] cycles,
  // reads 8 KiB and waits for it; returns the clusters' modeled end cycles.
  std::vector<uint64_t> two_reads(std::vector<unsigned> delay_ms,
                                  std::vector<uint64_t> compute_before, Arbiter *domain = nullptr,
                                  std::vector<unsigned> clusters = {0, 1}) {
    uint64_t in = ddr_block(2 * kBytes);
    auto begun = CommandRecorder::begin(*device, "reads", clusters, 0, domain);
    EXPECT_TRUE(begun.ok());
    auto rec = begun.value();
    std::vector<uint64_t> end(2);
    auto r = rec->run([&](ClusterContext &ctx) {
      const unsigned g = ctx.group_index();
      host_delay(delay_ms[g]);
      ctx.account_cycles(compute_before[g]);
      auto h = ctx.dma(get(in + g * kBytes, g));
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
      end[g] = ctx.now() - rec->start_cycle();
    });
    EXPECT_TRUE(r.ok());
    rec->end();
    return end;
  }
};

// Equal issue times: the lower cluster index gets the DDR first, whichever thread comes first.
TEST_F(Arbitration, TiesGoToTheLowerClusterWhateverTheHostOrder) {
  const std::vector<uint64_t> expected = {100 + 1024, 100 + 2 * 1024};
  EXPECT_EQ(two_reads({0, 40}, {0, 0}), expected);
  EXPECT_EQ(two_reads({40, 0}, {0, 0}), expected);
}

// Cluster 1 issues earlier in modeled time (cycle 0) than cluster 0 (cycle 500): it is served
// first even when its host thread arrives last. Host order would give cluster 0
// [600, 1624) and cluster 1 the gap [100, 600) plus 524 cycles after 1624.
TEST_F(Arbitration, ReservationsFollowModeledTimeNotHostArrival) {
  const std::vector<uint64_t> expected = {1124 + 1024, 100 + 1024};
  EXPECT_EQ(two_reads({0, 40}, {500, 0}), expected);
  EXPECT_EQ(two_reads({40, 0}, {500, 0}), expected);
}

// A cluster whose job has not started on the host yet holds the others back at the
// command's start (cluster 1's control thread is busy with an unrelated host job first).
TEST_F(Arbitration, AClusterNotStartedYetHoldsItsPlace) {
  uint64_t in = ddr_block(2 * kBytes);
  for (int late_cluster_busy = 0; late_cluster_busy < 2; ++late_cluster_busy) {
    auto rec = begin({0, 1});
    if (late_cluster_busy)
      device->cluster(1).submit([] { host_delay(40); });
    std::vector<uint64_t> end(2);
    auto r = rec->run([&](ClusterContext &ctx) {
      const unsigned g = ctx.group_index();
      ctx.account_cycles(g == 0 ? 500 : 0);
      auto h = ctx.dma(get(in + g * kBytes, g));
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
      end[g] = ctx.now() - rec->start_cycle();
    });
    ASSERT_TRUE(r.ok());
    rec->end();
    EXPECT_EQ(end, (std::vector<uint64_t>{1124 + 1024, 100 + 1024})) << late_cluster_busy;
  }
}

// A signal wait's release is the modeled time of the value-th increment among all posts of
// the command, also one the host delivers after a later-stamped one.
TEST_F(Arbitration, SignalReleaseIsTheEarliestStampNotTheFirstOnTheHost) {
  for (int late = 1; late <= 2; ++late) {
    auto rec = begin({0, 1, 2});
    uint64_t released = 0;
    auto r = rec->run([&](ClusterContext &ctx) {
      const unsigned g = ctx.group_index();
      if (g == 0) {
        ASSERT_TRUE(ctx.signal_wait(3, 1).ok());
        released = ctx.now() - rec->start_cycle();
        return;
      }
      // Cluster 1 posts at modeled 1000, cluster 2 at 200; `late` arrives second on the host.
      if (static_cast<int>(g) == late)
        host_delay(40);
      ctx.account_cycles(g == 1 ? 1000 : 200);
      ASSERT_TRUE(ctx.signal_post(0, 3).ok());
    });
    ASSERT_TRUE(r.ok());
    rec->end();
    EXPECT_EQ(released, 200u + 20u) << "late poster: cluster " << late;
  }
}

// Clusters blocked in a barrier or a signal wait hold nobody back: a cluster reading DDR
// while the others wait for it does not deadlock, and its time is the uncontended one.
TEST_F(Arbitration, WaitingClustersDoNotHoldTheDdrBack) {
  uint64_t in = ddr_block(kBytes);
  auto rec = begin({0, 1, 2});
  auto r = rec->run([&](ClusterContext &ctx) {
    const unsigned g = ctx.group_index();
    if (g == 0) {
      ASSERT_TRUE(ctx.barrier().ok()); // arrives at 0
    } else if (g == 1) {
      ASSERT_TRUE(ctx.signal_wait(0, 1).ok()); // released by cluster 2 at 5000 + 1124 + 20
      ASSERT_TRUE(ctx.barrier().ok());
    } else {
      ctx.account_cycles(5000);
      auto h = ctx.dma(get(in, 2));
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
      EXPECT_EQ(ctx.now(), 5000u + 1124u);
      ASSERT_TRUE(ctx.signal_post(1, 0).ok());
      ASSERT_TRUE(ctx.barrier().ok());
    }
    EXPECT_EQ(ctx.now(), 5000u + 1124u + 20u + 50u);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(rec->end().cycles(), 5000u + 1124u + 20u + 50u);
}

// Partitions with fixed DDR shares: each domain has its own calendar at its share of the
// bandwidth, so commands on two halves of the device never contend, whatever runs when.
TEST_F(Arbitration, DdrDomainsOfPartitionsAreIndependentShares) {
  Arbiter &left = device->ddr_domain({0, 1}, 0.5);
  Arbiter &right = device->ddr_domain({2, 3}, 0.5);
  EXPECT_EQ(&device->ddr_domain({1, 0}, 0.5), &left);
  EXPECT_EQ(&device->ddr_domain({0, 1, 2, 3}, 1.0), &device->ddr_domain());
  EXPECT_DOUBLE_EQ(left.ddr_bytes_per_cycle(), 4.0);
  // At 4 B/cycle an 8 KiB read takes 2048 DDR cycles; two clusters share them.
  const std::vector<uint64_t> expected = {100 + 2048, 100 + 2 * 2048};
  std::vector<uint64_t> a, b;
  std::thread other([&] { b = two_reads({0, 10}, {0, 0}, &right, {2, 3}); });
  a = two_reads({10, 0}, {0, 0}, &left, {0, 1});
  other.join();
  EXPECT_EQ(a, expected);
  EXPECT_EQ(b, expected);
  EXPECT_EQ(device->ddr_domain().ddr_intervals(), 0u); // the whole device's calendar: unused
  EXPECT_EQ(left.ddr_intervals(), 1u);
}

// Many clusters issuing many reservations with random host delays: the schedule of every
// transfer is the same in every run.
TEST_F(Arbitration, RandomHostDelaysGiveIdenticalSchedules) {
  uint64_t in = ddr_block(4 * kBytes);
  std::vector<std::vector<uint64_t>> runs;
  for (unsigned run = 0; run < 4; ++run) {
    auto rec = begin();
    std::vector<std::vector<uint64_t>> done(4);
    auto r = rec->run([&](ClusterContext &ctx) {
      const unsigned g = ctx.group_index();
      for (unsigned i = 0; i < 6; ++i) {
        if ((g + i + run) % 3 == 0)
          std::this_thread::sleep_for(std::chrono::microseconds(300 * ((g * 7 + i + run) % 5)));
        ctx.account_cycles(37 * ((g * 5 + i * 3) % 7));
        auto h = ctx.dma({DmaEndpoint::ddr(in + g * kBytes), DmaEndpoint::spm(g, 0),
                          DmaShape::linear(kBytes / (1 + i % 3))});
        ASSERT_TRUE(h.ok());
        if (i % 2) {
          ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
        }
        done[g].push_back(ctx.now() - rec->start_cycle());
      }
      ASSERT_TRUE(ctx.dma_wait_all().ok());
      done[g].push_back(ctx.now() - rec->start_cycle());
    });
    ASSERT_TRUE(r.ok());
    rec->end();
    std::vector<uint64_t> flat;
    for (auto &d : done)
      flat.insert(flat.end(), d.begin(), d.end());
    runs.push_back(flat);
  }
  for (unsigned run = 1; run < runs.size(); ++run)
    EXPECT_EQ(runs[run], runs[0]) << "run " << run;
}

} // namespace
