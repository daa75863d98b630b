// Pooling, element-wise, scale/shift, activations, softmax, resize, copy/convert, pad,
// MatMul and the host execution context, against straightforward references.
#include "native_test_util.h"

#include <atomic>
#include <bit>
#include <set>

using namespace native_test;

namespace {

const uint32_t kAllTypes[] = {MCL_DTYPE_F32, MCL_DTYPE_F16, MCL_DTYPE_U8, MCL_DTYPE_S8};
bool is_q(uint32_t d) {
  return d == MCL_DTYPE_U8 || d == MCL_DTYPE_S8;
}
int32_t lo_of(uint32_t d) {
  return d == MCL_DTYPE_U8 ? 0 : -128;
}
int32_t hi_of(uint32_t d) {
  return d == MCL_DTYPE_U8 ? 255 : 127;
}

// Test-side quantization, written from the ONNX definitions.
int32_t quant_ref(float v, mcl_quant q, uint32_t d) {
  const float r = v / q.scale;
  if (std::isnan(r))
    return lo_of(d);
  // Saturating: infinities and huge values clamp (an out-of-range cast would be undefined).
  const double rounded = std::clamp(std::nearbyint((double)r), -1e9, 1e9);
  return clampi((int64_t)rounded + q.zero_point, lo_of(d), hi_of(d));
}
float deq_ref(double q, mcl_quant p) {
  return (float)((int32_t)q - p.zero_point) * p.scale;
}

// Random values of a dtype: floats in [-2, 2], integers over the whole range.
double random_value(std::mt19937 &rng, uint32_t d) {
  if (is_q(d))
    return std::uniform_int_distribution<int32_t>(lo_of(d), hi_of(d))(rng);
  const float f = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  return d == MCL_DTYPE_F16 ? h2f(f2h(f)) : f;
}

void fill_random(Spm &spm, const mcl_tile &t, std::mt19937 &rng) {
  for (uint32_t y = 0; y < t.h; ++y)
    for (uint32_t x = 0; x < t.w; ++x)
      for (uint32_t c = 0; c < t.c; ++c)
        set(spm, t, y, x, c, random_value(rng, t.dtype));
}

double to_real(double v, uint32_t d, mcl_quant q) {
  return is_q(d) ? deq_ref(v, q) : v;
}

// Compares an output element with a real-valued reference.
void expect_value(double got, double want, uint32_t d, mcl_quant q, double rel, const char *what) {
  if (is_q(d)) {
    EXPECT_NEAR(got, quant_ref((float)want, q, d), 1.0) << what;
  } else {
    const double tol =
        d == MCL_DTYPE_F16 ? 1e-3 * std::fabs(want) + 1e-3 : rel * std::fabs(want) + 1e-6;
    EXPECT_NEAR(got, want, tol) << what;
  }
}

TEST(NativePool, MaxAndAverageAllTypesAllPaddings) {
  std::mt19937 rng(11);
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  for (int iter = 0; iter < 80; ++iter) {
    Spm spm;
    const uint32_t d = kAllTypes[iter % 4];
    const uint32_t H = pick(1, 12), W = pick(1, 12), C = pick(1, 19);
    mcl_pool_args a{};
    a.kind = (iter / 4) % 2 ? MCL_POOL_AVG : MCL_POOL_MAX;
    a.kernel_h = (uint16_t)pick(1, 4), a.kernel_w = (uint16_t)pick(1, 4);
    a.stride_h = (uint16_t)pick(1, 3), a.stride_w = (uint16_t)pick(1, 3);
    a.dilation_h = (uint16_t)pick(1, 2), a.dilation_w = (uint16_t)pick(1, 2);
    const uint32_t pt = pick(0, a.kernel_h - 1), pl = pick(0, a.kernel_w - 1);
    const uint32_t pb = pick(0, a.kernel_h - 1), pr = pick(0, a.kernel_w - 1);
    const uint32_t ekh = (a.kernel_h - 1) * a.dilation_h + 1,
                   ekw = (a.kernel_w - 1) * a.dilation_w + 1;
    const uint32_t Hp = std::max(H + pt + pb, ekh), Wp = std::max(W + pl + pr, ekw);
    const uint32_t OH = (Hp - ekh) / a.stride_h + 1, OW = (Wp - ekw) / a.stride_w + 1;
    a.input = place_tile(spm, H, W, C, d, 1, 2, is_q(d) ? 0x11 : 0xff);
    a.output = place_tile(spm, OH, OW, C, d, 0, 1, 0);
    fill_random(spm, a.input, rng);
    a.origin_y = -(int32_t)pt;
    a.origin_x = -(int32_t)pl;
    const bool include_pad = iter % 3 == 0;
    a.count_y0 = include_pad ? -(int32_t)pt : 0;
    a.count_x0 = include_pad ? -(int32_t)pl : 0;
    a.count_y1 = (int32_t)(include_pad ? H + pb : H);
    a.count_x1 = (int32_t)(include_pad ? W + pr : W);
    a.in_quant = {0.05f, is_q(d) ? (int32_t)pick(0, 20) : 0};
    a.out_quant =
        a.kind == MCL_POOL_MAX ? a.in_quant : mcl_quant{0.04f, is_q(d) ? (int32_t)pick(0, 9) : 0};
    SCOPED_TRACE("pool iter " + std::to_string(iter));
    spm.run(MCL_NATIVE_FN_POOL2D, a);
    for (uint32_t oy = 0; oy < OH; ++oy)
      for (uint32_t ox = 0; ox < OW; ++ox)
        for (uint32_t c = 0; c < C; ++c) {
          double mx = -INFINITY, sum = 0;
          int64_t isum = 0;
          uint32_t inside = 0, counted = 0;
          for (uint32_t ky = 0; ky < a.kernel_h; ++ky)
            for (uint32_t kx = 0; kx < a.kernel_w; ++kx) {
              const int64_t iy = a.origin_y + (int64_t)oy * a.stride_h + ky * a.dilation_h;
              const int64_t ix = a.origin_x + (int64_t)ox * a.stride_w + kx * a.dilation_w;
              if (iy >= a.count_y0 && iy < a.count_y1 && ix >= a.count_x0 && ix < a.count_x1)
                ++counted;
              if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                continue;
              ++inside;
              const double v = get(spm, a.input, (uint32_t)iy, (uint32_t)ix, c);
              mx = std::max(mx, v);
              sum += v;
              isum += (int64_t)v - a.in_quant.zero_point;
            }
          const double got = get(spm, a.output, oy, ox, c);
          if (a.kind == MCL_POOL_MAX) {
            EXPECT_EQ(got, inside ? mx : (is_q(d) ? a.out_quant.zero_point : 0.0))
                << oy << "," << ox << "," << c;
          } else if (is_q(d)) {
            const float v = (float)isum * a.in_quant.scale / (float)std::max(counted, 1u);
            EXPECT_EQ(got, quant_ref(v, a.out_quant, d)) << oy << "," << ox << "," << c;
          } else {
            expect_value(got, sum / std::max(counted, 1u), d, a.out_quant, 1e-5, "avg");
          }
        }
  }
}

TEST(NativePool, FloatPixelKernelsEveryIsa) {
  // FP32 and FP16 max and average pooling (the ISA's per-pixel kernels: 16 channels in
  // registers, scalar tails): the max of the window's pixels with NaN inputs ignored and -0
  // kept before +0 as std::max does, the average as the float sum in pixel order over the
  // counted window, FP16 rounded once to nearest even; exact on every ISA, global windows
  // included.
  IsaGuard guard;
  std::mt19937 rng(4141);
  for (const std::string &isa : available_isas()) {
    ASSERT_EQ(mcl_native_set_isa(isa.c_str()), MCL_NATIVE_OK);
    for (int iter = 0; iter < 48; ++iter) {
      Spm spm;
      const uint32_t dtype = iter % 4 < 2 ? MCL_DTYPE_F32 : MCL_DTYPE_F16;
      const bool is_max = iter % 2 == 0, global = iter % 6 == 5;
      const uint32_t C = 1 + (iter * 7) % 41, H = global ? 13 : 5, W = global ? 11 : 6;
      const uint32_t OH = global ? 1 : 3, OW = global ? 1 : 3;
      mcl_pool_args a{};
      a.kind = is_max ? MCL_POOL_MAX : MCL_POOL_AVG;
      a.kernel_h = global ? H : 3, a.kernel_w = global ? W : 3;
      a.stride_h = a.stride_w = global ? 1 : 2;
      a.dilation_h = a.dilation_w = 1;
      a.origin_y = a.origin_x = global ? 0 : -1;
      a.input = place_tile(spm, H, W, C, dtype, 1, 1, 0);
      a.output = place_tile(spm, OH, OW, C, dtype, 0, 0, 0);
      fill_random(spm, a.input, rng);
      if (is_max)
        for (uint32_t c = 0; c < C; c += 3) {
          set(spm, a.input, 1, 1, c, NAN);
          set(spm, a.input, 0, 0, c, -0.0);
        }
      a.count_y1 = (int32_t)H, a.count_x1 = (int32_t)W;
      SCOPED_TRACE(isa + (dtype == MCL_DTYPE_F16 ? " f16" : " f32") + " pool iter " +
                   std::to_string(iter));
      spm.run(MCL_NATIVE_FN_POOL2D, a);
      for (uint32_t oy = 0; oy < OH; ++oy)
        for (uint32_t ox = 0; ox < OW; ++ox)
          for (uint32_t c = 0; c < C; ++c) {
            float mx = -INFINITY, sum = 0.0f;
            uint32_t counted = 0;
            for (uint32_t ky = 0; ky < a.kernel_h; ++ky)
              for (uint32_t kx = 0; kx < a.kernel_w; ++kx) {
                const int64_t iy = a.origin_y + (int64_t)oy * a.stride_h + ky;
                const int64_t ix = a.origin_x + (int64_t)ox * a.stride_w + kx;
                if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                  continue;
                ++counted;
                const float v = (float)get(spm, a.input, (uint32_t)iy, (uint32_t)ix, c);
                mx = std::max(mx, v);
                sum += v;
              }
            const float want = is_max ? mx : sum / (float)std::max(counted, 1u);
            const uint8_t *out = tile_elem(spm, a.output, oy, ox, c);
            if (dtype == MCL_DTYPE_F16) {
              uint16_t got;
              std::memcpy(&got, out, 2);
              ASSERT_EQ(got, f2h(want))
                  << oy << "," << ox << "," << c << ": " << h2f(got) << " vs " << want;
            } else {
              float got;
              std::memcpy(&got, out, 4);
              ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                  << oy << "," << ox << "," << c << ": " << got << " vs " << want;
            }
          }
    }
  }
}

TEST(NativePool, MaxRowKernelsEveryIsa) {
  // Binary16 max pooling (the ISA's row kernel: 16 and 8 lanes, scalar tails; NaN inputs
  // ignored, -0 kept before +0 as std::max does) and INT8 max pooling on raw bytes: the
  // exact values on every ISA.
  IsaGuard guard;
  std::mt19937 rng(4040);
  for (const std::string &isa : available_isas()) {
    ASSERT_EQ(mcl_native_set_isa(isa.c_str()), MCL_NATIVE_OK);
    for (int iter = 0; iter < 24; ++iter) {
      Spm spm;
      const uint32_t d = iter % 3 == 0   ? MCL_DTYPE_F16
                         : iter % 3 == 1 ? MCL_DTYPE_S8
                                         : MCL_DTYPE_U8;
      const uint32_t C = 1 + (iter * 7) % 41, H = 5, W = 6;
      mcl_pool_args a{};
      a.kind = MCL_POOL_MAX;
      a.kernel_h = a.kernel_w = 3;
      a.stride_h = a.stride_w = 2;
      a.dilation_h = a.dilation_w = 1;
      a.origin_y = a.origin_x = -1;
      a.input = place_tile(spm, H, W, C, d, 1, 1, 0);
      a.output = place_tile(spm, 3, 3, C, d, 0, 0, 0);
      fill_random(spm, a.input, rng);
      if (d == MCL_DTYPE_F16)
        for (uint32_t c = 0; c < C; c += 3) {
          *reinterpret_cast<uint16_t *>(tile_elem(spm, a.input, 1, 1, c)) = 0x7e00; // NaN
          *reinterpret_cast<uint16_t *>(tile_elem(spm, a.input, 0, 0, c)) = 0x8000; // -0
        }
      a.count_y1 = (int32_t)H, a.count_x1 = (int32_t)W;
      a.in_quant = a.out_quant = {0.05f, d == MCL_DTYPE_U8 ? 7 : d == MCL_DTYPE_S8 ? -3 : 0};
      SCOPED_TRACE(isa + " max pool iter " + std::to_string(iter));
      spm.run(MCL_NATIVE_FN_POOL2D, a);
      for (uint32_t oy = 0; oy < 3; ++oy)
        for (uint32_t ox = 0; ox < 3; ++ox)
          for (uint32_t c = 0; c < C; ++c) {
            float mx = -INFINITY;
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int64_t iy = -1 + 2 * (int64_t)oy + ky, ix = -1 + 2 * (int64_t)ox + kx;
                if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                  continue;
                mx = std::max(mx, (float)get(spm, a.input, (uint32_t)iy, (uint32_t)ix, c));
              }
            const double got = get(spm, a.output, oy, ox, c);
            if (d == MCL_DTYPE_F16)
              ASSERT_EQ(f2h((float)got), f2h(mx)) << oy << "," << ox << "," << c;
            else
              ASSERT_EQ(got, (double)mx) << oy << "," << ox << "," << c;
          }
    }
  }
}

TEST(NativePool, Float32BitsAsTheWindowOrderDefines) {
  // FP32 pooling over contiguous channels (register blocks of 16 and 4 channels, a scalar
  // tail): per channel, max is std::max(acc, x) from -inf over the window in order (NaN
  // inputs ignored, the first of -0 and +0 kept), average is the float sum in window order
  // divided by the count; padded windows and windows with no input pixel included.
  std::mt19937 rng(77);
  for (int iter = 0; iter < 48; ++iter) {
    Spm spm;
    const uint32_t C = 1 + (uint32_t)(iter * 5) % 45, H = 6, W = 7;
    mcl_pool_args a{};
    a.kind = iter % 2 ? MCL_POOL_AVG : MCL_POOL_MAX;
    a.kernel_h = 3, a.kernel_w = iter % 3 == 0 ? 2 : 3;
    a.stride_h = a.stride_w = 2;
    a.dilation_h = a.dilation_w = 1;
    a.origin_y = a.origin_x = iter % 4 == 3 ? -3 : -1; // -3: corner windows see no pixel
    a.input = place_tile(spm, H, W, C, MCL_DTYPE_F32, 1, iter % 5, 0);
    const uint32_t OH = 4, OW = 4;
    a.output = place_tile(spm, OH, OW, C, MCL_DTYPE_F32, 0, 0, 0xff);
    fill_random(spm, a.input, rng);
    for (uint32_t c = 0; c < C; c += 3) {
      set(spm, a.input, 1, 1, c, NAN);
      set(spm, a.input, 0, 0, c, -0.0);
      set(spm, a.input, 0, 1, c, 0.0);
    }
    a.count_y0 = a.count_x0 = iter % 3 == 1 ? a.origin_y : 0;
    a.count_y1 = (int32_t)H, a.count_x1 = (int32_t)W;
    SCOPED_TRACE("fp32 pool iter " + std::to_string(iter));
    spm.run(MCL_NATIVE_FN_POOL2D, a);
    for (uint32_t oy = 0; oy < OH; ++oy)
      for (uint32_t ox = 0; ox < OW; ++ox)
        for (uint32_t c = 0; c < C; ++c) {
          float mx = -INFINITY, sum = 0.0f;
          uint32_t inside = 0, counted = 0;
          for (int64_t ky = 0; ky < a.kernel_h; ++ky)
            for (int64_t kx = 0; kx < a.kernel_w; ++kx) {
              const int64_t iy = a.origin_y + 2 * (int64_t)oy + ky;
              const int64_t ix = a.origin_x + 2 * (int64_t)ox + kx;
              if (iy >= a.count_y0 && iy < a.count_y1 && ix >= a.count_x0 && ix < a.count_x1)
                ++counted;
              if (iy < 0 || ix < 0 || iy >= H || ix >= W)
                continue;
              ++inside;
              const float v = (float)get(spm, a.input, (uint32_t)iy, (uint32_t)ix, c);
              mx = std::max(mx, v);
              sum += v;
            }
          float want = 0.0f;
          if (inside)
            want = a.kind == MCL_POOL_MAX ? mx : sum / (float)std::max(counted, 1u);
          const float got = *reinterpret_cast<const float *>(tile_elem(spm, a.output, oy, ox, c));
          uint32_t got_bits, want_bits;
          std::memcpy(&got_bits, &got, 4);
          std::memcpy(&want_bits, &want, 4);
          ASSERT_EQ(got_bits, want_bits)
              << oy << "," << ox << "," << c << ": " << got << " vs " << want;
        }
  }
}

TEST(NativePool, GlobalAverage) {
  Spm spm;
  std::mt19937 rng(2);
  mcl_pool_args a{};
  a.input = place_tile(spm, 7, 9, 33, MCL_DTYPE_F32, 0, 0, 0);
  a.output = place_tile(spm, 1, 1, 33, MCL_DTYPE_F32, 0, 0, 0);
  fill_random(spm, a.input, rng);
  a.kind = MCL_POOL_AVG;
  a.kernel_h = 7, a.kernel_w = 9, a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  a.count_y1 = 7, a.count_x1 = 9;
  spm.run(MCL_NATIVE_FN_POOL2D, a);
  for (uint32_t c = 0; c < 33; ++c) {
    double s = 0;
    for (uint32_t y = 0; y < 7; ++y)
      for (uint32_t x = 0; x < 9; ++x)
        s += get(spm, a.input, y, x, c);
    EXPECT_NEAR(get(spm, a.output, 0, 0, c), s / 63, 1e-5);
  }
}

float binary_ref(uint32_t op, float x, float y) {
  switch (op) {
  case MCL_ELTWISE_ADD:
    return x + y;
  case MCL_ELTWISE_SUB:
    return x - y;
  case MCL_ELTWISE_MUL:
    return x * y;
  case MCL_ELTWISE_DIV:
    return x / y;
  case MCL_ELTWISE_MAX:
    return std::max(x, y);
  default:
    return std::min(x, y);
  }
}

double act_ref(const mcl_activation &a, double v) {
  switch (a.kind) {
  case MCL_ACT_RELU:
    return std::max(v, 0.0);
  case MCL_ACT_CLIP:
    return std::min(std::max(v, (double)a.alpha), (double)a.beta);
  case MCL_ACT_LEAKY_RELU:
    return v < 0 ? a.alpha * v : v;
  case MCL_ACT_SIGMOID:
    return 1.0 / (1.0 + std::exp(-v));
  case MCL_ACT_SILU:
    return v / (1.0 + std::exp(-v));
  case MCL_ACT_HARD_SIGMOID:
    return std::max(0.0, std::min(1.0, a.alpha * v + a.beta));
  case MCL_ACT_HARD_SWISH:
    return v * std::max(0.0, std::min(1.0, v / 6.0 + 0.5));
  case MCL_ACT_TANH:
    return std::tanh(v);
  case MCL_ACT_MISH:
    return v * std::tanh(std::log1p(std::exp(v)));
  default:
    return v;
  }
}

TEST(NativeEltwise, BroadcastingOpsAndTypes) {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 96; ++iter) {
    Spm spm;
    const uint32_t d = kAllTypes[iter % 4], op = (iter / 4) % MCL_ELTWISE_COUNT_;
    const uint32_t H = 1 + iter % 5, W = 2 + iter % 7, C = 1 + (iter * 7) % 23;
    mcl_eltwise_args a{};
    a.op = op;
    a.a = place_tile(spm, H, W, C, d, 1, 1, 0);
    a.output = place_tile(spm, H, W, C, d, 0, 0, 0);
    // b broadcast pattern: full, per channel, scalar, per row.
    const int pattern = (iter / 24) % 4;
    const uint32_t bh = pattern == 0 || pattern == 3 ? H : 1, bw = pattern == 0 ? W : 1;
    const uint32_t bc = pattern == 2 || pattern == 3 ? 1 : C;
    mcl_tile b = place_tile(spm, bh, bw, bc, d, 0, 0, 0);
    fill_random(spm, a.a, rng);
    fill_random(spm, b, rng);
    a.b = b;
    a.b.h = H, a.b.w = W, a.b.c = C;
    if (bh == 1)
      a.b.row_stride = 0;
    if (bw == 1)
      a.b.pixel_stride = 0;
    if (bc == 1)
      a.b.channel_stride = 0;
    if (op == MCL_ELTWISE_DIV && !is_q(d)) // keep divisors away from zero
      for (uint32_t y = 0; y < bh; ++y)
        for (uint32_t x = 0; x < bw; ++x)
          for (uint32_t c = 0; c < bc; ++c)
            set(spm, b, y, x, c, 0.5 + std::fabs(get(spm, b, y, x, c)));
    a.a_quant = {0.03f, is_q(d) ? 5 : 0};
    a.b_quant = {0.05f, is_q(d) ? -3 + (d == MCL_DTYPE_U8 ? 10 : 0) : 0};
    a.out_quant = {0.08f, is_q(d) ? 2 : 0};
    if (op == MCL_ELTWISE_DIV && is_q(d))
      a.b_quant.zero_point = lo_of(d); // divisors >= 0: avoid infinities in the test
    a.act = iter % 3 == 0 ? mcl_activation{MCL_ACT_RELU, 0, 0} : mcl_activation{};
    SCOPED_TRACE("eltwise iter " + std::to_string(iter));
    spm.run(MCL_NATIVE_FN_ELTWISE, a);
    for (uint32_t y = 0; y < H; ++y)
      for (uint32_t x = 0; x < W; ++x)
        for (uint32_t c = 0; c < C; ++c) {
          const double va = get(spm, a.a, y, x, c);
          const double vb = get(spm, b, bh == 1 ? 0 : y, bw == 1 ? 0 : x, bc == 1 ? 0 : c);
          const double got = get(spm, a.output, y, x, c);
          if (is_q(d)) {
            float r = binary_ref(op, deq_ref(va, a.a_quant), deq_ref(vb, a.b_quant));
            r = a.act.kind == MCL_ACT_RELU ? (r > 0.0f ? r : 0.0f) : r; // NaN -> 0 as documented
            ASSERT_EQ(got, quant_ref(r, a.out_quant, d)) << y << "," << x << "," << c;
          } else {
            const double want = act_ref(a.act, binary_ref(op, (float)va, (float)vb));
            expect_value(got, want, d, a.out_quant, 1e-6, "eltwise");
          }
        }
  }
}

TEST(NativeEltwise, Int8AddRowKernelsEveryIsa) {
  // The requantizing INT8 add row kernels (16 and 8 lanes, scalar tails) on dense and strided
  // rows of every length up to 70, in place (output = a) or not, with ReLU and Clip: the same
  // bytes as the reference on every ISA.
  IsaGuard guard;
  std::mt19937 rng(808);
  for (const std::string &isa : available_isas()) {
    ASSERT_EQ(mcl_native_set_isa(isa.c_str()), MCL_NATIVE_OK);
    for (int iter = 0; iter < 60; ++iter) {
      Spm spm;
      const uint32_t d = iter % 2 ? MCL_DTYPE_S8 : MCL_DTYPE_U8;
      const uint32_t H = 1 + iter % 3, W = 1 + (iter * 5) % 7, C = 1 + (iter * 11) % 37;
      const bool strided = iter % 4 == 3, in_place = iter % 5 == 2;
      mcl_eltwise_args a{};
      a.op = MCL_ELTWISE_ADD;
      a.a = place_tile(spm, H, W, C, d, strided ? 1 : 0, strided ? 2 : 0, 0);
      a.b = place_tile(spm, H, W, C, d, 0, 0, 0);
      a.output = in_place ? a.a : place_tile(spm, H, W, C, d, 0, 0, 0);
      fill_random(spm, a.a, rng);
      fill_random(spm, a.b, rng);
      std::vector<double> va, vb;
      for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x)
          for (uint32_t c = 0; c < C; ++c) {
            va.push_back(get(spm, a.a, y, x, c));
            vb.push_back(get(spm, a.b, y, x, c));
          }
      a.a_quant = {0.031f, d == MCL_DTYPE_U8 ? 120 : -7};
      a.b_quant = {0.047f, d == MCL_DTYPE_U8 ? 131 : 4};
      a.out_quant = {0.06f + 0.01f * (iter % 3), d == MCL_DTYPE_U8 ? 100 : 3};
      switch (iter % 3) {
      case 0:
        a.act = {};
        break;
      case 1:
        a.act = {MCL_ACT_RELU, 0, 0};
        break;
      default:
        a.act = {MCL_ACT_CLIP, -0.5f, 1.5f};
        break;
      }
      SCOPED_TRACE(isa + " int8 add iter " + std::to_string(iter));
      spm.run(MCL_NATIVE_FN_ELTWISE, a);
      size_t i = 0;
      for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x)
          for (uint32_t c = 0; c < C; ++c, ++i) {
            float r = deq_ref(va[i], a.a_quant) + deq_ref(vb[i], a.b_quant);
            if (a.act.kind == MCL_ACT_RELU)
              r = r > 0.0f ? r : 0.0f;
            else if (a.act.kind == MCL_ACT_CLIP)
              r = std::min(std::max(r, a.act.alpha), a.act.beta);
            ASSERT_EQ(get(spm, a.output, y, x, c), quant_ref(r, a.out_quant, d))
                << y << "," << x << "," << c;
          }
    }
  }
}

TEST(NativeScaleShift, FoldedBatchNorm) {
  std::mt19937 rng(9);
  for (uint32_t d : kAllTypes) {
    Spm spm;
    mcl_scale_shift_args a{};
    a.input = place_tile(spm, 5, 6, 21, d, 1, 3, 0);
    a.output = place_tile(spm, 5, 6, 21, d, 0, 0, 0);
    fill_random(spm, a.input, rng);
    a.params_offset = spm.alloc(21 * 8);
    float *p = spm.at<float>(a.params_offset);
    for (int i = 0; i < 42; ++i)
      p[i] = std::uniform_real_distribution<float>(-1.5f, 1.5f)(rng);
    a.act = {MCL_ACT_CLIP, -0.5f, 1.0f};
    a.in_quant = {0.02f, is_q(d) ? 1 : 0};
    a.out_quant = {0.01f, is_q(d) ? -2 + (d == MCL_DTYPE_U8 ? 60 : 0) : 0};
    spm.run(MCL_NATIVE_FN_SCALE_SHIFT, a);
    for (uint32_t y = 0; y < 5; ++y)
      for (uint32_t x = 0; x < 6; ++x)
        for (uint32_t c = 0; c < 21; ++c) {
          const double v = to_real(get(spm, a.input, y, x, c), d, a.in_quant) * p[c] + p[21 + c];
          expect_value(get(spm, a.output, y, x, c), act_ref(a.act, v), d, a.out_quant, 1e-5,
                       "scale_shift");
        }
  }
}

TEST(NativeActivation, EveryKindEveryType) {
  std::mt19937 rng(13);
  for (uint32_t kind = 0; kind < MCL_ACT_COUNT_; ++kind)
    for (uint32_t d : kAllTypes) {
      Spm spm;
      mcl_unary_args a{};
      a.input = place_tile(spm, 3, 4, 29, d, 0, 0, 0);
      a.output = place_tile(spm, 3, 4, 29, d, 1, 0, 0);
      fill_random(spm, a.input, rng);
      a.act = {kind,
               kind == MCL_ACT_CLIP         ? -0.7f
               : kind == MCL_ACT_LEAKY_RELU ? 0.1f
                                            : 0.2f,
               kind == MCL_ACT_CLIP ? 0.6f : 0.5f};
      a.in_quant = {0.015f, is_q(d) ? 3 : 0};
      a.out_quant = {kind % 2 ? 0.015f : 0.01f, is_q(d) ? (d == MCL_DTYPE_U8 ? 100 : 0) : 0};
      if (kind % 2 && is_q(d))
        a.out_quant.zero_point = 3; // the input's quantization: also run in place below
      SCOPED_TRACE("kind " + std::to_string(kind) + " dtype " + std::to_string(d));
      spm.run(MCL_NATIVE_FN_ACTIVATION, a);
      for (uint32_t y = 0; y < 3; ++y)
        for (uint32_t x = 0; x < 4; ++x)
          for (uint32_t c = 0; c < 29; ++c) {
            const double v = to_real(get(spm, a.input, y, x, c), d, a.in_quant);
            expect_value(get(spm, a.output, y, x, c), act_ref(a.act, v), d, a.out_quant, 2e-6,
                         "act");
          }
      // In place (the compiler's activation over its own input tile): the same values.
      if (is_q(d) && a.in_quant.scale == a.out_quant.scale) {
        mcl_unary_args b = a;
        b.output = b.input;
        std::vector<double> want;
        for (uint32_t y = 0; y < 3; ++y)
          for (uint32_t x = 0; x < 4; ++x)
            for (uint32_t c = 0; c < 29; ++c)
              want.push_back(get(spm, a.output, y, x, c));
        spm.run(MCL_NATIVE_FN_ACTIVATION, b);
        size_t i = 0;
        for (uint32_t y = 0; y < 3; ++y)
          for (uint32_t x = 0; x < 4; ++x)
            for (uint32_t c = 0; c < 29; ++c)
              ASSERT_EQ(get(spm, b.output, y, x, c), want[i++]) << "in place " << y << "," << x;
      }
    }
}

TEST(NativeSoftmax, ChannelAxis) {
  std::mt19937 rng(17);
  for (uint32_t d : {MCL_DTYPE_F32, MCL_DTYPE_F16}) {
    Spm spm;
    mcl_unary_args a{};
    a.input = place_tile(spm, 2, 3, 37, d, 0, 0, 0);
    a.output = place_tile(spm, 2, 3, 37, d, 0, 0, 0);
    fill_random(spm, a.input, rng);
    spm.run(MCL_NATIVE_FN_SOFTMAX, a);
    for (uint32_t y = 0; y < 2; ++y)
      for (uint32_t x = 0; x < 3; ++x) {
        double mx = -INFINITY, s = 0;
        for (uint32_t c = 0; c < 37; ++c)
          mx = std::max(mx, get(spm, a.input, y, x, c));
        for (uint32_t c = 0; c < 37; ++c)
          s += std::exp(get(spm, a.input, y, x, c) - mx);
        for (uint32_t c = 0; c < 37; ++c)
          expect_value(get(spm, a.output, y, x, c), std::exp(get(spm, a.input, y, x, c) - mx) / s,
                       d, {}, 1e-5, "softmax");
      }
  }
}

// ONNX Resize reference, one axis: source coordinate of output index o (float, like ORT).
float src_coord(uint32_t mode, float o, float scale, uint32_t in, uint32_t out) {
  if (mode == MCL_COORD_ASYMMETRIC)
    return o / scale;
  if (mode == MCL_COORD_ALIGN_CORNERS)
    return out == 1 ? 0.0f : o * (float)(in - 1) / (float)(out - 1);
  if (mode == MCL_COORD_PYTORCH_HALF_PIXEL)
    return out > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
  return (o + 0.5f) / scale - 0.5f;
}
int64_t nearest_ref(uint32_t mode, float x) {
  const double f = std::floor(x);
  const bool half = (double)x - f == 0.5;
  switch (mode) {
  case MCL_NEAREST_FLOOR:
    return (int64_t)f;
  case MCL_NEAREST_CEIL:
    return (int64_t)std::ceil(x);
  case MCL_NEAREST_ROUND_PREFER_CEIL:
    return half ? (int64_t)f + 1 : (int64_t)std::lround(x);
  default:
    return half ? (int64_t)f : (int64_t)std::lround(x);
  }
}

TEST(NativeResize, NearestAndBilinearTiled) {
  std::mt19937 rng(23);
  for (int iter = 0; iter < 48; ++iter) {
    Spm spm;
    const uint32_t d = kAllTypes[iter % 4];
    const uint32_t IH = 2 + iter % 5, IW = 3 + iter % 4, C = 1 + iter % 6;
    const float sh = iter % 3 == 0 ? 2.0f : 1.5f + 0.25f * (iter % 4),
                sw = iter % 2 ? 2.0f : 0.75f + 0.5f * (iter % 3);
    const uint32_t OH = (uint32_t)std::floor(IH * sh),
                   OW = std::max<uint32_t>(1, (uint32_t)std::floor(IW * sw));
    mcl_resize_args a{};
    a.mode = iter % 2 ? MCL_RESIZE_BILINEAR : MCL_RESIZE_NEAREST;
    a.coord_mode = (iter / 2) % 4;
    a.nearest_mode = (iter / 8) % 4;
    a.scale_h = sh, a.scale_w = sw;
    a.full_in_h = IH, a.full_in_w = IW, a.full_out_h = OH, a.full_out_w = OW;
    // Output tile: the lower rows of the image; input tile: the whole image.
    a.out_y0 = (int32_t)(OH / 3);
    a.input = place_tile(spm, IH, IW, C, d, 1, 1, 0);
    a.output = place_tile(spm, OH - a.out_y0, OW, C, d, 0, 0, 0);
    fill_random(spm, a.input, rng);
    a.in_quant = a.out_quant = {0.02f, is_q(d) ? 7 : 0};
    SCOPED_TRACE("resize iter " + std::to_string(iter));
    spm.run(MCL_NATIVE_FN_RESIZE, a);
    auto clampc = [](int64_t v, uint32_t n) {
      return (uint32_t)std::min<int64_t>(std::max<int64_t>(v, 0), n - 1);
    };
    for (uint32_t ty = 0; ty < a.output.h; ++ty)
      for (uint32_t ox = 0; ox < OW; ++ox) {
        const float y = src_coord(a.coord_mode, (float)(a.out_y0 + ty), sh, IH, OH);
        const float x = src_coord(a.coord_mode, (float)ox, sw, IW, OW);
        for (uint32_t c = 0; c < C; ++c) {
          const double got = get(spm, a.output, ty, ox, c);
          if (a.mode == MCL_RESIZE_NEAREST) {
            const double want = get(spm, a.input, clampc(nearest_ref(a.nearest_mode, y), IH),
                                    clampc(nearest_ref(a.nearest_mode, x), IW), c);
            ASSERT_EQ(got, want) << ty << "," << ox << "," << c;
          } else {
            const double cy = std::min<double>(std::max<double>(y, 0), IH - 1);
            const double cx = std::min<double>(std::max<double>(x, 0), IW - 1);
            const uint32_t y0 = (uint32_t)cy, x0 = (uint32_t)cx;
            const uint32_t y1 = std::min(y0 + 1, IH - 1), x1 = std::min(x0 + 1, IW - 1);
            const double wy = cy - y0, wx = cx - x0;
            auto r = [&](uint32_t yy, uint32_t xx) {
              return to_real(get(spm, a.input, yy, xx, c), d, a.in_quant);
            };
            const double want = (r(y0, x0) * (1 - wx) + r(y0, x1) * wx) * (1 - wy) +
                                (r(y1, x0) * (1 - wx) + r(y1, x1) * wx) * wy;
            expect_value(got, want, d, a.out_quant, 1e-5, "bilinear");
          }
        }
      }
  }
}

TEST(NativeCopy, ConcatSliceAndConversions) {
  std::mt19937 rng(29);
  for (uint32_t src : kAllTypes)
    for (uint32_t dst : kAllTypes) {
      Spm spm;
      // Slice a 4x5x7 box out of a 6x8x12 tensor into channels [3, 10) of a 4x5x16 tensor.
      mcl_tile big = place_tile(spm, 6, 8, 12, src, 0, 0, 0);
      fill_random(spm, big, rng);
      mcl_tile out_full = place_tile(spm, 4, 5, 16, dst, 0, 0, 0x33);
      mcl_unary_args a{};
      a.input = big;
      a.input.offset += (1 * big.row_stride + 2 * big.pixel_stride + 4) * esize(src);
      a.input.h = 4, a.input.w = 5, a.input.c = 7;
      a.output = out_full;
      a.output.offset += 3 * esize(dst);
      a.output.c = 7;
      a.in_quant = {0.05f, is_q(src) ? 4 : 0};
      a.out_quant = {0.03f, is_q(dst) ? -6 + (dst == MCL_DTYPE_U8 ? 70 : 0) : 0};
      SCOPED_TRACE("copy " + std::to_string(src) + "->" + std::to_string(dst));
      spm.run(MCL_NATIVE_FN_COPY, a);
      for (uint32_t y = 0; y < 4; ++y)
        for (uint32_t x = 0; x < 5; ++x)
          for (uint32_t c = 0; c < 16; ++c) {
            const double got = get(spm, out_full, y, x, c);
            if (c < 3 || c >= 10) { // neighbours untouched
              uint8_t raw = *tile_elem(spm, out_full, y, x, c);
              ASSERT_EQ(raw, 0x33);
              continue;
            }
            const double v = get(spm, big, y + 1, x + 2, c - 3 + 4);
            const double real = to_real(v, src, a.in_quant);
            if (is_q(dst))
              ASSERT_EQ(got, quant_ref((float)real, a.out_quant, dst));
            else if (dst == MCL_DTYPE_F16)
              ASSERT_EQ(got, h2f(f2h((float)real)));
            else
              ASSERT_EQ(got, (float)real);
          }
    }
}

TEST(NativeCopy, QuantizeRoundsHalfToEvenFromPlanarFloats) {
  // QuantizeLinear of a planar (NCHW) float input, as a quantized model's first copy: ties
  // round to even (2.5 -> 2, -2.5 -> -2, 3.5 -> 4), values saturate, NaN takes the low end,
  // for U8 and S8 and zero points that move the clamp.
  for (uint32_t dtype : {MCL_DTYPE_U8, MCL_DTYPE_S8}) {
    Spm spm;
    constexpr uint32_t H = 3, W = 401, C = 3;
    mcl_unary_args a{};
    a.input.offset = spm.alloc((uint64_t)C * H * W * 4);
    a.input.h = H, a.input.w = W, a.input.c = C;
    a.input.row_stride = W, a.input.pixel_stride = 1, a.input.channel_stride = H * W;
    a.input.dtype = MCL_DTYPE_F32;
    a.output = place_tile(spm, H, W, C, dtype, 0, 0, 0);
    a.in_quant = {1.0f, 0};
    a.out_quant = {0.25f, dtype == MCL_DTYPE_U8 ? 100 : -3};
    float *in = spm.at<float>(a.input.offset);
    for (uint32_t i = 0; i < C * H * W; ++i)
      in[i] = ((float)((int)i % 1203) - 601.0f) * 0.125f; // k * 0.5 steps of the scale: ties
    in[5] = NAN, in[6] = INFINITY, in[7] = -INFINITY, in[8] = 3e38f, in[9] = -0.0f;
    SCOPED_TRACE(dtype == MCL_DTYPE_U8 ? "u8" : "s8");
    spm.run(MCL_NATIVE_FN_COPY, a);
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t y = 0; y < H; ++y)
        for (uint32_t x = 0; x < W; ++x) {
          const float v = in[(size_t)c * H * W + y * W + x];
          ASSERT_EQ(get(spm, a.output, y, x, c), quant_ref(v, a.out_quant, dtype))
              << y << "," << x << "," << c << ": " << v;
        }
  }
}

TEST(NativeCopy, Fp16ConversionIsExactAndRoundsToNearestEven) {
  Spm spm;
  // Every binary16 pattern through F16 -> F32, then F32 -> F16 back.
  mcl_unary_args a{};
  a.input = place_tile(spm, 1, 1, 65536, MCL_DTYPE_F16, 0, 0, 0);
  a.output = place_tile(spm, 1, 1, 65536, MCL_DTYPE_F32, 0, 0, 0);
  for (uint32_t i = 0; i < 65536; ++i)
    spm.at<uint16_t>(a.input.offset)[i] = (uint16_t)i;
  spm.run(MCL_NATIVE_FN_COPY, a);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float f = spm.at<float>(a.output.offset)[i], want = h2f((uint16_t)i);
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(f)) << i;
    else
      ASSERT_EQ(f, want) << i;
  }
  // Random floats (incl. subnormal and overflow ranges) F32 -> F16.
  std::mt19937 rng(31);
  mcl_unary_args b{};
  b.input = place_tile(spm, 1, 1, 50000, MCL_DTYPE_F32, 0, 0, 0);
  b.output = place_tile(spm, 1, 1, 50000, MCL_DTYPE_F16, 0, 0, 0);
  for (uint32_t i = 0; i < 50000; ++i) {
    const float mag = std::ldexp(1.0f, std::uniform_int_distribution<int>(-26, 17)(rng));
    spm.at<float>(b.input.offset)[i] = std::uniform_real_distribution<float>(-mag, mag)(rng);
  }
  spm.at<float>(b.input.offset)[0] = 65519.0f; // just below the overflow threshold
  spm.at<float>(b.input.offset)[1] = 65520.0f; // rounds to infinity
  spm.run(MCL_NATIVE_FN_COPY, b);
  for (uint32_t i = 0; i < 50000; ++i)
    ASSERT_EQ(spm.at<uint16_t>(b.output.offset)[i], f2h(spm.at<float>(b.input.offset)[i])) << i;
}

TEST(NativeCopy, Fp16ConversionOfDenseImageRowsEveryIsa) {
  // A model's float input and output as binary16: three channels per pixel, pixels dense,
  // rows with a halo around them (converted a row at a time): every element as f2h / h2f, the
  // halo bytes untouched, on every ISA.
  IsaGuard guard;
  std::mt19937 rng(55);
  for (const std::string &isa : available_isas()) {
    ASSERT_EQ(mcl_native_set_isa(isa.c_str()), MCL_NATIVE_OK);
    SCOPED_TRACE(isa);
    Spm spm;
    const uint32_t H = 7, W = 37, C = 3;
    mcl_unary_args narrow{};
    narrow.input = place_tile(spm, H, W, C, MCL_DTYPE_F32, 1, 0, 0x5a);
    narrow.output = place_tile(spm, H, W, C, MCL_DTYPE_F16, 1, 0, 0xa5);
    for (uint32_t y = 0; y < H; ++y)
      for (uint32_t x = 0; x < W; ++x)
        for (uint32_t c = 0; c < C; ++c)
          set(spm, narrow.input, y, x, c, std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng));
    spm.run(MCL_NATIVE_FN_COPY, narrow);
    mcl_unary_args widen{};
    widen.input = narrow.output;
    widen.output = place_tile(spm, H, W, C, MCL_DTYPE_F32, 1, 0, 0x3c);
    spm.run(MCL_NATIVE_FN_COPY, widen);
    for (uint32_t y = 0; y < H; ++y)
      for (uint32_t x = 0; x < W; ++x)
        for (uint32_t c = 0; c < C; ++c) {
          const float in = *reinterpret_cast<const float *>(tile_elem(spm, narrow.input, y, x, c));
          const uint16_t half =
              *reinterpret_cast<const uint16_t *>(tile_elem(spm, narrow.output, y, x, c));
          ASSERT_EQ(half, f2h(in)) << y << "," << x << "," << c;
          ASSERT_EQ(*reinterpret_cast<const float *>(tile_elem(spm, widen.output, y, x, c)),
                    h2f(half))
              << y << "," << x << "," << c;
        }
    // The halo: the pixel before the first and after the last of each row.
    for (uint32_t y = 0; y < H; ++y) {
      const uint8_t *before = tile_elem(spm, narrow.output, y, 0, 0) - 2;
      const uint8_t *after = tile_elem(spm, narrow.output, y, W - 1, C - 1) + 2;
      EXPECT_EQ(before[0], 0xa5) << y;
      EXPECT_EQ(after[0], 0xa5) << y;
      const uint8_t *wide_after = tile_elem(spm, widen.output, y, W - 1, C - 1) + 4;
      EXPECT_EQ(wide_after[0], 0x3c) << y;
    }
  }
}

TEST(NativePad, ConstantBorderAndChannels) {
  for (uint32_t d : kAllTypes) {
    Spm spm;
    std::mt19937 rng(37);
    mcl_pad_args a{};
    a.input = place_tile(spm, 3, 4, 5, d, 0, 0, 0);
    a.output = place_tile(spm, 6, 6, 8, d, 0, 0, 0);
    fill_random(spm, a.input, rng);
    a.pad_top = 2, a.pad_left = 1, a.pad_channel = 2;
    a.value = 0.5f;
    a.quant = {0.1f, is_q(d) ? 3 : 0};
    spm.run(MCL_NATIVE_FN_PAD, a);
    const double fill = is_q(d) ? quant_ref(0.5f, a.quant, d) : 0.5;
    for (uint32_t y = 0; y < 6; ++y)
      for (uint32_t x = 0; x < 6; ++x)
        for (uint32_t c = 0; c < 8; ++c) {
          const bool inside = y >= 2 && y < 5 && x >= 1 && x < 5 && c >= 2 && c < 7;
          const double want = inside ? get(spm, a.input, y - 2, x - 1, c - 2) : fill;
          ASSERT_EQ(get(spm, a.output, y, x, c), want) << y << "," << x << "," << c;
        }
  }
}

TEST(NativeMatMul, BothOperandsInSpm) {
  std::mt19937 rng(41);
  for (uint32_t d : {MCL_DTYPE_F32, MCL_DTYPE_F16}) {
    Spm spm;
    const uint32_t M = 13, K = 19, N = 23;
    mcl_matmul_args a{};
    a.a = place_tile(spm, 1, M, K, d, 0, 2, 0);
    a.b = place_tile(spm, 1, K, N, d, 0, 1, 0);
    a.output = place_tile(spm, 1, M, N, d, 0, 0, 0);
    fill_random(spm, a.a, rng);
    fill_random(spm, a.b, rng);
    spm.run(MCL_NATIVE_FN_MATMUL, a);
    for (uint32_t m = 0; m < M; ++m)
      for (uint32_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (uint32_t k = 0; k < K; ++k) {
          const double t = get(spm, a.a, 0, m, k) * get(spm, a.b, 0, k, n);
          s += t;
          mag += std::fabs(t);
        }
        const double tol = d == MCL_DTYPE_F16 ? 2e-3 * mag + 1e-3 : 1e-5 * mag;
        ASSERT_NEAR(get(spm, a.output, 0, m, n), s, tol);
      }
  }
}

TEST(NativeHostExec, ParallelForRunsEveryTaskOnceAndCountsCycles) {
  mcl_native_host_pool *pool = mcl_native_host_pool_create(4);
  std::vector<uint8_t> mem(1024);
  mcl_native_exec exec;
  mcl_native_host_exec_init(&exec, pool, mem.data(), mem.size());
  EXPECT_EQ(exec.pe_count, 4u);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> hits(97);
    struct Ctx {
      std::vector<std::atomic<int>> *hits;
      std::atomic<uint32_t> max_pe{0};
    } ctx{&hits};
    exec.parallel_for(
        exec.user, 97,
        [](void *arg, uint32_t i, uint32_t pe) {
          auto *c = static_cast<Ctx *>(arg);
          (*c->hits)[i]++;
          uint32_t m = c->max_pe.load();
          while (pe > m && !c->max_pe.compare_exchange_weak(m, pe)) {
          }
        },
        &ctx);
    for (auto &h : hits)
      ASSERT_EQ(h.load(), 1);
    ASSERT_LT(ctx.max_pe.load(), 4u);
  }
  // A small copy reports the documented cost.
  mcl_unary_args a{};
  a.input = {0, 1, 1, 16, 16, 16, 1, MCL_DTYPE_F32};
  a.output = {256, 1, 1, 16, 16, 16, 1, MCL_DTYPE_F32};
  char msg[128];
  ASSERT_EQ(mcl_native_run(&exec, MCL_NATIVE_FN_COPY, &a, sizeof a, msg, sizeof msg), MCL_NATIVE_OK)
      << msg;
  EXPECT_EQ(mcl_native_host_pool_cycles(pool), mcl_native_cost(MCL_NATIVE_FN_COPY, &a, 4));
  mcl_native_host_pool_reset_cycles(pool);
  EXPECT_EQ(mcl_native_host_pool_cycles(pool), 0u);
  mcl_native_host_pool_destroy(pool);
}

} // namespace
