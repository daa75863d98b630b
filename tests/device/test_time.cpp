// Modeled time on the tiny device (device_test_util.h), with expectations computed by hand:
//   DDR -> SPM of B bytes: latency 100 + max(B / 16 (NoC), B / 8 (DDR)) = 100 + B / 8
//   SPM -> SPM of B bytes: 100 + B / 16
//   INT8 MACs on p PEs:   macs / (128 p)
#include <algorithm>

#include "device_test_util.h"
#include "manycl/device/time_model.h"

using namespace manycl::device;
using namespace manycl::device::test;

namespace {

class ModeledTime : public DeviceTest {
protected:
  static constexpr uint64_t kBytes = 8192;         // 1024 DDR cycles, 512 NoC cycles
  static constexpr uint64_t kDdrRead = 100 + 1024; // one DDR -> SPM transfer alone

  DmaRequest get(uint64_t ddr_offset, unsigned cluster, uint64_t spm_offset = 0) {
    return {DmaEndpoint::ddr(ddr_offset), DmaEndpoint::spm(cluster, spm_offset),
            DmaShape::linear(kBytes)};
  }
};

} // namespace

TEST(TimeModelUnit, TransferCyclesRoundUp) {
  EXPECT_EQ(transfer_cycles(0, 8), 0u);
  EXPECT_EQ(transfer_cycles(1, 8), 1u);
  EXPECT_EQ(transfer_cycles(16, 8), 2u);
  EXPECT_EQ(transfer_cycles(17, 8), 3u);
  EXPECT_EQ(transfer_cycles(10, 2.5), 4u);
}

TEST(TimeModelUnit, DdrCalendarFillsGaps) {
  DdrCalendar model;
  EXPECT_EQ(model.reserve(0, 10), 10u);  // [0,10)
  EXPECT_EQ(model.reserve(20, 10), 30u); // [20,30)
  // 15 cycles from 5: the gap [10,20) then 5 more after 30.
  EXPECT_EQ(model.reserve(5, 15), 35u);
  EXPECT_EQ(model.intervals(), 1u); // [0,35) merged
  EXPECT_EQ(model.reserve(100, 1), 101u);
  EXPECT_EQ(model.reserve(0, 0), 0u);
  EXPECT_EQ(model.intervals(), 2u);
}

TEST_F(ModeledTime, ComputeOnly) {
  auto rec = begin({0}, 0);
  auto r = rec->run([&](ClusterContext &ctx) {
    EXPECT_EQ(ctx.mac_cycles(ElementType::Int8, 1 << 20, 2), (1u << 20) / 256);
    EXPECT_EQ(ctx.mac_cycles(ElementType::Fp16, 65536, 2), 65536u / 32);
    EXPECT_EQ(ctx.mac_cycles(ElementType::Int16, 129, 1), 3u);  // ceil(129 / 64)
    EXPECT_EQ(ctx.mac_cycles(ElementType::Int8, 1000, 99), 4u); // PEs clamp to 2: ceil(1000/256)
    ctx.account_cycles(ctx.mac_cycles(ElementType::Int8, 1 << 20, 2));
    ctx.account_cycles(ctx.mac_cycles(ElementType::Fp16, 65536, 2));
  });
  ASSERT_TRUE(r.ok());
  const auto &s = rec->end();
  EXPECT_EQ(s.cycles(), 4096u + 2048u);
  EXPECT_EQ(s.clusters[0].compute_cycles, 4096u + 2048u);
  EXPECT_DOUBLE_EQ(s.modeled_seconds(), 6144e-9);
}

TEST_F(ModeledTime, DmaOnlyAndEngineOrder) {
  uint64_t in = ddr_block(kBytes);
  uint64_t out = ddr_block(kBytes);
  auto rec = begin({0, 1});
  auto r = rec->run([&](ClusterContext &ctx) {
    if (ctx.group_index() != 0)
      return;
    auto h1 = ctx.dma(get(in, 0));
    // Issued at 0 too, but the engine is busy until 1124: 1124 + 100 + 1024.
    auto h2 = ctx.dma({DmaEndpoint::spm(0, 0), DmaEndpoint::ddr(out), DmaShape::linear(kBytes)});
    // SPM -> SPM after that: 2248 + 100 + 512.
    auto h3 = ctx.dma({DmaEndpoint::spm(0, 0), DmaEndpoint::spm(1, 0), DmaShape::linear(kBytes)});
    ASSERT_TRUE(h1.ok() && h2.ok() && h3.ok());
    EXPECT_FALSE(ctx.dma_done(h1.value()));
    ASSERT_TRUE(ctx.dma_wait(h1.value()).ok());
    EXPECT_EQ(ctx.now(), kDdrRead);
    EXPECT_TRUE(ctx.dma_done(h1.value()));
    EXPECT_FALSE(ctx.dma_done(h2.value()));
    ASSERT_TRUE(ctx.dma_wait(h2.value()).ok());
    EXPECT_EQ(ctx.now(), 2 * kDdrRead);
    ASSERT_TRUE(ctx.dma_wait(h3.value()).ok());
    EXPECT_EQ(ctx.now(), 2 * kDdrRead + 612);
  });
  ASSERT_TRUE(r.ok());
  const auto &s = rec->end();
  EXPECT_EQ(s.cycles(), 2 * kDdrRead + 612);
  EXPECT_EQ(s.clusters[0].dma_busy_cycles, 2 * kDdrRead + 612);
  EXPECT_EQ(s.clusters[0].wait_cycles, 2 * kDdrRead + 612);
}

TEST_F(ModeledTime, ComputeAndDmaOverlapOnlyWhenTheProgramOverlapsThem) {
  uint64_t in = ddr_block(kBytes);
  const uint64_t compute = 4096; // 1 Mi INT8 MACs on 2 PEs
  // Overlapped: issue, compute, wait.
  auto overlapped = begin({0});
  ASSERT_TRUE(overlapped
                  ->run([&](ClusterContext &ctx) {
                    auto h = ctx.dma(get(in, 0));
                    ctx.account_cycles(ctx.mac_cycles(ElementType::Int8, 1 << 20, 2));
                    ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
                  })
                  .ok());
  EXPECT_EQ(overlapped->end().cycles(), compute);
  // Serial: wait before computing. Starts where the previous command ended.
  auto serial = begin({0});
  EXPECT_EQ(serial->start_cycle(), compute);
  ASSERT_TRUE(serial
                  ->run([&](ClusterContext &ctx) {
                    auto h = ctx.dma(get(in, 0));
                    ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
                    ctx.account_cycles(ctx.mac_cycles(ElementType::Int8, 1 << 20, 2));
                  })
                  .ok());
  const auto &s = serial->end();
  EXPECT_EQ(s.cycles(), kDdrRead + compute);
  EXPECT_EQ(s.end_cycle, compute + kDdrRead + compute);
}

TEST_F(ModeledTime, DdrBandwidthIsSharedByAllClusters) {
  uint64_t in = ddr_block(4 * kBytes);
  auto rec = begin();
  ASSERT_TRUE(rec->run([&](ClusterContext &ctx) {
                   unsigned g = ctx.group_index();
                   auto h = ctx.dma(get(in + g * kBytes, g));
                   ASSERT_TRUE(h.ok());
                   ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
                 })
                  .ok());
  const auto &s = rec->end();
  // 4 × 1024 DDR cycles back to back after the latency; in some order the clusters finish
  // at 1124, 2148, 3172, 4196.
  std::vector<uint64_t> ends;
  for (const auto &c : s.clusters)
    ends.push_back(c.end_cycle);
  std::sort(ends.begin(), ends.end());
  EXPECT_EQ(ends, (std::vector<uint64_t>{1124, 2148, 3172, 4196}));
  EXPECT_EQ(s.cycles(), 4196u);
  EXPECT_EQ(s.ddr_bytes_read, 4 * kBytes);
}

TEST_F(ModeledTime, MulticastReadsDdrOnceUnicastPaysPerCluster) {
  uint64_t weights = ddr_block(kBytes);
  auto multicast = begin();
  ASSERT_TRUE(multicast
                  ->run([&](ClusterContext &ctx) {
                    if (ctx.group_index() == 0) {
                      DmaRequest req = get(weights, 0);
                      req.multicast = {0, 1, 2, 3};
                      req.notify_signal = 5;
                      ASSERT_TRUE(ctx.dma(req).ok());
                    }
                    // Every cluster waits for its copy through the notify signal.
                    ASSERT_TRUE(ctx.signal_wait(5, 1).ok());
                    EXPECT_EQ(ctx.now(), kDdrRead);
                    EXPECT_EQ(std::memcmp(spm(ctx.device_cluster()), ddr(weights), kBytes), 0);
                  })
                  .ok());
  const auto &m = multicast->end();
  EXPECT_EQ(m.cycles(), kDdrRead);
  EXPECT_EQ(m.ddr_bytes_read, kBytes);
  EXPECT_EQ(m.multicast_saved_bytes, 3 * kBytes);
  EXPECT_EQ(m.noc_bytes, 4 * kBytes);

  // The same delivery as four unicasts from cluster 0's engine: serial, each paying latency
  // and DDR time: 1124, 2248, 3372, 4496.
  auto unicast = begin();
  EXPECT_EQ(unicast->start_cycle(), kDdrRead);
  ASSERT_TRUE(unicast
                  ->run([&](ClusterContext &ctx) {
                    if (ctx.group_index() != 0)
                      return;
                    for (unsigned c = 0; c < 4; ++c)
                      ASSERT_TRUE(ctx.dma(get(weights, c)).ok());
                    ASSERT_TRUE(ctx.dma_wait_all().ok());
                  })
                  .ok());
  const auto &u = unicast->end();
  EXPECT_EQ(u.cycles(), 4 * kDdrRead);
  EXPECT_EQ(u.ddr_bytes_read, 4 * kBytes);
  EXPECT_EQ(u.multicast_saved_bytes, 0u);
}

// An exchange to several clusters (an all-gather after a channel split): the engine sends the
// SPM bytes once (latency + NoC time, no DDR), every destination gets them and its notify
// signal at that time; three unicasts of the same bytes take three times as long.
TEST_F(ModeledTime, SpmMulticastSendsOnceUnicastsPayPerDestination) {
  constexpr uint64_t kNocSend = 100 + 512; // latency + 8 KiB at 16 B/cycle
  auto multicast = begin();
  ASSERT_TRUE(multicast
                  ->run([&](ClusterContext &ctx) {
                    if (ctx.group_index() == 0) {
                      for (uint64_t i = 0; i < kBytes; ++i)
                        spm(ctx.device_cluster())[i] = static_cast<uint8_t>(i * 7 + 1);
                      DmaRequest req{DmaEndpoint::spm(0, 0), DmaEndpoint::spm(0, 16384),
                                     DmaShape::linear(kBytes)};
                      req.multicast = {1, 2, 3};
                      req.notify_signal = 6;
                      ASSERT_TRUE(ctx.dma(req).ok());
                      ASSERT_TRUE(ctx.dma_wait_all().ok());
                      EXPECT_EQ(ctx.now(), kNocSend);
                      return;
                    }
                    ASSERT_TRUE(ctx.signal_wait(6, 1).ok());
                    EXPECT_EQ(ctx.now(), kNocSend);
                  })
                  .ok());
  const auto &m = multicast->end();
  EXPECT_EQ(m.cycles(), kNocSend);
  EXPECT_EQ(m.ddr_bytes_read, 0u);
  EXPECT_EQ(m.multicast_saved_bytes, 0u); // counts DDR reads saved: none here
  EXPECT_EQ(m.noc_bytes, 3 * kBytes);
  for (unsigned c = 1; c < 4; ++c)
    EXPECT_EQ(std::memcmp(spm(c) + 16384, spm(0), kBytes), 0) << "cluster " << c;

  auto unicast = begin();
  const uint64_t start = unicast->start_cycle();
  ASSERT_TRUE(unicast
                  ->run([&](ClusterContext &ctx) {
                    if (ctx.group_index() != 0)
                      return;
                    for (unsigned c = 1; c < 4; ++c)
                      ASSERT_TRUE(ctx.dma({DmaEndpoint::spm(0, 0), DmaEndpoint::spm(c, 32768),
                                           DmaShape::linear(kBytes)})
                                      .ok());
                    ASSERT_TRUE(ctx.dma_wait_all().ok());
                  })
                  .ok());
  EXPECT_EQ(unicast->end().cycles(), 3 * kNocSend) << "started at " << start;
}

TEST_F(ModeledTime, BarrierMergesTimelinesAtTheLatestArrival) {
  auto rec = begin();
  ASSERT_TRUE(rec->run([&](ClusterContext &ctx) {
                   ctx.account_cycles(1000 * (ctx.group_index() + 1));
                   ASSERT_TRUE(ctx.barrier().ok());
                   EXPECT_EQ(ctx.now(), 4000u + 50);
                   ctx.account_cycles(10);
                   ASSERT_TRUE(ctx.barrier().ok());
                   EXPECT_EQ(ctx.now(), 4060u + 50);
                 })
                  .ok());
  const auto &s = rec->end();
  EXPECT_EQ(s.cycles(), 4110u);
  EXPECT_EQ(s.clusters[0].wait_cycles, 3050u + 50);
  EXPECT_EQ(s.clusters[3].wait_cycles, 100u);
  EXPECT_EQ(s.clusters[2].barriers, 2u);
}

TEST_F(ModeledTime, SignalsCarryTheSendersTime) {
  auto rec = begin({0, 1});
  ASSERT_TRUE(rec->run([&](ClusterContext &ctx) {
                   if (ctx.group_index() == 0) {
                     ctx.account_cycles(500);
                     ASSERT_TRUE(ctx.signal_post(1, 0).ok()); // arrives at 520
                     ctx.account_cycles(1000);
                     ASSERT_TRUE(ctx.signal_post(1, 0).ok()); // arrives at 1520
                   } else {
                     ASSERT_TRUE(ctx.signal_wait(0, 1).ok());
                     // The first increment's time, even if the second already arrived.
                     EXPECT_EQ(ctx.now(), 520u);
                     ctx.account_cycles(2000);
                     ASSERT_TRUE(ctx.signal_wait(0, 2).ok());
                     EXPECT_EQ(ctx.now(), 2520u); // already later than 1520
                   }
                 })
                  .ok());
  EXPECT_EQ(rec->end().cycles(), 2520u);
}

TEST_F(ModeledTime, ParallelForAdvancesByTheSlowestPe) {
  auto rec = begin({0});
  ASSERT_TRUE(rec->run([&](ClusterContext &ctx) {
                   // 4 items on 2 PEs: PE 0 takes items 0,1 (100 + 200), PE 1 items 2,3
                   // (300 + 400).
                   auto r = ctx.parallel_for(
                       4, [&](uint64_t i, unsigned) { ctx.account_cycles(100 * (i + 1)); });
                   ASSERT_TRUE(r.ok());
                 })
                  .ok());
  const auto &s = rec->end();
  EXPECT_EQ(s.cycles(), 700u);
  EXPECT_EQ(s.clusters[0].compute_cycles, 700u);
}

TEST_F(ModeledTime, CommandsStartWhenTheirClustersAreFree) {
  auto first = begin({1});
  ASSERT_TRUE(first->run([](ClusterContext &ctx) { ctx.account_cycles(300); }).ok());
  EXPECT_EQ(first->end().end_cycle, 300u);
  // A command on clusters {0, 1} waits for cluster 1; one on cluster 2 does not.
  EXPECT_EQ(begin({0, 1})->start_cycle(), 300u);
  EXPECT_EQ(begin({2})->start_cycle(), 0u);
  EXPECT_EQ(begin({2}, 1000)->start_cycle(), 1000u);
  EXPECT_FALSE(CommandRecorder::begin(*device, "bad", {0, 0}).ok());
  EXPECT_FALSE(CommandRecorder::begin(*device, "bad", {4}).ok());
  EXPECT_FALSE(CommandRecorder::begin(*device, "bad", {}).ok());
}

TEST_F(ModeledTime, HostTransfersUseDdrBandwidth) {
  auto rec = begin({0});
  rec->account_host_transfer(0, 800); // 100 + 800 / 8
  const auto &s = rec->end();
  EXPECT_EQ(s.cycles(), 200u);
  EXPECT_EQ(s.ddr_bytes_written, 800u);
}
