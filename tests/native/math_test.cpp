// MCL_NATIVE_FN_MATH: every function against its definition written out here (double
// precision, then rounded), FP32 and FP16, on strided tiles, with the validator's limits.
#include "native_test_util.h"

#include <cmath>

using namespace native_test;

namespace {

// The ONNX definition of each function, in double.
double reference(uint32_t op, double x, double alpha, double beta) {
  switch (op) {
  case MCL_MATH_ABS:
    return std::fabs(x);
  case MCL_MATH_NEG:
    return -x;
  case MCL_MATH_EXP:
    return std::exp(x);
  case MCL_MATH_LOG:
    return std::log(x);
  case MCL_MATH_SQRT:
    return std::sqrt(x);
  case MCL_MATH_RECIPROCAL:
    return 1.0 / x;
  case MCL_MATH_FLOOR:
    return std::floor(x);
  case MCL_MATH_CEIL:
    return std::ceil(x);
  case MCL_MATH_ROUND:
    return std::nearbyint(x);
  case MCL_MATH_SIGN:
    return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
  case MCL_MATH_SIN:
    return std::sin(x);
  case MCL_MATH_COS:
    return std::cos(x);
  case MCL_MATH_TAN:
    return std::tan(x);
  case MCL_MATH_ASIN:
    return std::asin(x);
  case MCL_MATH_ACOS:
    return std::acos(x);
  case MCL_MATH_ATAN:
    return std::atan(x);
  case MCL_MATH_SINH:
    return std::sinh(x);
  case MCL_MATH_COSH:
    return std::cosh(x);
  case MCL_MATH_ASINH:
    return std::asinh(x);
  case MCL_MATH_ACOSH:
    return std::acosh(x);
  case MCL_MATH_ATANH:
    return std::atanh(x);
  case MCL_MATH_ERF:
    return std::erf(x);
  case MCL_MATH_SOFTPLUS:
    return std::log(1.0 + std::exp(x));
  case MCL_MATH_SOFTSIGN:
    return x / (1.0 + std::fabs(x));
  case MCL_MATH_ELU:
    return x < 0 ? alpha * (std::exp(x) - 1.0) : x;
  case MCL_MATH_SELU:
    return beta * (x > 0 ? x : alpha * (std::exp(x) - 1.0));
  case MCL_MATH_CELU:
    return std::max(0.0, x) + std::min(0.0, alpha * (std::exp(x / alpha) - 1.0));
  case MCL_MATH_THRESHOLDED_RELU:
    return x > alpha ? x : 0.0;
  case MCL_MATH_SHRINK:
    return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0;
  default:
    return NAN;
  }
}

// Inputs inside each function's domain: (-0.9, 0.9) for asin/acos/atanh, (1.1, 3) for
// acosh, (0.1, 3) for log/sqrt, (-3, 3) otherwise, with halves for Round.
double input(uint32_t op, int i) {
  const double t = (i % 37) / 36.0; // 0..1
  switch (op) {
  case MCL_MATH_ASIN:
  case MCL_MATH_ACOS:
  case MCL_MATH_ATANH:
    return -0.9 + 1.8 * t;
  case MCL_MATH_ACOSH:
    return 1.1 + 1.9 * t;
  case MCL_MATH_LOG:
  case MCL_MATH_SQRT:
    return 0.1 + 2.9 * t;
  case MCL_MATH_ROUND:
    return -3.5 + 0.5 * (i % 15);
  default:
    return -3.0 + 6.0 * t;
  }
}

TEST(Math, EveryFunctionMatchesItsDefinitionOnStridedTiles) {
  for (uint32_t dtype : {MCL_DTYPE_F32, MCL_DTYPE_F16})
    for (uint32_t op = 0; op < MCL_MATH_COUNT_; ++op) {
      Spm spm;
      const uint32_t H = 3, W = 5, C = 7;
      mcl_math_args a{};
      a.input = place_tile(spm, H, W, C, dtype, 1, 2, 0); // halo and extra channels
      a.output = place_tile(spm, H, W, C, dtype, 0, 1, 0);
      a.op = op;
      a.alpha = op == MCL_MATH_SHRINK ? 0.5f : op == MCL_MATH_THRESHOLDED_RELU ? 1.0f : 1.5f;
      a.beta = op == MCL_MATH_SHRINK ? 0.25f : 1.05f;
      int i = 0;
      for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x)
          for (uint32_t c = 0; c < C; ++c)
            set(spm, a.input, y, x, c, input(op, i++));
      spm.run(MCL_NATIVE_FN_MATH, a);
      for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x)
          for (uint32_t c = 0; c < C; ++c) {
            const double in = get(spm, a.input, y, x, c); // as stored (FP16 rounded)
            const double want = reference(op, in, a.alpha, a.beta);
            const double tol = dtype == MCL_DTYPE_F16 ? 2e-3 * (1 + std::fabs(want))
                                                      : 2e-6 * (1 + std::fabs(want));
            if (std::isinf(want)) { // 1/0
              ASSERT_EQ(get(spm, a.output, y, x, c), want);
              continue;
            }
            ASSERT_NEAR(get(spm, a.output, y, x, c), want, tol)
                << "function " << op << " dtype " << dtype << " at " << y << "," << x << "," << c
                << " input " << in;
          }
    }
}

TEST(Math, ValidatorRefusesUnknownFunctionsMixedTypesAndInt8) {
  Spm spm;
  mcl_math_args a{};
  a.input = place_tile(spm, 2, 2, 4, MCL_DTYPE_F32, 0, 0, 0);
  a.output = place_tile(spm, 2, 2, 4, MCL_DTYPE_F32, 0, 0, 0);
  char msg[256];
  auto check = [&] {
    return mcl_native_validate(MCL_NATIVE_FN_MATH, &a, sizeof a, spm.size(), msg, sizeof msg);
  };
  EXPECT_EQ(check(), MCL_NATIVE_OK);
  a.op = MCL_MATH_COUNT_;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
  a.op = MCL_MATH_EXP;
  a.output.dtype = MCL_DTYPE_F16;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
  a.input.dtype = a.output.dtype = MCL_DTYPE_S8;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
  a.input.dtype = a.output.dtype = MCL_DTYPE_F32;
  a.reserved0 = 1;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
  a.reserved0 = 0;
  // Its cost grows with the elements and is charged for transcendental functions more.
  EXPECT_GT(mcl_native_cost(MCL_NATIVE_FN_MATH, &a, 16), 0u);
  mcl_math_args cheap = a;
  cheap.op = MCL_MATH_ABS;
  EXPECT_LE(mcl_native_cost(MCL_NATIVE_FN_MATH, &cheap, 16),
            mcl_native_cost(MCL_NATIVE_FN_MATH, &a, 16));
}

} // namespace

namespace {

// MCL_NATIVE_FN_REDUCE: a [4][3][5] tensor reduced over its first and last dimensions
// (strided: the tile's rows and pixels), each kept channel against the definition.
TEST(Reduce, EveryReductionOverTwoStridedDimensions) {
  for (uint32_t dtype : {MCL_DTYPE_F32, MCL_DTYPE_F16})
    for (uint32_t op = 0; op < MCL_REDUCE_COUNT_; ++op) {
      Spm spm;
      const uint32_t A = 4, B = 3, D = 5; // reduce over A and D, keep B
      mcl_reduce_args a{};
      a.input = place_tile(spm, A, B, D, dtype, 0, 0, 0); // [A][B][D] row-major
      std::vector<double> v(A * B * D);
      for (uint32_t i = 0; i < v.size(); ++i) {
        v[i] = 0.25 + 0.1 * double((i * 7) % 11); // positive: LOG_SUM and PROD defined
        set(spm, a.input, i / (B * D), (i / D) % B, i % D, v[i]);
        v[i] = get(spm, a.input, i / (B * D), (i / D) % B, i % D); // as stored
      }
      const mcl_tile x = a.input;
      a.input.h = A, a.input.w = D, a.input.c = B;
      a.input.row_stride = x.row_stride, a.input.pixel_stride = 1,
      a.input.channel_stride = x.pixel_stride;
      a.output = place_tile(spm, 1, 1, B, dtype, 0, 0, 0);
      a.op = op;
      spm.run(MCL_NATIVE_FN_REDUCE, a);
      for (uint32_t b = 0; b < B; ++b) {
        double sum = 0, mx = -INFINITY, mn = INFINITY, prod = 1, l1 = 0, sq = 0, se = 0;
        for (uint32_t i = 0; i < A; ++i)
          for (uint32_t d = 0; d < D; ++d) {
            const double e = v[(i * B + b) * D + d];
            sum += e, mx = std::max(mx, e), mn = std::min(mn, e), prod *= e;
            l1 += std::fabs(e), sq += e * e, se += std::exp(e);
          }
        const double want[] = {sum, sum / (A * D), mx,          mn, prod, l1, std::sqrt(sq),
                               sq,  std::log(sum), std::log(se)};
        const double tol = (dtype == MCL_DTYPE_F16 ? 2e-3 : 2e-6) * (1 + std::fabs(want[op]));
        EXPECT_NEAR(get(spm, a.output, 0, 0, b), want[op], tol)
            << "reduction " << op << " dtype " << dtype << " channel " << b;
      }
    }
}

TEST(Reduce, ValidatorRefusesAnOutputThatIsNotOnePixel) {
  Spm spm;
  mcl_reduce_args a{};
  a.input = place_tile(spm, 2, 3, 4, MCL_DTYPE_F32, 0, 0, 0);
  a.output = place_tile(spm, 1, 1, 4, MCL_DTYPE_F32, 0, 0, 0);
  char msg[256];
  auto check = [&] {
    return mcl_native_validate(MCL_NATIVE_FN_REDUCE, &a, sizeof a, spm.size(), msg, sizeof msg);
  };
  EXPECT_EQ(check(), MCL_NATIVE_OK);
  a.output.w = 2;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
  a.output.w = 1;
  a.op = MCL_REDUCE_COUNT_;
  EXPECT_EQ(check(), MCL_NATIVE_ERR_BAD_ARGS);
}

} // namespace
