// Tile compiler decisions on small configurations, checked on the emitted records, and the
// numerics of the less common paths (channel-split and depthwise convolutions).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "handmade_program.h"
#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/kbin_runner.h"
#include "small_cnn.h"

namespace {

using namespace kann;

manycl::Result<CompileOutput> compile_bytes(const std::string &onnx, const char *preset,
                                            unsigned clusters, bool fuse_residual_adds = true) {
  auto g = import_onnx_bytes(onnx);
  if (!g)
    return g.error();
  if (auto r = passes::optimize(g.value()); !r)
    return r.error();
  CompileOptions o;
  o.device = manycl::device::preset(preset).value();
  o.clusters = clusters;
  o.fuse_residual_adds = fuse_residual_adds;
  return compile_graph(g.value(), o);
}

struct Counts {
  int multicast = 0, exchange = 0, load = 0, store = 0, barrier = 0;
};
Counts count(const format::Program &p) {
  Counts c;
  for (const auto &s : p.streams)
    for (const auto &r : s) {
      if (r.function_id == KBIN_FN_BARRIER)
        ++c.barrier;
      kbin_dma_args d;
      if (r.function_id != KBIN_FN_DMA || !r.decode(d))
        continue;
      c.multicast += d.kind == KBIN_DMA_MULTICAST;
      c.exchange += d.kind == KBIN_DMA_EXCHANGE;
      c.load += d.kind == KBIN_DMA_LOAD;
      c.store += d.kind == KBIN_DMA_STORE;
    }
  return c;
}

TEST(Tiler, SmallPresetSplitsRowsMulticastsWeightsAndExchangesHalos) {
  auto out = compile_bytes(test::make_small_cnn().onnx, "small", 2);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto &o = out.value();
  // The first convolution (20 rows) splits rows; later small ones may split channels when
  // the cost model says so. Every row-split convolution multicasts its weights once.
  EXPECT_EQ(o.ops[0].split, "rows");
  int row_convs = 0;
  for (const auto &op : o.ops) {
    if (op.op.rfind("Conv", 0) == 0)
      row_convs += op.split == "rows";
    if (op.op.rfind("MaxPool", 0) == 0) {
      EXPECT_EQ(op.split.substr(0, 4), "rows") << op.name;
    }
    if (op.op.rfind("Gemm", 0) == 0 || op.op.rfind("GlobalAveragePool", 0) == 0) {
      EXPECT_EQ(op.split, "channels") << op.name;
    }
    EXPECT_EQ(op.spm_peak.size(), 2u);
    EXPECT_GT(op.cycles, 0u);
  }
  Counts c = count(o.program);
  EXPECT_EQ(c.multicast, row_convs); // weights cross DDR once
  EXPECT_GT(c.exchange, 0);          // halo rows and the gathers before Gemm / global pooling
  EXPECT_EQ(c.barrier % 2, 0);
  EXPECT_TRUE(o.spilled.empty());
  EXPECT_LE(o.program.spm_required, 256u << 10);
  // Buffers with disjoint lifetimes share SPM.
  bool reused = false;
  for (size_t i = 0; i < o.buffers.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      reused |= o.buffers[i].offset < o.buffers[j].offset + o.buffers[j].size &&
                o.buffers[j].offset < o.buffers[i].offset + o.buffers[i].size;
  EXPECT_TRUE(reused);
  EXPECT_NE(o.report_html().find("<svg"), std::string::npos);
  EXPECT_NE(o.report_json().find("\"ops\""), std::string::npos);
}

TEST(Tiler, OneClusterNeedsNoExchangesOrBarriers) {
  auto out = compile_bytes(test::make_small_cnn().onnx, "mppa3", 1);
  ASSERT_TRUE(out.ok()) << out.error().message;
  Counts c = count(out.value().program);
  EXPECT_EQ(c.exchange, 0);
  EXPECT_EQ(c.barrier, 0);
}

// A deep, spatially small layer: 5 clusters cannot share 4 rows, so the cost model splits
// output channels; a depthwise convolution follows (split by channels too), then a
// pointwise one. Numerics against a direct reference.
TEST(Tiler, ChannelSplitChosenForSmallSpatialLayersAndExact) {
  test::OnnxBuilder b;
  b.input("x", {1, 64, 4, 4});
  auto w1 = b.weight("w1", {40, 64, 3, 3}, 0.05f);
  auto b1 = b.weight("b1", {40}, 0.1f);
  auto wd = b.weight("wd", {40, 1, 3, 3}, 0.3f);
  auto &c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"});
  test::OnnxBuilder::ints(c1, "pads", {1, 1, 1, 1});
  auto &dw = b.node("Conv", {"c1", "wd"}, {"y"});
  test::OnnxBuilder::ints(dw, "pads", {1, 1, 1, 1});
  test::OnnxBuilder::int1(dw, "group", 40);
  b.output("y");
  auto out = compile_bytes(b.bytes(), "mppa3", 5);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.value().ops[0].split, "channels") << out.value().report_text();

  test::ref::T x = test::ref::make(64, 4, 4);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.05f * float(i));
  auto c1r = test::ref::conv(x, w1, b1, 40, 3, 1, 1);
  test::ref::T yr = test::ref::make(40, 4, 4);
  for (int c = 0; c < 40; ++c)
    for (int yy = 0; yy < 4; ++yy)
      for (int xx = 0; xx < 4; ++xx) {
        double acc = 0;
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx) {
            int iy = yy + ky - 1, ix = xx + kx - 1;
            if (iy >= 0 && ix >= 0 && iy < 4 && ix < 4)
              acc += double(c1r.at(c, iy, ix)) * wd[(c * 3 + ky) * 3 + kx];
          }
        yr.at(c, yy, xx) = float(acc);
      }
  manycl::device::Device device(manycl::device::preset("mppa3").value());
  auto run = manycl::interp::run_kbin(device, out.value().program, {test::as_bytes(x.v), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto got = test::as_floats(run.value().outputs[1]);
  ASSERT_EQ(got.size(), yr.v.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], yr.v[i], 1e-3f) << i;
}

// Bytes of parameters (PARAMS space) the program reads from DDR, and whether every load
// of parameters that is not the prologue's prefetch is awaited through a weight signal.
uint64_t param_ddr_bytes(const format::Program &p) {
  uint64_t bytes = 0;
  for (const auto &s : p.streams)
    for (const auto &r : s) {
      kbin_dma_args d;
      if (r.function_id == KBIN_FN_DMA && r.decode(d) && d.ddr.space == KBIN_DDR_PARAMS)
        bytes += d.shape.row_bytes * d.shape.rows * d.shape.planes;
    }
  return bytes;
}
int wait_signals(const format::Program &p) {
  int n = 0;
  for (const auto &s : p.streams)
    for (const auto &r : s)
      n += r.function_id == KBIN_FN_WAIT_SIGNAL;
  return n;
}

manycl::Result<manycl::interp::KbinRunResult> run_on(const char *preset, const format::Program &p,
                                                     const std::vector<float> &x) {
  manycl::device::Device device(manycl::device::preset(preset).value());
  return manycl::interp::run_kbin(device, p, {test::as_bytes(x), {}});
}

// 800 KiB of Gemm weights for 256 KiB SPMs (400 KiB per cluster on 2): each cluster streams
// its output-channel slices (double buffered, each awaited by a signal), every parameter byte
// read once.
TEST(Tiler, GemmWeightsLargerThanTheSpmStreamInOutputChannelSlices) {
  test::OnnxBuilder b;
  b.input("x", {1, 512});
  auto w = b.weight("w", {512, 400}, 0.01f);
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  std::vector<float> x(512), wt(400 * 512);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::cos(0.1f * float(i));
  for (int k = 0; k < 512; ++k)
    for (int n = 0; n < 400; ++n)
      wt[size_t(n) * 512 + k] = w[size_t(k) * 400 + n];
  const auto want = test::ref::gemm(x, wt, std::vector<float>(400, 0.0f), 400);
  for (unsigned clusters : {1u, 2u}) {
    auto out = compile_bytes(b.bytes(), "small", clusters);
    ASSERT_TRUE(out.ok()) << out.error().message;
    const auto &o = out.value();
    EXPECT_NE(o.ops[0].split.find(" w"), std::string::npos) << o.report_text();
    EXPECT_GT(wait_signals(o.program), 0);
    EXPECT_TRUE(o.spilled.empty());
    EXPECT_LE(param_ddr_bytes(o.program), uint64_t(512 * 400 * 4 * 1.05));
    auto run = run_on("small", o.program, x);
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto got = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
  }
}

// A row-split 3x3 convolution with 1.2 MB of weights on 256 KiB SPMs: the slices are
// multicast once each (the clusters meet between slices), results exact in FP32 and close in
// FP16.
TEST(Tiler, ConvWeightsLargerThanTheSpmStreamInMulticastSlices) {
  test::OnnxBuilder b;
  b.input("x", {1, 64, 8, 8});
  auto w = b.weight("w", {512, 64, 3, 3}, 0.02f);
  auto bias = b.weight("b", {512}, 0.1f);
  auto &conv = b.node("Conv", {"x", "w", "b"}, {"y"});
  test::OnnxBuilder::ints(conv, "pads", {1, 1, 1, 1});
  b.output("y");
  test::ref::T x = test::ref::make(64, 8, 8);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.03f * float(i));
  const auto want = test::ref::conv(x, w, bias, 512, 3, 1, 1);
  for (const char *precision : {"fp32", "fp16"}) {
    SCOPED_TRACE(precision);
    auto g = import_onnx_bytes(b.bytes());
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE(passes::optimize(g.value()).ok());
    CompileOptions opt;
    opt.device = manycl::device::preset("small").value();
    opt.clusters = 2;
    opt.precision = precision;
    auto out = compile_graph(g.value(), opt);
    ASSERT_TRUE(out.ok()) << out.error().message;
    const auto &o = out.value();
    const auto conv_op =
        *std::find_if(o.ops.begin(), o.ops.end(), [](const OpReport &r) { return r.op == "Conv"; });
    EXPECT_EQ(conv_op.split.rfind("rows", 0), 0u) << o.report_text();
    EXPECT_NE(conv_op.split.find(" w"), std::string::npos) << o.report_text();
    EXPECT_TRUE(o.spilled.empty()) << o.report_text();
    const uint64_t es = std::string(precision) == "fp16" ? 2 : 4;
    EXPECT_LE(param_ddr_bytes(o.program), uint64_t(double(w.size() * es + 512 * 4) * 1.05));
    EXPECT_GT(count(o.program).multicast, 2);
    // A slice's buffer is reused after the other cluster posted that it is done with it (a
    // signal to the multicasting cluster), not after a barrier of all.
    int posts = 0;
    for (const auto &stream : o.program.streams)
      for (const auto &r : stream)
        posts += r.function_id == KBIN_FN_SIGNAL;
    EXPECT_GT(posts, 0);
    auto run = run_on("small", o.program, x.v);
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto got = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(got.size(), want.v.size());
    const float tol = es == 2 ? 3e-2f : 1e-4f;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.v[i], tol * (1.0f + std::fabs(want.v[i]))) << i;
  }
}

// A 12x12 output with 192 channels (12 panels of 16) on 5 clusters: split by rows or by
// channels, the busiest cluster computes a quarter of the work (3 of 12 rows or panels) where
// a fifth is the mean. Split by rows and channels at once (groups of clusters, each group a
// channel range split by rows: here four clusters take 3 rows each of channels 0..160, the
// fifth all rows of the last 32 channels) the slowest call is shorter. The pipeline
// candidates choose it by the native cost model; each range's parameters are multicast once
// to its clusters (every parameter byte crosses the DDR once), and the outputs equal the
// layer schedule's bit for bit and a direct reference. Two clusters have no such split.
TEST(Tiler, ConvolutionSplitByRowsAndChannelsWhereOneDSplitsLeaveRoundsUnbalanced) {
  test::OnnxBuilder b;
  b.input("x", {1, 64, 12, 12});
  auto w = b.weight("w", {192, 64, 3, 3}, 0.03f);
  auto bias = b.weight("b", {192}, 0.1f);
  auto &conv = b.node("Conv", {"x", "w", "b"}, {"y"});
  test::OnnxBuilder::ints(conv, "pads", {1, 1, 1, 1});
  b.output("y");
  test::ref::T x = test::ref::make(64, 12, 12);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.03f * float(i));
  const auto want = test::ref::conv(x, w, bias, 192, 3, 1, 1);
  auto g = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  for (unsigned clusters : {5u, 2u}) {
    SCOPED_TRACE(clusters);
    CompileOptions opt;
    opt.device = manycl::device::preset("mppa3").value();
    opt.clusters = clusters;
    opt.schedule = "layer";
    auto layer = compile_graph(g.value(), opt);
    ASSERT_TRUE(layer.ok()) << layer.error().message;
    opt.schedule = "pipeline";
    opt.dump_schedule = true;
    auto out = compile_graph(g.value(), opt);
    ASSERT_TRUE(out.ok()) << out.error().message;
    const auto &o = out.value();
    const auto conv_op =
        *std::find_if(o.ops.begin(), o.ops.end(), [](const OpReport &r) { return r.op == "Conv"; });
    if (clusters < 3) {
      EXPECT_EQ(conv_op.split.find(" x "), std::string::npos) << o.report_text();
    } else {
      EXPECT_EQ(conv_op.split, "rows x channels") << o.report_text();
      EXPECT_LT(o.total_cycles, layer.value().total_cycles);
      // The boxes (schedule dump): four clusters share a channel range by rows.
      EXPECT_NE(o.schedule.find("split rows x channels"), std::string::npos) << o.schedule;
      EXPECT_NE(o.schedule.find("c0 rows 0..3 ch 0..160; c1 rows 3..6 ch 0..160"),
                std::string::npos);
      EXPECT_NE(o.schedule.find("c4 rows 0..12 ch 160..192"), std::string::npos);
      // Each range's parameters multicast once: the DDR reads the blob once.
      EXPECT_LE(param_ddr_bytes(o.program), o.params_bytes);
      EXPECT_GT(param_ddr_bytes(o.program) + 5 * 64, o.params_bytes); // but section alignment
      EXPECT_GT(count(o.program).multicast, 0);
    }
    auto run = run_on("mppa3", o.program, x.v);
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto by_layer = run_on("mppa3", layer.value().program, x.v);
    ASSERT_TRUE(by_layer.ok()) << by_layer.error().message;
    auto got = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(got.size(), want.v.size());
    EXPECT_EQ(run.value().outputs[1], by_layer.value().outputs[1]); // same order of arithmetic
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.v[i], 1e-4f * (1.0f + std::fabs(want.v[i]))) << i;
  }
}

// A residual block whose three 100 KiB-per-cluster activations (the Add's two inputs and
// its output) exceed a 256 KiB SPM: the Add writes over its dying input, so nothing spills
// (placing the three apart spilled one to DDR). Numerics against a direct reference. Without
// residual fusion (which removes the Add: the second test case).
TEST(Tiler, InPlaceAddAvoidsASpill) {
  test::OnnxBuilder b;
  b.input("x", {1, 32, 40, 40});
  auto wa = b.weight("wa", {32, 32, 1, 1}, 0.2f);
  auto wb = b.weight("wb", {32, 32, 3, 3}, 0.05f);
  auto wc = b.weight("wc", {32, 32, 1, 1}, 0.2f);
  b.node("Conv", {"x", "wa"}, {"a"});
  auto &cb = b.node("Conv", {"a", "wb"}, {"b"});
  test::OnnxBuilder::ints(cb, "pads", {1, 1, 1, 1});
  b.node("Add", {"a", "b"}, {"c"});
  b.node("Conv", {"c", "wc"}, {"y"});
  b.output("y");
  auto out = compile_bytes(b.bytes(), "small", 2, false);
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto &o = out.value();
  EXPECT_TRUE(o.spilled.empty()) << o.report_text();
  EXPECT_EQ(o.program.scratch_size, 0u);
  for (const auto &buf : o.buffers)
    EXPECT_NE(buf.name, "c") << "the Add output has its own buffer";
  // Fused, the Add's step is gone: the convolution reads `a` as its residual (two 100 KiB
  // inputs and its output, as the Add had), and nothing spills either.
  auto fused = compile_bytes(b.bytes(), "small", 2);
  ASSERT_TRUE(fused.ok()) << fused.error().message;
  EXPECT_TRUE(fused.value().spilled.empty()) << fused.value().report_text();
  EXPECT_EQ(fused.value().ops.size(), o.ops.size() - 1);

  test::ref::T x = test::ref::make(32, 40, 40);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.013f * float(i));
  const auto a = test::ref::conv(x, wa, {}, 32, 1, 1, 0);
  const auto c = test::ref::add(a, test::ref::conv(a, wb, {}, 32, 3, 1, 1));
  const auto want = test::ref::conv(c, wc, {}, 32, 1, 1, 0);
  auto run = run_on("small", o.program, x.v);
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto got = test::as_floats(run.value().outputs[1]);
  ASSERT_EQ(got.size(), want.v.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want.v[i], 1e-4f * (1.0f + std::fabs(want.v[i]))) << i;
  auto fused_run = run_on("small", fused.value().program, x.v);
  ASSERT_TRUE(fused_run.ok()) << fused_run.error().message;
  EXPECT_EQ(fused_run.value().outputs[1], run.value().outputs[1]); // FP32: bit for bit
}

// Layer groups (--schedule group): a chain of convolutions (3x3, then 3x3 stride 2, 1x1, a
// residual 3x3 and Add) whose 96x96 activations exceed a 256 KiB SPM. The layer schedule
// spills them (and streams the network input from DDR); the group schedule runs the chain
// band by band with its intermediates in SPM band buffers: nothing spills, and since a band
// changes which rows a call computes, not the arithmetic of an output element, the FP32
// results equal the layer schedule's bit for bit (without Winograd convolutions, whose
// rounding depends on where a band starts: docs/native.md). On 1 and 2 clusters of the small preset
// and on 5 of mppa3 (no spill there: the group is the largest activation's), against a
// direct reference too.
TEST(Tiler, LayerGroupKeepsAConvolutionChainInTheSpmBandByBand) {
  test::OnnxBuilder b;
  b.input("x", {1, 8, 96, 96});
  auto wa = b.weight("wa", {16, 8, 3, 3}, 0.1f);
  auto wb = b.weight("wb", {16, 16, 3, 3}, 0.05f);
  auto wc = b.weight("wc", {8, 16, 1, 1}, 0.2f);
  auto wd = b.weight("wd", {16, 8, 3, 3}, 0.05f);
  auto &ca = b.node("Conv", {"x", "wa"}, {"a0"});
  test::OnnxBuilder::ints(ca, "pads", {1, 1, 1, 1});
  b.node("Relu", {"a0"}, {"a"});
  auto &cb = b.node("Conv", {"a", "wb"}, {"bb"});
  test::OnnxBuilder::ints(cb, "pads", {1, 1, 1, 1});
  test::OnnxBuilder::ints(cb, "strides", {2, 2});
  b.node("Conv", {"bb", "wc"}, {"c"});
  auto &cd = b.node("Conv", {"c", "wd"}, {"d"});
  test::OnnxBuilder::ints(cd, "pads", {1, 1, 1, 1});
  b.node("Add", {"bb", "d"}, {"y"});
  b.output("y");

  test::ref::T x = test::ref::make(8, 96, 96);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.011f * float(i)) + 0.25f * std::cos(0.37f * float(i));
  const auto a = test::ref::relu(test::ref::conv(x, wa, {}, 16, 3, 1, 1));
  const auto bb = test::ref::conv(a, wb, {}, 16, 3, 2, 1);
  const auto c = test::ref::conv(bb, wc, {}, 8, 1, 1, 0);
  const auto want = test::ref::add(bb, test::ref::conv(c, wd, {}, 16, 3, 1, 1));

  auto g = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  for (auto [preset, clusters] : {std::pair{"small", 1u}, {"small", 2u}, {"mppa3", 5u}}) {
    SCOPED_TRACE(std::string(preset) + " x" + std::to_string(clusters));
    CompileOptions o;
    o.device = manycl::device::preset(preset).value();
    o.clusters = clusters;
    o.winograd = "off";
    o.schedule = "layer";
    auto layer = compile_graph(g.value(), o);
    o.schedule = "group";
    auto grouped = compile_graph(g.value(), o);
    ASSERT_TRUE(layer.ok()) << layer.error().message;
    ASSERT_TRUE(grouped.ok()) << grouped.error().message;
    const CompileOutput &lo = layer.value(), &go = grouped.value();
    EXPECT_EQ(go.schedule_choice.chosen, "group") << go.schedule_choice.why;
    EXPECT_EQ(go.schedule_choice.group_cycles, go.total_cycles);
    // Only the network's own arguments may live in DDR (the 288 KiB input does not fit one
    // 256 KiB SPM): no intermediate is spilled to scratch.
    EXPECT_EQ(go.program.scratch_size, 0u) << go.report_text();
    for (const std::string &t : go.spilled)
      EXPECT_TRUE(t == "x" || t == "y") << t;
    if (std::string(preset) == "small") {
      EXPECT_GT(lo.program.scratch_size, 0u) << "the chain should not fit layer by layer";
    }
    // The group's operators all compute in its last step; the others report no compute.
    int grouped_ops = 0;
    for (const auto &op : go.ops)
      grouped_ops += op.split.rfind("group", 0) == 0;
    EXPECT_GE(grouped_ops, 2);
    EXPECT_LE(go.program.spm_required, o.device.spm_bytes);
    auto run_layer = run_on(preset, lo.program, x.v);
    auto run_group = run_on(preset, go.program, x.v);
    ASSERT_TRUE(run_layer.ok()) << run_layer.error().message;
    ASSERT_TRUE(run_group.ok()) << run_group.error().message;
    auto got = test::as_floats(run_group.value().outputs[1]);
    auto ref = test::as_floats(run_layer.value().outputs[1]);
    ASSERT_EQ(got.size(), want.v.size());
    ASSERT_EQ(ref.size(), got.size());
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0)
        << "group and layer differ";
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.v[i], 1e-4f * (1.0f + std::fabs(want.v[i]))) << i;
    // Predicted cycles are the simulator's (on the whole device: the prediction for fewer
    // clusters assumes their share of the DDR).
    const auto &st = run_group.value().stats;
    if (clusters == o.device.clusters) {
      EXPECT_EQ(st.end_cycle - st.start_cycle, go.total_cycles);
    }
  }
}

// The reports of a schedule with layer groups (issue 13 item 4): a chain of two 3x3
// convolutions whose 96x96x16 intermediate spills on one 256 KiB cluster layer by layer, so
// `auto` builds the group candidate and keeps it. The text, JSON and HTML reports name the
// group's operators, its bands and band buffers, the candidates' predicted cycles and why
// the group was formed; the layer schedule's reports have no group.
TEST(Tiler, ReportsShowLayerGroupsAndWhyTheScheduleWasChosen) {
  test::OnnxBuilder b;
  b.input("x", {1, 8, 96, 96});
  b.weight("wa", {16, 8, 3, 3}, 0.1f);
  b.weight("wb", {8, 16, 3, 3}, 0.05f);
  auto &ca = b.node("Conv", {"x", "wa"}, {"a"});
  test::OnnxBuilder::ints(ca, "pads", {1, 1, 1, 1});
  auto &cb = b.node("Conv", {"a", "wb"}, {"y"});
  test::OnnxBuilder::ints(cb, "pads", {1, 1, 1, 1});
  b.output("y");
  auto g = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  CompileOptions o;
  o.device = manycl::device::preset("small").value();
  o.clusters = 1;
  o.schedule = "layer";
  auto layer = compile_graph(g.value(), o);
  o.schedule = "auto";
  auto chosen = compile_graph(g.value(), o);
  ASSERT_TRUE(layer.ok()) << layer.error().message;
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  const CompileOutput &lo = layer.value(), &ao = chosen.value();
  ASSERT_FALSE(lo.spilled.empty()) << "the intermediate should spill layer by layer";
  EXPECT_TRUE(lo.groups.empty());
  EXPECT_EQ(lo.report_html().find("Layer groups"), std::string::npos);

  ASSERT_EQ(ao.schedule_choice.chosen, "group") << ao.schedule_choice.why;
  ASSERT_EQ(ao.groups.size(), 1u) << ao.report_text();
  const GroupReport &gr = ao.groups[0];
  ASSERT_LT(gr.last_op, ao.ops.size());
  EXPECT_EQ(ao.ops[gr.first_op].name, g.value().nodes[0].name);
  EXPECT_EQ(gr.last_op, gr.first_op + 1);
  EXPECT_GT(gr.bands, 1);
  EXPECT_NE(ao.ops[gr.last_op].split.find("x" + std::to_string(gr.bands)), std::string::npos);
  ASSERT_EQ(gr.intermediates, std::vector<std::string>{"a"});
  // The band buffer of the intermediate is live in the group's step, and smaller than the
  // whole 96x96x16 activation.
  bool band_buffer = false;
  for (size_t k : gr.buffers) {
    ASSERT_LT(k, ao.buffers.size());
    EXPECT_LE(ao.buffers[k].first_step, int(gr.last_op) + 1);
    EXPECT_GE(ao.buffers[k].last_step, int(gr.last_op) + 1);
    if (ao.buffers[k].name == "a.band") {
      band_buffer = true;
      EXPECT_LT(ao.buffers[k].size, 96u * 96u * 16u * 4u);
    }
  }
  EXPECT_TRUE(band_buffer);
  EXPECT_NE(gr.why.find("'a'"), std::string::npos) << gr.why;
  EXPECT_NE(gr.why.find("spilled by the layer schedule"), std::string::npos) << gr.why;

  EXPECT_NE(ao.report_text().find("layer group 0: "), std::string::npos);
  const auto j = nlohmann::json::parse(ao.report_json());
  ASSERT_EQ(j["layer_groups"].size(), 1u);
  EXPECT_EQ(j["layer_groups"][0]["first_op"], gr.first_op);
  EXPECT_EQ(j["layer_groups"][0]["bands"], gr.bands);
  EXPECT_EQ(j["layer_groups"][0]["why"], gr.why);
  const std::string html = ao.report_html();
  EXPECT_NE(html.find("<h2>Layer groups</h2>"), std::string::npos);
  EXPECT_NE(html.find("<rect class='group'"), std::string::npos) << "no group on the timeline";
  EXPECT_NE(html.find("SPM during group 0"), std::string::npos);
  EXPECT_NE(html.find("a.band @"), std::string::npos);
  // The candidates and their predicted cycles, the chosen one marked.
  EXPECT_NE(html.find("<td>layer</td><td>" + std::to_string(lo.total_cycles) + "</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td>group</td><td>" + std::to_string(ao.total_cycles) + "</td><td>"),
            std::string::npos);
  EXPECT_NE(html.find("</td><td>chosen</td></tr>"), std::string::npos);
}

// Software pipelining (issue 13 item 3) on 5 clusters of mppa3, FP32: the pipeline schedule
// computes the rows other clusters read first and sends them while the rest computes; with
// a large input (768 KiB, whose load the DDR serves cluster after cluster) the group
// schedule streams the network input from DDR in bands into a group of its first operator
// (every band's load issued at the start, each band waited for by a private signal), next to
// the group its largest activation seeds (the 1x1 convolution's 2 MiB output and its reader). Both
// only reorder the same per-element arithmetic: bit-identical to the layer schedule, and the input
// is reported as streamed, not as spilled.
TEST(Tiler, ExchangesAndTheInputStreamOverlapTheComputeBitIdentically) {
  test::OnnxBuilder b;
  b.input("x", {1, 3, 256, 256});
  auto wa = b.weight("wa", {8, 3, 3, 3}, 0.2f);
  auto wb = b.weight("wb", {32, 8, 1, 1}, 0.1f);
  auto wc = b.weight("wc", {8, 32, 3, 3}, 0.05f);
  auto &ca = b.node("Conv", {"x", "wa"}, {"a0"});
  test::OnnxBuilder::ints(ca, "pads", {1, 1, 1, 1});
  test::OnnxBuilder::ints(ca, "strides", {2, 2});
  b.node("Relu", {"a0"}, {"a"});
  b.node("Conv", {"a", "wb"}, {"bb"});
  auto &cc = b.node("Conv", {"bb", "wc"}, {"y"});
  test::OnnxBuilder::ints(cc, "pads", {1, 1, 1, 1});
  b.output("y");
  test::ref::T x = test::ref::make(3, 256, 256);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.013f * float(i)) + 0.5f * std::cos(0.29f * float(i));
  const auto a = test::ref::relu(test::ref::conv(x, wa, {}, 8, 3, 2, 1));
  const auto want = test::ref::conv(test::ref::conv(a, wb, {}, 32, 1, 1, 0), wc, {}, 8, 3, 1, 1);

  auto g = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  CompileOptions o;
  o.device = manycl::device::preset("mppa3").value();
  o.clusters = 5;
  o.winograd = "off";
  std::map<std::string, CompileOutput> built;
  for (const char *schedule : {"layer", "pipeline", "group"}) {
    o.schedule = schedule;
    auto r = compile_graph(g.value(), o);
    ASSERT_TRUE(r.ok()) << schedule << ": " << r.error().message;
    built.emplace(schedule, std::move(r.value()));
  }
  const CompileOutput &layer = built.at("layer"), &piped = built.at("pipeline"),
                      &grouped = built.at("group");
  EXPECT_EQ(grouped.schedule_choice.chosen, "group") << grouped.schedule_choice.why;
  EXPECT_LT(piped.total_cycles, layer.total_cycles);
  EXPECT_LT(grouped.total_cycles, layer.total_cycles);
  EXPECT_NE(grouped.schedule_choice.why.find("the input streamed"), std::string::npos)
      << grouped.schedule_choice.why;
  EXPECT_EQ(grouped.streamed, std::vector<std::string>{"x"});
  EXPECT_TRUE(grouped.spilled.empty()) << grouped.report_text();
  EXPECT_TRUE(layer.streamed.empty());
  // The pipeline schedule sends some rows between a cluster's calls of one operator: an
  // exchange record before that step's last compute call.
  bool early = false;
  for (const auto &stream : piped.program.streams) {
    bool exchanged = false;
    for (const auto &rec : stream) {
      if (rec.function_id == KBIN_FN_DMA) {
        kbin_dma_args d;
        rec.decode(d);
        exchanged =
            exchanged || d.kind == KBIN_DMA_EXCHANGE || d.kind == KBIN_DMA_EXCHANGE_MULTICAST;
      } else if (rec.function_id == KBIN_FN_BARRIER) {
        exchanged = false;
      } else if (rec.function_id < 0x1000 && exchanged) {
        early = true;
      }
    }
  }
  EXPECT_TRUE(early) << "no exchange overlaps a compute call";
  // The streamed input's bands wait on the private input signal.
  bool waits_for_bands = false;
  for (const auto &stream : grouped.program.streams)
    for (const auto &rec : stream)
      if (rec.function_id == KBIN_FN_WAIT_SIGNAL) {
        kbin_wait_signal_args w;
        rec.decode(w);
        waits_for_bands = waits_for_bands || w.signal >= KBIN_FIRST_PRIVATE_SIGNAL;
      }
  EXPECT_TRUE(waits_for_bands);

  std::vector<float> ref;
  for (const auto &[schedule, out] : built) {
    SCOPED_TRACE(schedule);
    auto run = run_on("mppa3", out.program, x.v);
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto got = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(got.size(), want.v.size());
    if (ref.empty())
      ref = got;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0)
        << "differs from the first schedule's output";
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.v[i], 1e-4f * (1.0f + std::fabs(want.v[i]))) << i;
    EXPECT_EQ(run.value().stats.end_cycle - run.value().stats.start_cycle, out.total_cycles);
  }
}

// A 7x7 map with many channels splits by channels on 5 clusters; the next 1x1 convolution
// reads every channel on every cluster, so each cluster's slice goes to the four others as
// one SPM multicast (the engine sends it once), under every schedule, with the same bits.
TEST(Tiler, AllGathersAfterChannelSplitsAreSpmMulticasts) {
  test::OnnxBuilder b;
  b.input("x", {1, 64, 7, 7});
  auto wa = b.weight("wa", {320, 64, 1, 1}, 0.1f);
  auto wb = b.weight("wb", {640, 320, 1, 1}, 0.05f);
  b.node("Conv", {"x", "wa"}, {"a0"});
  b.node("Relu", {"a0"}, {"a"});
  b.node("Conv", {"a", "wb"}, {"y"});
  b.output("y");
  test::ref::T x = test::ref::make(64, 7, 7);
  for (size_t i = 0; i < x.v.size(); ++i)
    x.v[i] = std::sin(0.037f * float(i)) + 0.25f * std::cos(0.11f * float(i));
  const auto a = test::ref::relu(test::ref::conv(x, wa, {}, 320, 1, 1, 0));
  const auto want = test::ref::conv(a, wb, {}, 640, 1, 1, 0);

  auto g = import_onnx_bytes(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(passes::optimize(g.value()).ok());
  CompileOptions o;
  o.device = manycl::device::preset("mppa3").value();
  o.clusters = 5;
  std::vector<float> ref;
  for (const char *schedule : {"layer", "auto"}) {
    SCOPED_TRACE(schedule);
    o.schedule = schedule;
    auto r = compile_graph(g.value(), o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const CompileOutput &out = r.value();
    unsigned multicasts = 0;
    for (uint32_t c = 0; c < out.program.streams.size(); ++c)
      for (const auto &rec : out.program.streams[c]) {
        kbin_dma_args d;
        if (rec.function_id != KBIN_FN_DMA || !rec.decode(d) ||
            d.kind != KBIN_DMA_EXCHANGE_MULTICAST)
          continue;
        ++multicasts;
        EXPECT_EQ(d.cluster_mask, 0x1Fu & ~(1u << c)) << "cluster " << c;
      }
    EXPECT_GE(multicasts, 5u) << out.report_text();
    auto run = run_on("mppa3", out.program, x.v);
    ASSERT_TRUE(run.ok()) << run.error().message;
    auto got = test::as_floats(run.value().outputs[1]);
    ASSERT_EQ(got.size(), want.v.size());
    if (ref.empty())
      ref = got;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want.v[i], 1e-4f * (1.0f + std::fabs(want.v[i]))) << i;
    EXPECT_EQ(run.value().stats.end_cycle - run.value().stats.start_cycle, out.total_cycles);
  }
}

TEST(Tiler, BadClusterCountAndPrecisionAreRejected) {
  auto m = test::make_small_cnn();
  EXPECT_FALSE(compile_bytes(m.onnx, "small", 3).ok());
  auto g = import_onnx_bytes(m.onnx);
  CompileOptions o;
  o.device = manycl::device::preset("small").value();
  o.precision = "int4";
  EXPECT_FALSE(compile_graph(g.value(), o).ok());
}

} // namespace
