// The argument-block validator: accepts well-formed blocks, rejects malformed ones with the
// right status, and never crashes (or reads past the block) on garbage.
#include "native_test_util.h"

#include <memory>

using namespace native_test;

namespace {

constexpr uint64_t kSpm = 1u << 20;

mcl_tile tile(uint32_t offset, uint32_t h, uint32_t w, uint32_t c, uint32_t dtype = MCL_DTYPE_F32) {
  return {offset, h, w, c, w * c, c, 1, dtype};
}

mcl_conv_args good_conv() {
  mcl_conv_args a{};
  a.input = tile(0, 8, 8, 16);
  a.output = tile(8192, 8, 8, 32);
  a.groups = 1;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  a.origin_y = a.origin_x = -1;
  a.table_offset = 16384;
  a.pad_row_offset = 16384 + 8 * 8 * 9 * 4;
  a.params_offset = 65536;
  return a;
}

template <class T> int check(uint32_t fn, const T &a, uint64_t spm = kSpm) {
  char msg[256];
  return mcl_native_validate(fn, &a, sizeof a, spm, msg, sizeof msg);
}

TEST(NativeValidator, AcceptsWellFormedConv) {
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, good_conv()), MCL_NATIVE_OK);
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV_TRANSPOSE2D, good_conv()), MCL_NATIVE_OK);
  // An implicit table takes no SPM: table_offset is not checked, even far outside.
  mcl_conv_args implicit = good_conv();
  implicit.flags = MCL_CONV_IMPLICIT_TABLE;
  implicit.table_offset = 0xfffffff0u;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, implicit), MCL_NATIVE_OK);
}

TEST(NativeValidator, ConvResidualTile) {
  mcl_conv_args a = good_conv();
  a.flags = MCL_CONV_RESIDUAL;
  a.residual = tile(200000, 8, 8, 32);
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, a), MCL_NATIVE_OK);
  struct Mutation {
    const char *name;
    void (*apply)(mcl_conv_args &);
    int expected;
  };
  const Mutation cases[] = {
      {"residual without the flag", [](mcl_conv_args &a) { a.flags = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"residual shape", [](mcl_conv_args &a) { a.residual.c = 16; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"residual type", [](mcl_conv_args &a) { a.residual.dtype = MCL_DTYPE_F16; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"residual channel stride", [](mcl_conv_args &a) { a.residual.channel_stride = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"residual beyond spm", [](mcl_conv_args &a) { a.residual.offset = kSpm - 64; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"residual overlaps output", [](mcl_conv_args &a) { a.residual.offset = a.output.offset + 64; },
       MCL_NATIVE_ERR_BAD_ARGS},
      {"residual on INT8",
       [](mcl_conv_args &a) {
         a.input.dtype = a.output.dtype = a.residual.dtype = MCL_DTYPE_S8;
         a.output_min = -128;
         a.output_max = 127;
       },
       MCL_NATIVE_ERR_BAD_ARGS},
  };
  for (const auto &m : cases) {
    mcl_conv_args b = a;
    m.apply(b);
    EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, b), m.expected) << m.name;
  }
  // Without the flag, a zero residual is what every other block carries.
  mcl_conv_args plain = good_conv();
  plain.residual.row_stride = 1;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, plain), MCL_NATIVE_ERR_BAD_ARGS);
}

TEST(NativeValidator, ConvWinogradOnlyWhereItApplies) {
  mcl_conv_args a = good_conv();
  a.flags = MCL_CONV_IMPLICIT_TABLE | MCL_CONV_WINOGRAD;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, a), MCL_NATIVE_OK);
  a.input.dtype = a.output.dtype = MCL_DTYPE_F16;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, a), MCL_NATIVE_OK);
  struct Mutation {
    const char *name;
    void (*apply)(mcl_conv_args &);
  };
  const Mutation cases[] = {
      {"stored table", [](mcl_conv_args &a) { a.flags = MCL_CONV_WINOGRAD; }},
      {"5x5", [](mcl_conv_args &a) { a.kernel_h = a.kernel_w = 5; }},
      {"3x1", [](mcl_conv_args &a) { a.kernel_w = 1; }},
      {"stride 2", [](mcl_conv_args &a) { a.stride_h = 2; }},
      {"dilation 2", [](mcl_conv_args &a) { a.dilation_w = 2; }},
      {"groups", [](mcl_conv_args &a) { a.groups = 2; }},
      {"INT8",
       [](mcl_conv_args &a) {
         a.input.dtype = a.output.dtype = MCL_DTYPE_U8;
         a.output_max = 255;
       }},
  };
  for (const auto &m : cases) {
    mcl_conv_args b = a;
    m.apply(b);
    EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, b), MCL_NATIVE_ERR_BAD_ARGS) << m.name;
  }
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV_TRANSPOSE2D, a), MCL_NATIVE_ERR_BAD_ARGS);
}

TEST(NativeValidator, RejectsBadSizeAndUnknownIds) {
  const mcl_conv_args a = good_conv();
  char msg[256];
  EXPECT_EQ(mcl_native_validate(MCL_NATIVE_FN_CONV2D, &a, sizeof a - 1, kSpm, msg, sizeof msg),
            MCL_NATIVE_ERR_BAD_SIZE);
  EXPECT_NE(std::string(msg).find("expected"), std::string::npos);
  EXPECT_EQ(mcl_native_validate(MCL_NATIVE_FN_CONV2D, nullptr, sizeof a, kSpm, msg, sizeof msg),
            MCL_NATIVE_ERR_BAD_SIZE);
  EXPECT_EQ(mcl_native_validate(0, &a, sizeof a, kSpm, msg, sizeof msg), MCL_NATIVE_ERR_UNKNOWN_FUNCTION);
  EXPECT_EQ(mcl_native_validate(MCL_NATIVE_FN_COUNT_, &a, sizeof a, kSpm, msg, sizeof msg),
            MCL_NATIVE_ERR_UNKNOWN_FUNCTION);
  EXPECT_EQ(mcl_native_validate(0xffffffffu, &a, sizeof a, kSpm, nullptr, 0), MCL_NATIVE_ERR_UNKNOWN_FUNCTION);
  EXPECT_EQ(mcl_native_args_size(MCL_NATIVE_FN_POOL2D), sizeof(mcl_pool_args));
  EXPECT_EQ(mcl_native_args_size(1000), 0u);
  EXPECT_STREQ(mcl_native_fn_name(MCL_NATIVE_FN_GEMM), "gemm");
  // A 1-byte message buffer still gets a terminator.
  msg[0] = 'x';
  mcl_native_validate(0, &a, sizeof a, kSpm, msg, 1);
  EXPECT_EQ(msg[0], '\0');
}

TEST(NativeValidator, RejectsMalformedConvFields) {
  struct Mutation {
    const char *name;
    void (*apply)(mcl_conv_args &);
    int expected;
  };
  const Mutation cases[] = {
      {"input beyond spm", [](mcl_conv_args &a) { a.input.offset = kSpm - 64; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"output beyond spm", [](mcl_conv_args &a) { a.output.row_stride = 1u << 30; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"params beyond spm", [](mcl_conv_args &a) { a.params_offset = kSpm - 4; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"table beyond spm", [](mcl_conv_args &a) { a.table_offset = kSpm - 8; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"pad row beyond spm", [](mcl_conv_args &a) { a.pad_row_offset = kSpm - 4; }, MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"implicit table, pad row beyond spm",
       [](mcl_conv_args &a) {
         a.flags = MCL_CONV_IMPLICIT_TABLE;
         a.pad_row_offset = kSpm - 4;
       },
       MCL_NATIVE_ERR_OUT_OF_RANGE},
      {"misaligned input", [](mcl_conv_args &a) { a.input.offset = 2; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"misaligned table", [](mcl_conv_args &a) { a.table_offset += 2; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"zero height", [](mcl_conv_args &a) { a.input.h = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"huge width", [](mcl_conv_args &a) { a.input.w = 0xffffffffu; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"bad dtype", [](mcl_conv_args &a) { a.input.dtype = 77; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"s32 tensor", [](mcl_conv_args &a) { a.input.dtype = MCL_DTYPE_S32; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"mixed float types", [](mcl_conv_args &a) { a.output.dtype = MCL_DTYPE_F16; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"zero groups", [](mcl_conv_args &a) { a.groups = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"groups do not divide", [](mcl_conv_args &a) { a.groups = 3; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"zero stride", [](mcl_conv_args &a) { a.stride_w = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"zero kernel", [](mcl_conv_args &a) { a.kernel_h = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"zero dilation", [](mcl_conv_args &a) { a.dilation_h = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"unknown flag", [](mcl_conv_args &a) { a.flags = 0x80; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"weight zero points on a float conv",
       [](mcl_conv_args &a) { a.flags = MCL_CONV_WEIGHT_ZERO_POINTS; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"reserved set", [](mcl_conv_args &a) { a.reserved0 = 1; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"unknown activation", [](mcl_conv_args &a) { a.act.kind = 99; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"clip min > max", [](mcl_conv_args &a) { a.act = {MCL_ACT_CLIP, 1.0f, 0.0f}; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"overlapping output pixels", [](mcl_conv_args &a) { a.output.pixel_stride = 8; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"overlapping output rows", [](mcl_conv_args &a) { a.output.row_stride = 32; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"channel stride on conv input", [](mcl_conv_args &a) { a.input.channel_stride = 0; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"no table with padding", [](mcl_conv_args &a) { a.flags = MCL_CONV_NO_TABLE; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"no table past the bottom", [](mcl_conv_args &a) { a.flags = MCL_CONV_NO_TABLE; a.origin_y = a.origin_x = 0; },
       MCL_NATIVE_ERR_BAD_ARGS},
      {"output overlaps table", [](mcl_conv_args &a) { a.output.offset = a.table_offset - 64; }, MCL_NATIVE_ERR_BAD_ARGS},
      {"both table flags", [](mcl_conv_args &a) { a.flags = MCL_CONV_NO_TABLE | MCL_CONV_IMPLICIT_TABLE; },
       MCL_NATIVE_ERR_BAD_ARGS},
      {"kernel too large", [](mcl_conv_args &a) { a.kernel_h = a.kernel_w = 0xffff; }, MCL_NATIVE_ERR_BAD_ARGS},
  };
  for (const auto &m : cases) {
    mcl_conv_args a = good_conv();
    m.apply(a);
    EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, a), m.expected) << m.name;
  }
  // INT8 specific.
  mcl_conv_args q = good_conv();
  q.input.dtype = MCL_DTYPE_U8;
  q.output.dtype = MCL_DTYPE_S8;
  q.output_min = -128, q.output_max = 127;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, q), MCL_NATIVE_OK);
  q.input_zero_point = -1; // u8 zero point must be in [0, 255]
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, q), MCL_NATIVE_ERR_BAD_ARGS);
  q.input_zero_point = 0;
  q.output_max = 200; // beyond s8
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, q), MCL_NATIVE_ERR_BAD_ARGS);
  q.output_max = -10, q.output_min = 10;
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, q), MCL_NATIVE_ERR_BAD_ARGS);
  // SPM larger than offsets can address.
  EXPECT_EQ(check(MCL_NATIVE_FN_CONV2D, good_conv(), 1ull << 40), MCL_NATIVE_ERR_BAD_ARGS);
}

TEST(NativeValidator, RejectsMalformedOtherBlocks) {
  mcl_pool_args p{};
  p.input = tile(0, 4, 4, 8);
  p.output = tile(1024, 2, 2, 8);
  p.kernel_h = p.kernel_w = p.stride_h = p.stride_w = p.dilation_h = p.dilation_w = 2;
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_OK);
  p.kind = 7;
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_ERR_BAD_ARGS);
  p.kind = MCL_POOL_MAX;
  p.output.c = 9;
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_ERR_BAD_ARGS);
  p.output.c = 8;
  p.input.dtype = p.output.dtype = MCL_DTYPE_U8;
  p.in_quant = {0.0f, 0};
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_ERR_BAD_ARGS) << "zero scale";
  p.in_quant = {NAN, 0};
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_ERR_BAD_ARGS) << "nan scale";
  p.in_quant = p.out_quant = {1.0f, 300};
  EXPECT_EQ(check(MCL_NATIVE_FN_POOL2D, p), MCL_NATIVE_ERR_BAD_ARGS) << "zero point";

  mcl_eltwise_args e{};
  e.a = tile(0, 2, 3, 4);
  e.b = tile(0, 2, 3, 4);
  e.b.row_stride = e.b.pixel_stride = 0; // broadcast is fine for inputs
  e.output = tile(512, 2, 3, 4);
  EXPECT_EQ(check(MCL_NATIVE_FN_ELTWISE, e), MCL_NATIVE_OK);
  e.op = MCL_ELTWISE_COUNT_;
  EXPECT_EQ(check(MCL_NATIVE_FN_ELTWISE, e), MCL_NATIVE_ERR_BAD_ARGS);
  e.op = 0;
  e.b.c = 5;
  EXPECT_EQ(check(MCL_NATIVE_FN_ELTWISE, e), MCL_NATIVE_ERR_BAD_ARGS);
  e.b.c = 4;
  e.output.pixel_stride = 0; // outputs never broadcast
  EXPECT_EQ(check(MCL_NATIVE_FN_ELTWISE, e), MCL_NATIVE_ERR_BAD_ARGS);

  mcl_resize_args r{};
  r.input = tile(0, 2, 2, 3);
  r.output = tile(256, 4, 4, 3);
  r.scale_h = r.scale_w = 2.0f;
  r.full_in_h = r.full_in_w = 2, r.full_out_h = r.full_out_w = 4;
  EXPECT_EQ(check(MCL_NATIVE_FN_RESIZE, r), MCL_NATIVE_OK);
  r.scale_h = -1.0f;
  EXPECT_EQ(check(MCL_NATIVE_FN_RESIZE, r), MCL_NATIVE_ERR_BAD_ARGS);
  r.scale_h = 2.0f;
  r.coord_mode = 9;
  EXPECT_EQ(check(MCL_NATIVE_FN_RESIZE, r), MCL_NATIVE_ERR_BAD_ARGS);

  mcl_pad_args pd{};
  pd.input = tile(0, 2, 2, 3);
  pd.output = tile(256, 4, 4, 3);
  pd.pad_top = 2;
  EXPECT_EQ(check(MCL_NATIVE_FN_PAD, pd), MCL_NATIVE_OK);
  pd.pad_top = 3;
  EXPECT_EQ(check(MCL_NATIVE_FN_PAD, pd), MCL_NATIVE_ERR_BAD_ARGS);
  pd.pad_top = 0xffffffffu; // no wrap-around
  EXPECT_EQ(check(MCL_NATIVE_FN_PAD, pd), MCL_NATIVE_ERR_BAD_ARGS);

  mcl_scale_shift_args s{};
  s.input = tile(0, 2, 2, 3);
  s.output = tile(0, 2, 2, 3); // in place is allowed
  s.params_offset = kSpm - 24;
  EXPECT_EQ(check(MCL_NATIVE_FN_SCALE_SHIFT, s), MCL_NATIVE_OK);
  s.params_offset = kSpm - 20;
  EXPECT_EQ(check(MCL_NATIVE_FN_SCALE_SHIFT, s), MCL_NATIVE_ERR_OUT_OF_RANGE);

  mcl_matmul_args mm{};
  mm.a = tile(0, 1, 4, 5);
  mm.b = tile(256, 1, 5, 6);
  mm.output = tile(512, 1, 4, 6);
  EXPECT_EQ(check(MCL_NATIVE_FN_MATMUL, mm), MCL_NATIVE_OK);
  mm.b.w = 4;
  EXPECT_EQ(check(MCL_NATIVE_FN_MATMUL, mm), MCL_NATIVE_ERR_BAD_ARGS);

  mcl_gemm_args g{};
  g.input = tile(0, 1, 4, 5);
  g.output = tile(256, 1, 4, 6);
  g.params_offset = 1024;
  EXPECT_EQ(check(MCL_NATIVE_FN_GEMM, g), MCL_NATIVE_OK);
  g.flags = MCL_CONV_WEIGHT_ZERO_POINTS; // INT8 only
  EXPECT_EQ(check(MCL_NATIVE_FN_GEMM, g), MCL_NATIVE_ERR_BAD_ARGS);
  g.input.dtype = g.output.dtype = MCL_DTYPE_U8;
  g.output_max = 255;
  EXPECT_EQ(check(MCL_NATIVE_FN_GEMM, g), MCL_NATIVE_OK);
  g.flags = 0x10;
  EXPECT_EQ(check(MCL_NATIVE_FN_GEMM, g), MCL_NATIVE_ERR_BAD_ARGS);
  g.flags = 0;
  g.input.dtype = g.output.dtype = MCL_DTYPE_F32;
  g.output_max = 0;
  g.output.w = 3;
  EXPECT_EQ(check(MCL_NATIVE_FN_GEMM, g), MCL_NATIVE_ERR_BAD_ARGS);
}

// Valid blocks of every function, the seeds of the mutation test.
std::vector<std::pair<uint32_t, std::vector<uint8_t>>> seed_blocks() {
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> out;
  auto add = [&](uint32_t fn, const auto &block) {
    const uint8_t *p = reinterpret_cast<const uint8_t *>(&block);
    out.push_back({fn, std::vector<uint8_t>(p, p + sizeof block)});
  };
  mcl_conv_args c{};
  c.input = tile(0, 6, 6, 4);
  c.output = tile(1024, 6, 6, 8);
  c.groups = 1;
  c.kernel_h = c.kernel_w = 3;
  c.stride_h = c.stride_w = c.dilation_h = c.dilation_w = 1;
  c.origin_y = c.origin_x = -1;
  c.table_offset = 4096;
  c.pad_row_offset = 4096 + 6 * 6 * 9 * 4;
  c.params_offset = 8192;
  add(MCL_NATIVE_FN_CONV2D, c);
  add(MCL_NATIVE_FN_CONV_TRANSPOSE2D, c);
  mcl_conv_args dw = c;
  dw.output.c = dw.groups = 4;
  dw.input.dtype = dw.output.dtype = MCL_DTYPE_U8;
  dw.output_min = 0, dw.output_max = 255;
  add(MCL_NATIVE_FN_CONV2D, dw);
  mcl_gemm_args g{};
  g.input = tile(0, 1, 4, 5);
  g.output = tile(256, 1, 4, 6);
  g.params_offset = 1024;
  add(MCL_NATIVE_FN_GEMM, g);
  mcl_matmul_args mm{};
  mm.a = tile(0, 1, 4, 5);
  mm.b = tile(256, 1, 5, 6);
  mm.output = tile(512, 1, 4, 6);
  add(MCL_NATIVE_FN_MATMUL, mm);
  mcl_pool_args p{};
  p.input = tile(0, 4, 4, 8);
  p.output = tile(1024, 2, 2, 8);
  p.kernel_h = p.kernel_w = p.stride_h = p.stride_w = p.dilation_h = p.dilation_w = 2;
  p.in_quant = p.out_quant = {1.0f, 0};
  add(MCL_NATIVE_FN_POOL2D, p);
  mcl_eltwise_args e{};
  e.a = tile(0, 2, 3, 4);
  e.b = tile(0, 2, 3, 4);
  e.output = tile(512, 2, 3, 4);
  e.a_quant = e.b_quant = e.out_quant = {1.0f, 0};
  add(MCL_NATIVE_FN_ELTWISE, e);
  mcl_scale_shift_args s{};
  s.input = tile(0, 2, 2, 3);
  s.output = tile(0, 2, 2, 3);
  s.params_offset = 512;
  s.in_quant = s.out_quant = {1.0f, 0};
  add(MCL_NATIVE_FN_SCALE_SHIFT, s);
  mcl_unary_args u{};
  u.input = tile(0, 2, 2, 3);
  u.output = tile(256, 2, 2, 3);
  u.in_quant = u.out_quant = {1.0f, 0};
  add(MCL_NATIVE_FN_ACTIVATION, u);
  add(MCL_NATIVE_FN_SOFTMAX, u);
  add(MCL_NATIVE_FN_COPY, u);
  mcl_resize_args r{};
  r.input = tile(0, 2, 2, 3);
  r.output = tile(256, 4, 4, 3);
  r.scale_h = r.scale_w = 2.0f;
  r.full_in_h = r.full_in_w = 2, r.full_out_h = r.full_out_w = 4;
  r.in_quant = r.out_quant = {1.0f, 0};
  add(MCL_NATIVE_FN_RESIZE, r);
  mcl_pad_args pd{};
  pd.input = tile(0, 2, 2, 3);
  pd.output = tile(256, 4, 4, 3);
  pd.quant = {1.0f, 0};
  add(MCL_NATIVE_FN_PAD, pd);
  return out;
}

// Mutated blocks: the validator must never crash, and whatever it accepts must run inside
// the SPM (ASan / UBSan builds turn any violation into a failure).
TEST(NativeValidator, SurvivesGarbageAndRunsWhatItAccepts) {
  std::mt19937 rng(2024);
  Spm spm(1u << 16, 2);
  spm.exec().flags = MCL_NATIVE_EXEC_CHECKED;
  const auto seeds = seed_blocks();
  for (const auto &[fn, block] : seeds)
    ASSERT_EQ(mcl_native_validate(fn, block.data(), block.size(), spm.size(), nullptr, 0), MCL_NATIVE_OK)
        << mcl_native_fn_name(fn);
  uint32_t accepted = 0, rejected = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    const auto &[fn, seed] = seeds[iter % seeds.size()];
    std::vector<uint8_t> block = seed;
    const int mutations = 1 + (int)(rng() % 3);
    for (int m = 0; m < mutations; ++m) {
      const size_t at = rng() % block.size() / 4 * 4;
      uint32_t v;
      switch (rng() % 4) {
      case 0: v = rng(); break;                           // garbage word
      case 1: v = rng() % 8; break;                       // small value
      case 2: v = 1u << (rng() % 32); break;              // power of two
      default: std::memcpy(&v, &block[at], 4); v ^= 1u << (rng() % 32); // bit flip
      }
      std::memcpy(&block[at], &v, 4);
    }
    // Pure garbage now and then, of any size.
    uint32_t run_fn = fn;
    if (iter % 97 == 0) {
      block.resize(rng() % 200);
      for (auto &b : block)
        b = (uint8_t)rng();
      run_fn = rng() % 20;
    }
    char msg[64];
    const int rc = mcl_native_validate(run_fn, block.data(), block.size(), spm.size(), msg, sizeof msg);
    ASSERT_LE(rc, 0);
    if (rc != MCL_NATIVE_OK) {
      ++rejected;
      continue;
    }
    ++accepted;
    if (mcl_native_cost(run_fn, block.data(), 1) > 100000)
      continue;
    const int run_rc = mcl_native_run(&spm.exec(), run_fn, block.data(), block.size(), msg, sizeof msg);
    ASSERT_TRUE(run_rc == MCL_NATIVE_OK || run_rc == MCL_NATIVE_ERR_BAD_TABLE) << run_rc << " " << msg;
  }
  EXPECT_GT(accepted, 1000u);
  EXPECT_GT(rejected, 1000u);
}

} // namespace
