// The compiler's timing replay (kann/timing.h): hand-derived cycles for DDR contention,
// barriers, signals and compute, exact agreement with the simulator on a hand-written
// program and on a compiled CNN, and a clean error for streams that can never finish.
#include <gtest/gtest.h>

#include "handmade_program.h"
#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/timing.h"
#include "manycl/device/config.h"
#include "manycl/kbin_runner.h"
#include "small_cnn.h"

namespace {

using namespace kann;

manycl::device::DeviceConfig config() {
  auto c = manycl::device::preset("small").value();
  c.ddr_bytes = 64ull << 20;
  c.dma_latency_cycles = 100;
  c.noc_bytes_per_cycle = 16;
  c.ddr_bytes_per_cycle = 8;
  c.barrier_latency_cycles = 50;
  c.signal_latency_cycles = 10;
  return c;
}

format::Record load(uint64_t bytes, int32_t notify = -1) {
  kbin_dma_args d{};
  d.kind = KBIN_DMA_LOAD;
  d.notify_signal = notify;
  d.ddr = {KBIN_DDR_PARAMS, 0, 0};
  d.shape = {bytes, 1, 1, bytes, bytes, bytes, bytes};
  return format::Record::make(KBIN_FN_DMA, d);
}
format::Record wait_dma() { return format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{}); }
format::Record barrier() { return format::Record{KBIN_FN_BARRIER, {}}; }

// Two clusters read 1600 B each at once: latency 100, NoC 100 cycles, DDR 200 cycles. The
// calendar serves cluster 0 first (same issue cycle, lower index): [100, 300) -> done 300;
// cluster 1 gets [300, 500) -> 500. The barrier releases both at 500 + 50 = 550; cluster 0
// then copies 16 floats (its native cost), cluster 1 posts a signal that cluster 0 waits for
// (at 550 + 10) before the copy.
TEST(Timing, HandDerivedContentionBarrierSignalCompute) {
  format::Program p;
  p.cluster_count = 2;
  p.pes_per_cluster = 4;
  mcl_unary_args copy{};
  copy.input = {0, 1, 1, 16, 16, 16, 1, MCL_DTYPE_F32};
  copy.output = {256, 1, 1, 16, 16, 16, 1, MCL_DTYPE_F32};
  const uint64_t copy_cycles = mcl_native_cost(MCL_NATIVE_FN_COPY, &copy, 4);
  ASSERT_GT(copy_cycles, 0u);
  kbin_wait_signal_args w{3, 0, 1};
  kbin_signal_args post{0, 3, 1};
  p.streams = {{load(1600), wait_dma(), barrier(),
                format::Record::make(KBIN_FN_WAIT_SIGNAL, w),
                format::Record::make(MCL_NATIVE_FN_COPY, copy)},
               {load(1600), wait_dma(), barrier(), format::Record::make(KBIN_FN_SIGNAL, post)}};
  auto t = predict_timing(p, config(), 8.0);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t.value().time_after[0][1], 300u);
  EXPECT_EQ(t.value().time_after[1][1], 500u);
  EXPECT_EQ(t.value().time_after[0][2], 550u);
  EXPECT_EQ(t.value().time_after[0][3], 560u);
  EXPECT_EQ(t.value().total_cycles, 560u + copy_cycles);
  EXPECT_EQ(t.value().compute_cycles[0], copy_cycles);
  // With twice the DDR bandwidth the second read ends at 100 + max(100, 200) = 300.
  auto faster = predict_timing(p, config(), 16.0);
  ASSERT_TRUE(faster.ok());
  EXPECT_EQ(faster.value().time_after[1][1], 300u);
}

TEST(Timing, StreamsThatCanNeverFinishAreAnError) {
  format::Program p;
  p.cluster_count = 2;
  kbin_wait_signal_args w{1, 0, 1};
  p.streams = {{barrier()}, {format::Record::make(KBIN_FN_WAIT_SIGNAL, w)}};
  auto t = predict_timing(p, config(), 8.0);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("forever"), std::string::npos) << t.error().message;
  p.streams = {{format::Record{0x777, {1, 2, 3}}}, {}};
  EXPECT_FALSE(predict_timing(p, config(), 8.0).ok());
}

TEST(Timing, HandmadeProgramMatchesTheSimulatorExactly) {
  auto m = test::make_handmade();
  manycl::device::Device device(config());
  auto run = manycl::interp::run_kbin(device, m.program, {test::as_bytes(m.input), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto t = predict_timing(m.program, config(), config().ddr_bytes_per_cycle);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t.value().total_cycles, run.value().stats.cycles());
}

TEST(Timing, CompiledCnnPredictionIsTheSimulatedTime) {
  for (unsigned clusters : {1u, 2u})
    for (const char *precision : {"fp32", "fp16"}) {
      auto cnn = test::make_small_cnn();
      auto g = import_onnx_bytes(cnn.onnx);
      ASSERT_TRUE(g.ok()) << g.error().message;
      ASSERT_TRUE(passes::optimize(g.value()).ok());
      CompileOptions o;
      o.device = config();
      o.clusters = clusters;
      o.precision = precision;
      auto out = compile_graph(g.value(), o);
      ASSERT_TRUE(out.ok()) << out.error().message;
      manycl::device::Device device(o.device);
      std::vector<std::vector<uint8_t>> args(out.value().program.arg_count);
      args[0] = test::as_bytes(cnn.input);
      for (const auto &t : out.value().program.tensors)
        if (t.role == KBIN_ROLE_OUTPUT)
          args[t.arg_index].resize(t.byte_size);
      auto run = manycl::interp::run_kbin(device, out.value().program, args);
      ASSERT_TRUE(run.ok()) << run.error().message;
      // A program for all the device's clusters is predicted on the whole DDR.
      auto t = predict_timing(out.value().program, o.device, o.device.ddr_bytes_per_cycle);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(t.value().total_cycles, run.value().stats.cycles()) << clusters << " " << precision;
      if (clusters == o.device.clusters) {
        EXPECT_EQ(out.value().total_cycles, run.value().stats.cycles());
      }
      uint64_t steps = 0;
      for (const auto &op : out.value().ops)
        steps += op.cycles;
      EXPECT_LE(steps, out.value().total_cycles);
    }
}

} // namespace
