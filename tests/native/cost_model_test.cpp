// The native cost model (docs/device-model.md, "Native compute model"): cycle counts derived
// by hand from the documented constants (matrix-engine efficiency 55 %, call 60 + 4/PE, unit
// 12, tap 6, 32 B/cycle load/store), for full blocks, partial blocks and load/store-bound work.
#include <gtest/gtest.h>

#include "manycl/native/native.h"

namespace {

mcl_tile tile(uint32_t h, uint32_t w, uint32_t c, uint32_t dtype) {
  return {0, h, w, c, w * c, c, 1, dtype};
}

mcl_native_cost_breakdown detail(uint32_t fn, const void *args, uint32_t pes) {
  mcl_native_cost_breakdown b{};
  EXPECT_EQ(mcl_native_cost_detail(fn, args, pes, &b), MCL_NATIVE_OK);
  EXPECT_EQ(b.total, mcl_native_cost(fn, args, pes));
  return b;
}

mcl_conv_args conv(uint32_t in_h, uint32_t in_w, uint32_t cin, uint32_t out_h, uint32_t out_w,
                   uint32_t cout, uint16_t k, uint32_t dtype) {
  mcl_conv_args a{};
  a.input = tile(in_h, in_w, cin, dtype);
  a.output = tile(out_h, out_w, cout, dtype);
  a.groups = 1;
  a.kernel_h = a.kernel_w = k;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  return a;
}

// FP16 1x1, 8x8x16 -> 8x8x16, no table. Row blocks 8*2 = 16, column blocks 4, register tile
// 2x4 -> 8 units. Per unit: matrix 4 channel blocks * 2*4 blocks * 4 cycles / 0.55 = 232.73;
// load/store 8 load-scatters + 16 weight blocks + 8 stores = 32; epilogue 2*4*2 accumulator
// moves + 128 elements * (bias + FP16 conversion) / 8 = 48; overhead 12 + 6 = 18.
TEST(NativeCostModel, FullBlocksAreMatrixBound) {
  mcl_conv_args a = conv(8, 8, 16, 8, 8, 16, 1, MCL_DTYPE_F16);
  a.flags = MCL_CONV_NO_TABLE;
  const auto one = detail(MCL_NATIVE_FN_CONV2D, &a, 1);
  EXPECT_EQ(one.total, 2454u); // 64 + ceil(8 * 298.73)
  EXPECT_EQ(one.matrix, 1862u);
  EXPECT_EQ(one.load_store, 256u);
  EXPECT_EQ(one.vliw, 384u);
  EXPECT_EQ(one.bound, (uint32_t)MCL_NATIVE_BOUND_MATRIX);
  EXPECT_EQ(one.macs, 16384u);
  EXPECT_EQ(one.padded_macs, 16384u);
  // 16 PEs: each takes at most one of the 8 units; the call costs 60 + 4*16.
  EXPECT_EQ(detail(MCL_NATIVE_FN_CONV2D, &a, 16).total, 423u);
}

// The same call with a residual tile (MCL_CONV_RESIDUAL): per unit 8 more load/store cycles
// (128 binary16 elements loaded) and 128 * 2 / 8 = 32 more epilogue cycles (the widening and
// the add); the matrix work is unchanged.
TEST(NativeCostModel, ResidualCountsItsLoadsAndAdds) {
  mcl_conv_args a = conv(8, 8, 16, 8, 8, 16, 1, MCL_DTYPE_F16);
  a.flags = MCL_CONV_NO_TABLE;
  const auto plain = detail(MCL_NATIVE_FN_CONV2D, &a, 1);
  a.flags |= MCL_CONV_RESIDUAL;
  a.residual = a.output;
  const auto fused = detail(MCL_NATIVE_FN_CONV2D, &a, 1);
  EXPECT_EQ(fused.matrix, plain.matrix);
  EXPECT_EQ(fused.load_store, 320u);
  EXPECT_EQ(fused.vliw, 640u);
  EXPECT_EQ(fused.total, 2710u); // 64 + ceil(8 * (18 + 232.73 + 80))
  EXPECT_GT(fused.total, plain.total);
}

// FP16 3x3, 3 input channels -> 4 output channels, output row 13 wide, with an address
// table. Row blocks 4 (13 pays for 16), one column block -> register tile 2x1, 2 units.
// 3 channels pay for a 4-deep block: padded 16 px * 4 * 9 taps * 4 = 2304 MACs for 1404.
// Per unit: matrix 9 * 1 * 2 * 4 / 0.55 = 130.9; load/store 9 taps * (8 load-scatters +
// 1 weight block + 8 table entries) + 2 stores = 155: bound by the load/store path.
TEST(NativeCostModel, PartialBlocksPayForWholeBlocks) {
  mcl_conv_args a = conv(3, 15, 3, 1, 13, 4, 3, MCL_DTYPE_F16);
  const auto b = detail(MCL_NATIVE_FN_CONV2D, &a, 1);
  EXPECT_EQ(b.macs, 1404u);
  EXPECT_EQ(b.padded_macs, 2304u);
  EXPECT_EQ(b.load_store, 310u);
  EXPECT_EQ(b.matrix, 262u);
  EXPECT_EQ(b.bound, (uint32_t)MCL_NATIVE_BOUND_LOAD_STORE);
  EXPECT_EQ(b.total, 530u); // 64 + 2 * (66 overhead + 155 + 12 epilogue)
}

// FP16 add of 16x16x16: 16 units of 256 elements, each loading 2 and storing 1 FP16 element
// per result (6 B: 48 cycles) against 256 / 16 = 16 VLIW cycles.
TEST(NativeCostModel, ElementWiseIsLoadStoreBound) {
  mcl_eltwise_args e{};
  e.a = e.b = e.output = tile(16, 16, 16, MCL_DTYPE_F16);
  e.op = MCL_ELTWISE_ADD;
  const auto b = detail(MCL_NATIVE_FN_ELTWISE, &e, 1);
  EXPECT_EQ(b.load_store, 768u);
  EXPECT_EQ(b.vliw, 256u);
  EXPECT_EQ(b.bound, (uint32_t)MCL_NATIVE_BOUND_LOAD_STORE);
  EXPECT_EQ(b.total, 1024u); // 64 + 16 * (12 + 48)
  // A per-channel gate broadcast over the pixels stays in registers: 4 B per result.
  e.b.row_stride = e.b.pixel_stride = 0;
  EXPECT_EQ(detail(MCL_NATIVE_FN_ELTWISE, &e, 1).load_store, 512u);
}

TEST(NativeCostModel, PrecisionsAndPesOrderAsTheHardware) {
  mcl_conv_args a = conv(34, 34, 64, 32, 32, 64, 3, MCL_DTYPE_F32);
  const uint64_t f32 = mcl_native_cost(MCL_NATIVE_FN_CONV2D, &a, 16);
  a.input.dtype = a.output.dtype = MCL_DTYPE_F16;
  const uint64_t f16 = mcl_native_cost(MCL_NATIVE_FN_CONV2D, &a, 16);
  a.input.dtype = a.output.dtype = MCL_DTYPE_S8;
  const uint64_t i8 = mcl_native_cost(MCL_NATIVE_FN_CONV2D, &a, 16);
  EXPECT_GT(f32, f16);
  EXPECT_GT(f16, i8);
  // The FP16 matrix engine sustains 16 FMA/cycle * 0.55 per PE at best.
  const uint64_t macs = 32ull * 32 * 64 * 9 * 64;
  EXPECT_GE(f16, macs / (16 * 16) * 100 / 55);
  EXPECT_GE(mcl_native_cost(MCL_NATIVE_FN_CONV2D, &a, 1), 8 * i8);
}

// Winograd F(4x4, 3x3): 36 products per 4x4 output block and channel pair instead of 144, plus
// the three transforms. A 28x28x64 -> 28x28x64 FP16 call (49 blocks) costs well under half the
// direct convolution; its MACs are the convolution's, the matrix engine executes a quarter as
// many (36 / 144 per block, blocks padded to 52).
TEST(NativeCostModel, WinogradCountsTransformsAndFewerProducts) {
  mcl_conv_args a = conv(30, 30, 64, 28, 28, 64, 3, MCL_DTYPE_F16);
  a.flags = MCL_CONV_NO_TABLE;
  const auto direct = detail(MCL_NATIVE_FN_CONV2D, &a, 16);
  a.flags |= MCL_CONV_WINOGRAD;
  const auto winograd = detail(MCL_NATIVE_FN_CONV2D, &a, 16);
  EXPECT_EQ(winograd.macs, direct.macs);
  EXPECT_EQ(winograd.padded_macs, 36u * 52 * 64 * 64);
  EXPECT_LT(winograd.padded_macs * 3, direct.padded_macs);
  EXPECT_LT(winograd.total * 2, direct.total);
  EXPECT_GT(winograd.vliw, direct.vliw); // the transforms run on the VLIW lanes
  // The phases are sequential: the total is at least each lane's sum.
  EXPECT_GE(winograd.total, winograd.matrix);
  EXPECT_GE(winograd.total, winograd.vliw);
}

TEST(NativeCostModel, UnknownFunctionIsReported) {
  mcl_native_cost_breakdown b{};
  const char block[64] = {};
  EXPECT_EQ(mcl_native_cost_detail(999, block, 16, &b), MCL_NATIVE_ERR_UNKNOWN_FUNCTION);
  EXPECT_EQ(b.total, 0u);
  EXPECT_EQ(mcl_native_cost(999, block, 16), 0u);
}

} // namespace
