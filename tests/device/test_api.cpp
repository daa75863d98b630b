// The C device API (device_api.h) as native code sees it through the current cluster
// context: identity, transfers, PEs, accounting and the checked mode.
#include <atomic>
#include <mutex>
#include <set>

#include "device_test_util.h"
#include "manycl/device/host_pool.h"
#include "manycl/device_api.h"

using namespace manycl::device;
using namespace manycl::device::test;

namespace {

class DeviceApi : public DeviceTest {
protected:
  void TearDown() override { set_checked_mode(false); }
};

struct Coverage {
  std::mutex mutex;
  std::multiset<uint32_t> indices;
  std::set<uint32_t> pes;
  std::atomic<int> bad_pe{0};
};

void record(void *arg, uint32_t index, uint32_t pe) {
  auto *c = static_cast<Coverage *>(arg);
  if (pe >= mcl_pe_count() || mcl_pe_id() != pe || !mcl_has_context())
    c->bad_pe++;
  mcl_account_cycles(10); // per PE
  std::lock_guard lock(c->mutex);
  c->indices.insert(index);
  c->pes.insert(pe);
}

} // namespace

TEST_F(DeviceApi, VersionAndNoContextBehaviour) {
  EXPECT_EQ(mcl_api_version(), static_cast<uint32_t>(MCL_DEVICE_API_VERSION));
  EXPECT_EQ(mcl_has_context(), 0);
  EXPECT_EQ(mcl_cluster_count(), 0u);
  EXPECT_EQ(mcl_spm_base(), nullptr);
  mcl_dma_shape s = mcl_shape_1d(8);
  EXPECT_EQ(mcl_dma_get(nullptr, 0, 0, &s), 0u);
  EXPECT_NE(std::string(mcl_last_error()).find("no current cluster context"), std::string::npos);
  EXPECT_EQ(mcl_barrier(), MCL_ERR_NO_CONTEXT);
  Coverage c;
  EXPECT_EQ(mcl_parallel_for(5, record, &c), MCL_OK); // serial on the caller
  EXPECT_EQ(c.indices.size(), 5u);
}

TEST_F(DeviceApi, IdentityTransfersAndAccountingThroughTheCurrentContext) {
  const uint64_t size = 4096;
  uint64_t in = ddr_block(size, 21);
  uint64_t out = ddr_block(size, 0);
  auto rec = begin({1, 3});
  std::atomic<int> failures{0};
  auto r = rec->run([&](ClusterContext &ctx) {
    auto check = [&](bool ok) { failures += ok ? 0 : 1; };
    check(mcl_has_context() == 1);
    check(mcl_cluster_count() == 2);
    check(mcl_cluster_id() == ctx.group_index());
    check(mcl_device_cluster_id() == (ctx.group_index() == 0 ? 1u : 3u));
    check(mcl_pe_count() == 2);
    check(mcl_spm_base() == static_cast<void *>(ctx.spm_base()));
    check(mcl_spm_size() == 64 * 1024);
    if (mcl_cluster_id() == 0) {
      mcl_ddr_window window{in, size};
      uint32_t clusters[] = {0, 1};
      mcl_dma_shape shape = mcl_shape_1d(size);
      mcl_dma_handle h = mcl_dma_multicast(&window, 0, clusters, 2, 1024, &shape);
      check(h == 1);
      check(mcl_dma_wait(h) == MCL_OK);
      check(mcl_now_cycles() == 100 + size / 8);
    }
    check(mcl_barrier() == MCL_OK);
    if (mcl_cluster_id() == 1) {
      check(std::memcmp(static_cast<uint8_t *>(mcl_spm_base()) + 1024, ddr(in), size) == 0);
      mcl_ddr_window window{out, size};
      mcl_dma_shape half = mcl_shape_2d(size / 2, 2, size / 2, size / 2);
      mcl_dma_handle h = mcl_dma_put(1024, &window, 0, &half);
      check(h != 0 && mcl_dma_wait_all() == MCL_OK && mcl_dma_done(h) == 1);
    }
  });
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(std::memcmp(ddr(out), ddr(in), size), 0);

  // Out of the window: refused with handle 0 and a message; the command fails.
  auto bad = begin({0});
  r = bad->run([&](ClusterContext &) {
    mcl_ddr_window window{in, size};
    mcl_dma_shape shape = mcl_shape_1d(size);
    EXPECT_EQ(mcl_dma_get(&window, 1, 0, &shape), 0u);
    EXPECT_NE(std::string(mcl_last_error()).find("window"), std::string::npos);
  });
  EXPECT_FALSE(r.ok());
}

TEST_F(DeviceApi, ParallelForCoversEveryIndexOnceOnThePes) {
  auto rec = begin({2});
  Coverage c;
  auto r = rec->run([&](ClusterContext &) {
    EXPECT_EQ(mcl_parallel_for(101, record, &c), MCL_OK);
    // The adapters of kernels/native's exec struct behave the same.
    mcl_exec_parallel_for(nullptr, 3, record, &c);
    mcl_exec_account_cycles(nullptr, 5);
    mcl_account_macs(MCL_ELEM_INT8, 256 * 4, 2); // 4 cycles
    mcl_account_elements(16, 1, 2);              // 16 FP32 ops / (8 * 2) = 1 cycle
    mcl_log("parallel_for done on cluster %u", mcl_cluster_id());
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(c.bad_pe.load(), 0);
  EXPECT_EQ(c.indices.size(), 104u);
  for (uint32_t i = 0; i < 101; ++i)
    EXPECT_EQ(c.indices.count(i), i < 3 ? 2u : 1u);
  EXPECT_EQ(c.pes, (std::set<uint32_t>{0, 1}));
  // 101 items: PE 0 takes 50, PE 1 51 (10 cycles each); then 3 items: 1 and 2.
  EXPECT_EQ(rec->end().cycles(), 510u + 20u + 5u + 4u + 1u);
}

TEST_F(DeviceApi, CheckedModeVerifiesOperandsInsideTheSpm) {
  auto rec = begin({0});
  int outside = 0;
  auto r = rec->run([&](ClusterContext &) {
    auto *spm_base = static_cast<uint8_t *>(mcl_spm_base());
    set_checked_mode(false);
    EXPECT_EQ(mcl_check_spm_range(&outside, 4), MCL_OK); // unchecked: nothing verified
    set_checked_mode(true);
    EXPECT_EQ(mcl_checked_mode(), 1);
    EXPECT_EQ(mcl_check_spm_range(spm_base, mcl_spm_size()), MCL_OK);
    EXPECT_EQ(mcl_check_spm_range(spm_base + 100, 28), MCL_OK);
    EXPECT_EQ(mcl_check_spm_range(spm_base + mcl_spm_size() - 4, 8), MCL_ERR_RANGE);
    EXPECT_EQ(mcl_check_spm_range(&outside, 4), MCL_ERR_RANGE);
  });
  EXPECT_FALSE(r.ok());
  const auto &s = rec->end();
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.error.find("outside the cluster's SPM"), std::string::npos);
  EXPECT_EQ(s.spm_high_water, 64u * 1024);
}

TEST_F(DeviceApi, SignalsAndFailThroughTheCApi) {
  auto rec = begin({0, 1});
  auto r = rec->run([&](ClusterContext &) {
    if (mcl_cluster_id() == 0) {
      EXPECT_EQ(mcl_signal_post(1, 7, 3), MCL_OK);
    } else {
      EXPECT_EQ(mcl_signal_wait(7, 3), MCL_OK);
      EXPECT_EQ(mcl_signal_value(7), 3u);
      EXPECT_EQ(mcl_now_cycles(), 20u);
    }
    EXPECT_EQ(mcl_signal_post(5, 0, 1), MCL_ERR_ARGUMENT);
  });
  EXPECT_FALSE(r.ok());
  auto rec2 = begin({0});
  r = rec2->run([&](ClusterContext &) { mcl_fail("native function gave up"); });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("native function gave up"), std::string::npos);
}

TEST_F(DeviceApi, ParallelForInsideARuntimeFanOutRunsOnTheCallingPe) {
  auto rec = begin({0});
  std::atomic<int> items{0}, with_context{0};
  auto r = rec->run([&](ClusterContext &ctx) {
    // The runtime fans a work-group out over a team of pool fibers (its PEs); native code
    // called from there sees the context and runs its parallel_for on the calling PE.
    HostPool::shared().run_team(2, ctx.device_cluster(), [&](unsigned) {
      with_context += mcl_has_context();
      auto body = [](void *arg, uint32_t, uint32_t) {
        static_cast<std::atomic<int> *>(arg)->fetch_add(1);
      };
      EXPECT_EQ(mcl_parallel_for(10, body, &items), MCL_OK);
    });
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(items.load(), 20);
  EXPECT_EQ(with_context.load(), 2);
}
