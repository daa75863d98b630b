// Convolution / transposed convolution / GEMM against straightforward references on random
// shapes: odd sizes, strides, dilations, groups, depthwise, padding at every border, output
// tiles in the middle and at the corners of the image, halos around input tiles.
#include "native_test_util.h"

#include <algorithm>

using namespace native_test;

namespace {

struct ConvCase {
  bool transposed = false;
  uint32_t H, W, cin, cout, groups, kh, kw, sh, sw, dh, dw;
  uint32_t pt, pl, pb, pr;        // padding (transposed: ONNX pads)
  uint32_t OH, OW;                // full output size
  uint32_t oy0, ox0, oh, ow;      // output tile
  uint32_t dtype = MCL_DTYPE_F32; // input dtype
  uint32_t out_dtype = MCL_DTYPE_F32;
  bool per_channel = false;
  int32_t weight_zp_max = 3; // INT8 weight zero points in [-max, max] (per-channel: 0 unless wide)
  bool wide_weight_zps = false; // per-channel zero points too, and the block keeps them
  bool whole_input = false;     // the input tile is the whole image, not only what the taps read
  bool residual = false;        // MCL_CONV_RESIDUAL: a residual tile added before the activation
  bool winograd = false;        // MCL_CONV_WINOGRAD (3x3, stride 1, no stored table)
  bool dense_input = false;     // input pixels follow each other (no poison between pixels)
  mcl_activation act{};
  std::string describe() const {
    char b[256];
    std::snprintf(
        b, sizeof b,
        "%s H%u W%u cin%u cout%u g%u k%ux%u s%ux%u d%ux%u pad%u,%u,%u,%u tile(%u,%u %ux%u) "
        "dtype%u->%u act%u%s%s",
        transposed ? "convT" : "conv", H, W, cin, cout, groups, kh, kw, sh, sw, dh, dw, pt, pl, pb,
        pr, oy0, ox0, oh, ow, dtype, out_dtype, act.kind, residual ? " residual" : "",
        winograd ? " winograd" : "");
    return b;
  }
};

int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

ConvCase random_case(std::mt19937 &rng, bool transposed, bool depthwise) {
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  ConvCase c;
  c.transposed = transposed;
  c.kh = pick(1, 5);
  c.kw = pick(1, 5);
  c.sh = pick(1, 3);
  c.sw = pick(1, 3);
  c.dh = pick(1, 2);
  c.dw = pick(1, 2);
  c.H = pick(1, 13);
  c.W = pick(1, 13);
  if (depthwise) {
    c.groups = c.cin = c.cout = pick(2, 40);
  } else {
    c.groups = pick(1, 3);
    c.cin = c.groups * pick(1, 9);
    c.cout = c.groups * pick(1, 21);
  }
  c.pt = pick(0, c.kh - 1);
  c.pb = pick(0, c.kh - 1);
  c.pl = pick(0, c.kw - 1);
  c.pr = pick(0, c.kw - 1);
  if (!transposed) {
    // Make sure at least one output exists.
    const uint32_t ekh = (c.kh - 1) * c.dh + 1, ekw = (c.kw - 1) * c.dw + 1;
    if (c.H + c.pt + c.pb < ekh)
      c.H = ekh;
    if (c.W + c.pl + c.pr < ekw)
      c.W = ekw;
    c.OH = (c.H + c.pt + c.pb - ekh) / c.sh + 1;
    c.OW = (c.W + c.pl + c.pr - ekw) / c.sw + 1;
  } else {
    c.H = std::min<uint32_t>(c.H, 7);
    c.W = std::min<uint32_t>(c.W, 7);
    const int64_t oh = (int64_t)(c.H - 1) * c.sh - c.pt - c.pb + (c.kh - 1) * c.dh + 1;
    const int64_t ow = (int64_t)(c.W - 1) * c.sw - c.pl - c.pr + (c.kw - 1) * c.dw + 1;
    c.pt = oh < 1 ? 0 : c.pt;
    c.pb = oh < 1 ? 0 : c.pb;
    c.pl = ow < 1 ? 0 : c.pl;
    c.pr = ow < 1 ? 0 : c.pr;
    c.OH = (c.H - 1) * c.sh - c.pt - c.pb + (c.kh - 1) * c.dh + 1;
    c.OW = (c.W - 1) * c.sw - c.pl - c.pr + (c.kw - 1) * c.dw + 1;
  }
  // Output tile: whole image, a corner, or an interior box.
  switch (pick(0, 2)) {
  case 0:
    c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
    break;
  default:
    c.oy0 = pick(0, c.OH - 1);
    c.ox0 = pick(0, c.OW - 1);
    c.oh = pick(1, c.OH - c.oy0);
    c.ow = pick(1, c.OW - c.ox0);
  }
  return c;
}

// Runs one case; checks every output element against the reference.
enum class Table { Stored, None, Implicit };
// `outputs`, when given, receives the output tile's values in (y, x, channel) order, and
// `residuals` those of the residual tile (drawn from their own generator: the other data do
// not depend on c.residual).
void run_case(const ConvCase &c, uint32_t seed, uint32_t threads, Table table = Table::Stored,
              std::vector<double> *outputs = nullptr, std::vector<double> *residuals = nullptr) {
  SCOPED_TRACE(c.describe() + " isa=" + mcl_native_isa() + " threads=" + std::to_string(threads));
  std::mt19937 rng(seed);
  Spm spm(4u << 20, threads);
  const bool int8 = c.dtype == MCL_DTYPE_S8 || c.dtype == MCL_DTYPE_U8;
  const uint32_t cin_g = c.cin / c.groups, cout_g = c.cout / c.groups;
  const uint32_t taps = c.kh * c.kw;

  // Full input image, weights (ONNX layout), bias.
  std::vector<double> x((size_t)c.H * c.W * c.cin);
  std::vector<float> wf((size_t)c.cout * cin_g * taps);
  std::vector<uint16_t> wh(wf.size());
  std::vector<int8_t> w8(wf.size());
  std::vector<float> bias_f(c.cout);
  std::vector<int32_t> bias_i(c.cout);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int32_t xlo = c.dtype == MCL_DTYPE_U8 ? 0 : -128, xhi = c.dtype == MCL_DTYPE_U8 ? 255 : 127;
  std::uniform_int_distribution<int32_t> xq(xlo, xhi), wq(-128, 127), bq(-5000, 5000);
  for (auto &v : x)
    v = int8 ? (double)xq(rng) : c.dtype == MCL_DTYPE_F16 ? h2f(f2h(uni(rng))) : uni(rng);
  for (size_t i = 0; i < wf.size(); ++i) {
    wf[i] = uni(rng);
    wh[i] = f2h(wf[i]);
    w8[i] = (int8_t)wq(rng);
    if (c.dtype == MCL_DTYPE_F16)
      wf[i] = h2f(wh[i]);
  }
  for (uint32_t i = 0; i < c.cout; ++i) {
    bias_f[i] = uni(rng);
    bias_i[i] = bq(rng);
  }
  // Quantization.
  const uint32_t nscale = c.per_channel ? c.cout : 1;
  std::vector<float> wscale(nscale);
  std::vector<int32_t> wzp(nscale);
  for (uint32_t i = 0; i < nscale; ++i) {
    wscale[i] = 0.002f + 0.01f * (uni(rng) + 1.0f);
    wzp[i] = c.per_channel && !c.wide_weight_zps
                 ? 0
                 : std::uniform_int_distribution<int32_t>(-c.weight_zp_max, c.weight_zp_max)(rng);
  }
  const float xscale = 0.02f, yscale = 0.05f + 0.1f * (uni(rng) + 1.0f);
  const int32_t xzp = std::uniform_int_distribution<int32_t>(xlo, xhi)(rng) / 2;
  const int32_t ylo = c.out_dtype == MCL_DTYPE_U8 ? 0 : -128,
                yhi = c.out_dtype == MCL_DTYPE_U8 ? 255 : 127;
  const int32_t yzp = std::uniform_int_distribution<int32_t>(ylo, yhi)(rng) / 2;

  // Input tile: rows/cols of the image the output tile needs.
  int64_t iy0, iy1, ix0, ix1, origin_y, origin_x;
  if (!c.transposed) {
    iy0 = std::max<int64_t>(0, (int64_t)c.oy0 * c.sh - c.pt);
    iy1 = std::min<int64_t>(c.H, (int64_t)(c.oy0 + c.oh - 1) * c.sh - c.pt + (c.kh - 1) * c.dh + 1);
    ix0 = std::max<int64_t>(0, (int64_t)c.ox0 * c.sw - c.pl);
    ix1 = std::min<int64_t>(c.W, (int64_t)(c.ox0 + c.ow - 1) * c.sw - c.pl + (c.kw - 1) * c.dw + 1);
    if (iy1 <= iy0)
      iy0 = 0, iy1 = 1; // the whole tile reads padding
    if (ix1 <= ix0)
      ix0 = 0, ix1 = 1;
    if (c.whole_input)
      iy0 = 0, iy1 = c.H, ix0 = 0, ix1 = c.W;
    origin_y = (int64_t)c.oy0 * c.sh - c.pt - iy0;
    origin_x = (int64_t)c.ox0 * c.sw - c.pl - ix0;
  } else {
    iy0 = std::max<int64_t>(0, ceil_div((int64_t)c.oy0 + c.pt - (int64_t)(c.kh - 1) * c.dh, c.sh));
    iy1 = std::min<int64_t>(c.H, floor_div((int64_t)c.oy0 + c.oh - 1 + c.pt, c.sh) + 1);
    ix0 = std::max<int64_t>(0, ceil_div((int64_t)c.ox0 + c.pl - (int64_t)(c.kw - 1) * c.dw, c.sw));
    ix1 = std::min<int64_t>(c.W, floor_div((int64_t)c.ox0 + c.ow - 1 + c.pl, c.sw) + 1);
    if (iy1 <= iy0)
      iy0 = 0, iy1 = 1;
    if (ix1 <= ix0)
      ix0 = 0, ix1 = 1;
    if (c.whole_input)
      iy0 = 0, iy1 = c.H, ix0 = 0, ix1 = c.W;
    origin_y = (int64_t)c.oy0 + c.pt - iy0 * c.sh;
    origin_x = (int64_t)c.ox0 + c.pl - ix0 * c.sw;
  }
  // NaN (0xff bytes) around float tiles: any read outside the tile poisons the result.
  const uint8_t poison = int8 ? 0x5a : 0xff;
  mcl_conv_args a{};
  a.input = place_tile(spm, (uint32_t)(iy1 - iy0), (uint32_t)(ix1 - ix0), c.cin, c.dtype, 2,
                       c.dense_input ? 0 : 3, poison);
  a.output = place_tile(spm, c.oh, c.ow, c.cout, c.out_dtype, 1, 2, 0xee);
  for (uint32_t y = 0; y < a.input.h; ++y)
    for (uint32_t xx = 0; xx < a.input.w; ++xx)
      for (uint32_t ch = 0; ch < c.cin; ++ch)
        set(spm, a.input, y, xx, ch, x[((size_t)(iy0 + y) * c.W + ix0 + xx) * c.cin + ch]);
  a.groups = c.groups;
  a.kernel_h = (uint16_t)c.kh;
  a.kernel_w = (uint16_t)c.kw;
  a.stride_h = (uint16_t)c.sh;
  a.stride_w = (uint16_t)c.sw;
  a.dilation_h = (uint16_t)c.dh;
  a.dilation_w = (uint16_t)c.dw;
  a.origin_y = (int32_t)origin_y;
  a.origin_x = (int32_t)origin_x;
  a.act = c.act;
  a.input_zero_point = xzp;
  a.output_zero_point = yzp;
  a.output_min = ylo;
  a.output_max = yhi;
  if (int8 && c.act.kind == MCL_ACT_RELU) { // fused ReLU = clamp at the zero point
    a.output_min = yzp;
    a.act.kind = MCL_ACT_NONE;
  }
  const uint32_t fn = c.transposed ? MCL_NATIVE_FN_CONV_TRANSPOSE2D : MCL_NATIVE_FN_CONV2D;
  a.pad_row_offset = spm.alloc((uint64_t)c.cin * esize(c.dtype));
  if (table == Table::Stored) {
    const size_t entries = mcl_native_conv_table_size(&a);
    a.table_offset = spm.alloc(entries * 4);
    ASSERT_EQ(mcl_native_plan_conv(fn, &a, spm.at<int32_t>(a.table_offset), entries),
              MCL_NATIVE_OK);
  } else {
    a.flags = table == Table::None ? MCL_CONV_NO_TABLE : MCL_CONV_IMPLICIT_TABLE;
  }
  if (c.winograd)
    a.flags |= MCL_CONV_WINOGRAD;
  std::vector<double> res;
  if (c.residual) {
    ASSERT_FALSE(int8) << "the residual is a float epilogue";
    a.flags |= MCL_CONV_RESIDUAL;
    a.residual = place_tile(spm, c.oh, c.ow, c.cout, c.out_dtype, 1, 1, poison);
    std::mt19937 rrng(seed * 7919u + 17u);
    for (uint32_t y = 0; y < c.oh; ++y)
      for (uint32_t xx = 0; xx < c.ow; ++xx)
        for (uint32_t ch = 0; ch < c.cout; ++ch) {
          double v = 2.0 * uni(rrng);
          if (c.out_dtype == MCL_DTYPE_F16)
            v = h2f(f2h((float)v));
          set(spm, a.residual, y, xx, ch, v);
          res.push_back(v);
        }
    if (residuals)
      *residuals = res;
  }
  // Byte weights hold w - w_zero_point when it fits in int8; otherwise the block keeps the
  // zero points. Packing without them must refuse a value that does not fit.
  bool fits = true;
  for (size_t i = 0; int8 && i < w8.size(); ++i) {
    const size_t oc = c.transposed ? (i / taps) % cout_g + (i / (taps * cout_g * cin_g)) * cout_g
                                   : i / ((size_t)cin_g * taps);
    const int32_t d = w8[i] - wzp[c.per_channel ? oc : 0];
    fits &= d >= -128 && d <= 127;
  }
  mcl_weight_quant q{xscale, yscale, wscale.data(), wzp.data(), nscale};
  if (int8 && !fits && !c.wide_weight_zps) {
    std::vector<uint8_t> block(mcl_native_conv_params_size(fn, &a));
    EXPECT_EQ(
        mcl_native_pack_conv(fn, &a, w8.data(), bias_i.data(), &q, block.data(), block.size()),
        MCL_NATIVE_ERR_BAD_ARGS);
  }
  if (int8 && (!fits || c.wide_weight_zps))
    a.flags |= MCL_CONV_WEIGHT_ZERO_POINTS;
  const size_t psize = mcl_native_conv_params_size(fn, &a);
  a.params_offset = spm.alloc(psize);
  const void *weights = int8                       ? (const void *)w8.data()
                        : c.dtype == MCL_DTYPE_F16 ? (const void *)wh.data()
                                                   : (const void *)wf.data();
  const void *bias = int8 ? (const void *)bias_i.data() : (const void *)bias_f.data();
  ASSERT_EQ(mcl_native_pack_conv(fn, &a, weights, bias, int8 ? &q : nullptr,
                                 spm.base() + a.params_offset, psize),
            MCL_NATIVE_OK);
  spm.run(fn, a);

  // Reference on the full image, compared on the tile.
  auto wval = [&](uint32_t g, uint32_t co, uint32_t ci, uint32_t t) -> double {
    size_t idx = c.transposed ? (((size_t)g * cin_g + ci) * cout_g + co) * taps + t
                              : (((size_t)g * cout_g + co) * cin_g + ci) * taps + t;
    if (int8)
      return (double)w8[idx] - wzp[c.per_channel ? g * cout_g + co : 0];
    return wf[idx];
  };
  size_t bad = 0;
  for (uint32_t ty = 0; ty < c.oh; ++ty)
    for (uint32_t tx = 0; tx < c.ow; ++tx)
      for (uint32_t oc = 0; oc < c.cout; ++oc) {
        const uint32_t g = oc / cout_g, co = oc % cout_g;
        const int64_t oy = c.oy0 + ty, ox = c.ox0 + tx;
        double acc = 0.0, mag = 0.0;
        for (uint32_t ky = 0; ky < c.kh; ++ky)
          for (uint32_t kx = 0; kx < c.kw; ++kx) {
            int64_t iy, ix;
            if (!c.transposed) {
              iy = oy * c.sh - c.pt + (int64_t)ky * c.dh;
              ix = ox * c.sw - c.pl + (int64_t)kx * c.dw;
            } else {
              const int64_t ny = oy + c.pt - (int64_t)ky * c.dh,
                            nx = ox + c.pl - (int64_t)kx * c.dw;
              if (ny < 0 || nx < 0 || ny % c.sh || nx % c.sw)
                continue;
              iy = ny / c.sh;
              ix = nx / c.sw;
            }
            if (iy < 0 || ix < 0 || iy >= c.H || ix >= c.W)
              continue;
            for (uint32_t ci = 0; ci < cin_g; ++ci) {
              double xv = x[((size_t)iy * c.W + ix) * c.cin + g * cin_g + ci];
              if (int8)
                xv -= xzp;
              const double term = xv * wval(g, co, ci, ky * c.kw + kx);
              acc += term;
              mag += std::fabs(term);
            }
          }
        const double got = get(spm, a.output, ty, tx, oc);
        if (outputs)
          outputs->push_back(got);
        if (int8) {
          const float m = xscale * wscale[c.per_channel ? oc : 0] / yscale;
          const int32_t want =
              requant_ref((int32_t)acc + bias_i[oc], m, yzp, a.output_min, a.output_max);
          if ((int32_t)got != want && bad++ < 5)
            ADD_FAILURE() << "at " << ty << "," << tx << "," << oc << " got " << got << " want "
                          << want;
        } else {
          acc += bias_f[oc];
          mag += std::fabs(bias_f[oc]);
          if (c.residual) {
            const double r = res[((size_t)ty * c.ow + tx) * c.cout + oc];
            acc += r;
            mag += std::fabs(r);
          }
          double want = acc;
          if (c.act.kind != MCL_ACT_NONE) {
            // Reference activations in double.
            const double v = acc;
            switch (c.act.kind) {
            case MCL_ACT_RELU:
              want = std::max(v, 0.0);
              break;
            case MCL_ACT_CLIP:
              want = std::min(std::max(v, (double)c.act.alpha), (double)c.act.beta);
              break;
            case MCL_ACT_SILU:
              want = v / (1.0 + std::exp(-v));
              break;
            case MCL_ACT_HARD_SWISH:
              want = v * std::min(1.0, std::max(0.0, v / 6.0 + 0.5));
              break;
            case MCL_ACT_LEAKY_RELU:
              want = v < 0.0 ? c.act.alpha * v : v;
              break;
            default:
              break;
            }
          }
          // Winograd's transforms scale the terms by up to about 100 before the products are
          // summed: its FP32 rounding error bound is that much looser.
          const double tol = c.dtype == MCL_DTYPE_F16 ? 2e-3 * mag + 1e-3 * std::fabs(want) + 1e-4
                             : c.winograd             ? 1e-4 * mag + 1e-6
                                                      : 1e-5 * mag + 1e-6;
          if (!(std::fabs(got - want) <= tol) && bad++ < 5)
            ADD_FAILURE() << "at " << ty << "," << tx << "," << oc << " got " << got << " want "
                          << want;
        }
      }
  EXPECT_EQ(bad, 0u);
  // Nothing outside the output tile was written.
  const uint8_t *obase = spm.base() + a.output.offset;
  const uint32_t es = esize(c.out_dtype);
  for (uint32_t y = 0; y < c.oh; ++y)
    for (uint32_t xx = 0; xx < c.ow; ++xx)
      for (uint32_t e = c.cout * es; e < a.output.pixel_stride * es; ++e)
        ASSERT_EQ(
            obase[((size_t)y * a.output.row_stride + (size_t)xx * a.output.pixel_stride) * es + e],
            0xee);
}

class ConvRandom : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (mcl_native_set_isa(GetParam().c_str()) != MCL_NATIVE_OK)
      GTEST_SKIP() << GetParam() << " not available on this host";
  }
  void TearDown() override { mcl_native_set_isa(guard_.best.c_str()); }
  IsaGuard guard_;
};

TEST_P(ConvRandom, Fp32Conv) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 60; ++i)
    run_case(random_case(rng, false, false), 100 + i, 1 + i % 2);
}

TEST_P(ConvRandom, Fp32Depthwise) {
  std::mt19937 rng(99);
  for (int i = 0; i < 30; ++i)
    run_case(random_case(rng, false, true), 200 + i, 2);
}

TEST_P(ConvRandom, Fp32Transposed) {
  std::mt19937 rng(7);
  for (int i = 0; i < 30; ++i)
    run_case(random_case(rng, true, i % 5 == 0), 300 + i, 1 + i % 2);
}

TEST_P(ConvRandom, Fp32FusedActivations) {
  std::mt19937 rng(5);
  const mcl_activation acts[] = {{MCL_ACT_RELU, 0, 0},
                                 {MCL_ACT_CLIP, 0.0f, 0.3f},
                                 {MCL_ACT_SILU, 0, 0},
                                 {MCL_ACT_HARD_SWISH, 0, 0}};
  for (int i = 0; i < 12; ++i) {
    ConvCase c = random_case(rng, false, i % 3 == 0);
    c.act = acts[i % 4];
    run_case(c, 400 + i, 2);
  }
}

TEST_P(ConvRandom, Fp16Conv) {
  std::mt19937 rng(77);
  for (int i = 0; i < 30; ++i) {
    ConvCase c = random_case(rng, i % 4 == 3, i % 5 == 0);
    c.dtype = c.out_dtype = MCL_DTYPE_F16;
    run_case(c, 500 + i, 1 + i % 2);
  }
}

TEST_P(ConvRandom, Int8ConvBitExact) {
  std::mt19937 rng(31);
  const uint32_t types[] = {MCL_DTYPE_U8, MCL_DTYPE_S8};
  for (int i = 0; i < 48; ++i) {
    ConvCase c = random_case(rng, i % 6 == 5, i % 4 == 0);
    c.dtype = types[i % 2];
    c.out_dtype = types[(i / 2) % 2];
    c.per_channel = (i / 4) % 2;
    if (i % 7 == 0)
      c.act.kind = MCL_ACT_RELU;
    run_case(c, 600 + i, 1 + i % 2);
  }
}

TEST_P(ConvRandom, Int8WeightZeroPointsBitExact) {
  // uint8 weights of QLinearConv shifted to int8 with their zero point: w - w_zp spans
  // [-255, 255], so the parameter block keeps the zero points and the kernels subtract
  // w_zp * sum(x) per pixel. Dense, grouped, depthwise, transposed; per tensor and channel.
  std::mt19937 rng(913);
  const uint32_t types[] = {MCL_DTYPE_U8, MCL_DTYPE_S8};
  for (int i = 0; i < 24; ++i) {
    ConvCase c = random_case(rng, i % 6 == 5, i % 4 == 0);
    c.dtype = types[i % 2];
    c.out_dtype = types[(i / 2) % 2];
    c.per_channel = (i / 4) % 2;
    c.weight_zp_max = 127;
    c.wide_weight_zps = true;
    run_case(c, 900 + i, 1 + i % 2, i % 3 == 0 ? Table::Implicit : Table::Stored);
  }
}

TEST_P(ConvRandom, Int8DepthwiseBlocksBitExact) {
  // Depthwise INT8 with whole 16-channel blocks (the vector kernels; random_case mostly draws
  // fewer channels): taps in pairs with an odd last tap (1, 9, 25, 49 taps) and even counts
  // (4, 6), channel tails after full blocks, strides 1 and 2, inner tiles, U8 and S8 in and
  // out, weight zero points per tensor, per channel and kept in the block (w - w_zp up to
  // +-255), 1 and 2 PEs, stored and derived tables.
  struct Shape {
    uint32_t H, W, C, kh, kw, s;
  };
  const Shape shapes[] = {{9, 11, 16, 3, 3, 1},  {12, 10, 37, 3, 3, 2}, {8, 9, 64, 5, 5, 1},
                          {11, 13, 32, 7, 7, 1}, {7, 8, 48, 1, 1, 1},   {9, 7, 17, 2, 2, 1},
                          {10, 9, 33, 2, 3, 2},  {6, 21, 80, 3, 3, 1}};
  const uint32_t types[] = {MCL_DTYPE_U8, MCL_DTYPE_S8};
  uint32_t seed = 2700;
  for (const Shape &sh : shapes)
    for (uint32_t variant = 0; variant < 4; ++variant, ++seed) {
      ConvCase c{};
      c.H = sh.H, c.W = sh.W, c.cin = c.cout = c.groups = sh.C, c.kh = sh.kh, c.kw = sh.kw;
      c.sh = c.sw = sh.s, c.dh = c.dw = 1;
      c.pt = c.pb = sh.kh / 2, c.pl = c.pr = sh.kw / 2;
      c.OH = (c.H + c.pt + c.pb - c.kh) / c.sh + 1;
      c.OW = (c.W + c.pl + c.pr - c.kw) / c.sw + 1;
      c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
      if (variant == 3 && c.OH > 2 && c.OW > 3)
        c.oy0 = 1, c.ox0 = 2, c.oh = c.OH - 2, c.ow = c.OW - 3; // an inner tile
      c.dtype = types[variant % 2];
      c.out_dtype = types[(variant / 2) % 2];
      c.per_channel = variant >= 1;
      if (variant == 2) {
        c.weight_zp_max = 127;
        c.wide_weight_zps = true;
      }
      if (variant == 1)
        c.act.kind = MCL_ACT_RELU;
      run_case(c, seed, 1 + variant % 2, variant % 2 ? Table::Implicit : Table::Stored);
    }
}

TEST_P(ConvRandom, Int8WinogradIsTheDirectConvolution) {
  // INT8 3x3 stride-1 calls with a derived table, 16+ channels in and out and 8+ 2x2 blocks:
  // the AVX2 and portable kernels compute them as integer Winograd F(2x2, 3x3), which must give
  // the direct convolution's bytes. Odd output sizes (partial blocks), padding on any border,
  // inner tiles, odd channel counts and several channel chunks (130 = 2 x 64 + 2), panel tails,
  // U8/S8, per-channel scales, weight zero points kept in the block (w - w_zp up to +-255),
  // the ReLU clamp, 1 and 2 PEs, no table and the implicit table.
  struct Shape {
    uint32_t H, W, cin, cout, pt, pl, pb, pr;
  };
  const Shape shapes[] = {{9, 11, 16, 16, 1, 1, 1, 1}, {8, 8, 19, 24, 0, 0, 0, 0},
                          {13, 7, 64, 40, 1, 0, 1, 1}, {10, 12, 67, 17, 1, 1, 0, 0},
                          {7, 9, 130, 33, 1, 1, 1, 1}, {12, 13, 32, 64, 0, 1, 1, 0},
                          {6, 22, 48, 16, 1, 1, 1, 1}, {15, 15, 24, 80, 1, 1, 1, 1}};
  const uint32_t types[] = {MCL_DTYPE_U8, MCL_DTYPE_S8};
  uint32_t seed = 2800;
  for (const Shape &sh : shapes)
    for (uint32_t variant = 0; variant < 4; ++variant, ++seed) {
      ConvCase c{};
      c.H = sh.H, c.W = sh.W, c.cin = sh.cin, c.cout = sh.cout, c.groups = 1;
      c.kh = c.kw = 3, c.sh = c.sw = 1, c.dh = c.dw = 1;
      c.pt = sh.pt, c.pl = sh.pl, c.pb = sh.pb, c.pr = sh.pr;
      c.OH = c.H + c.pt + c.pb - 2, c.OW = c.W + c.pl + c.pr - 2;
      c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
      if (variant == 3 && c.OH >= 8 && c.OW >= 8)
        c.oy0 = 1, c.ox0 = 2, c.oh = c.OH - 2, c.ow = c.OW - 3; // an inner tile, halos around
      c.dtype = types[variant % 2];
      c.out_dtype = types[(variant / 2) % 2];
      c.per_channel = variant >= 1;
      if (variant == 2) {
        c.weight_zp_max = 127;
        c.wide_weight_zps = true;
      }
      if (variant == 1)
        c.act.kind = MCL_ACT_RELU;
      const bool padded = sh.pt + sh.pl + sh.pb + sh.pr > 0;
      run_case(c, seed, 1 + variant % 2, padded || variant % 2 ? Table::Implicit : Table::None);
    }
}

TEST_P(ConvRandom, NoTableValidInterior) {
  // 1x1 and strided convs with every tap inside the tile run without an address table.
  std::mt19937 rng(3);
  for (int i = 0; i < 16; ++i) {
    ConvCase c = random_case(rng, false, false);
    c.pt = c.pl = c.pb = c.pr = 0;
    c.kh = c.kw = 1 + (i % 3 == 0);
    c.H = std::max<uint32_t>(c.H, (c.kh - 1) * c.dh + 1);
    c.W = std::max<uint32_t>(c.W, (c.kw - 1) * c.dw + 1);
    c.OH = (c.H - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
    c.OW = (c.W - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
    c.oy0 = c.ox0 = 0;
    c.oh = c.OH;
    c.ow = c.OW;
    if (i % 2) {
      c.dtype = MCL_DTYPE_U8;
      c.out_dtype = MCL_DTYPE_S8;
    }
    run_case(c, 700 + i, 2, Table::None);
  }
}

TEST_P(ConvRandom, ImplicitTableMatchesReference) {
  // The call derives the table (padding, borders, strides, dilation, transposed) itself.
  std::mt19937 rng(4242);
  for (int i = 0; i < 24; ++i) {
    ConvCase c = random_case(rng, i % 4 == 3, i % 5 == 0);
    if (i % 3 == 1)
      c.dtype = c.out_dtype = MCL_DTYPE_F16;
    if (i % 6 == 2) {
      c.dtype = MCL_DTYPE_S8;
      c.out_dtype = MCL_DTYPE_U8;
    }
    run_case(c, 800 + i, 1 + i % 2, Table::Implicit);
  }
}

TEST_P(ConvRandom, Fp16WidenedInput) {
  // Binary16 inputs with a derived table are widened to float once per call, only where the
  // taps read: output bands of a larger input tile, strided 1x1 kernels (rows and columns
  // skipped), padding through the moved pad row, depthwise channel tails, transposed.
  std::mt19937 rng(1616);
  for (int i = 0; i < 40; ++i) {
    ConvCase c = random_case(rng, i % 8 == 7, i % 4 == 1);
    c.dtype = c.out_dtype = MCL_DTYPE_F16;
    c.whole_input = i % 2 == 0;
    if (i % 5 == 4)
      c.act = {MCL_ACT_CLIP, 0.0f, 0.5f};
    run_case(c, 1600 + i, 1 + i % 2, Table::Implicit);
  }
  for (int i = 0; i < 24; ++i) { // no table: every tap inside the tile
    ConvCase c = random_case(rng, false, i % 3 == 2);
    c.pt = c.pl = c.pb = c.pr = 0;
    c.kh = c.kw = i % 2 ? 1 : 3;
    c.H = std::max<uint32_t>(c.H, (c.kh - 1) * c.dh + 1);
    c.W = std::max<uint32_t>(c.W, (c.kw - 1) * c.dw + 1);
    c.OH = (c.H - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
    c.OW = (c.W - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
    c.oy0 = (uint32_t)(rng() % c.OH);
    c.ox0 = (uint32_t)(rng() % c.OW);
    c.oh = 1 + (uint32_t)(rng() % (c.OH - c.oy0));
    c.ow = 1 + (uint32_t)(rng() % (c.OW - c.ox0));
    c.dtype = c.out_dtype = MCL_DTYPE_F16;
    c.whole_input = true;
    run_case(c, 1700 + i, 1 + i % 2, Table::None);
  }
  // Large K (chunked panels) and several panels on a widened input.
  ConvCase c{};
  c.H = 7, c.W = 9, c.cin = 301, c.cout = 37, c.groups = 1, c.kh = c.kw = 3, c.sh = c.sw = 1;
  c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1, c.OH = 7, c.OW = 9;
  c.oy0 = 2, c.ox0 = 1, c.oh = 4, c.ow = 7;
  c.dtype = c.out_dtype = MCL_DTYPE_F16;
  c.whole_input = true;
  run_case(c, 1800, 2, Table::Implicit);
  c.cin = 67, c.cout = 70;
  run_case(c, 1801, 1, Table::Implicit);
}

TEST_P(ConvRandom, LeakyReluEpilogueIsTheScalarFormula) {
  // The vector LeakyRelu epilogue (conv and depthwise, full and tail panels) gives exactly
  // v < 0 ? alpha * v : v of the unactivated FP32 output, as the scalar epilogue did; FP16
  // within the usual tolerance.
  std::mt19937 rng(2323);
  for (int i = 0; i < 16; ++i) {
    ConvCase c = random_case(rng, false, i % 3 == 1);
    if (i % 4 == 0) // several panels and a tail
      c.cout = c.groups * 37, c.cin = c.groups * 5;
    if (c.cin == c.cout && c.groups == c.cin && i % 3 != 1)
      c.groups = 1;
    std::vector<double> plain, leaky;
    run_case(c, 2300 + i, 1 + i % 2, Table::Implicit, &plain);
    c.act = {MCL_ACT_LEAKY_RELU, 0.1f, 0};
    run_case(c, 2300 + i, 1 + i % 2, Table::Implicit, &leaky);
    ASSERT_EQ(plain.size(), leaky.size());
    for (size_t k = 0; k < plain.size(); ++k) {
      const float v = (float)plain[k];
      const float want = v < 0.0f ? 0.1f * v : v;
      ASSERT_EQ((float)leaky[k], want) << k;
    }
    c.dtype = c.out_dtype = MCL_DTYPE_F16;
    run_case(c, 2400 + i, 2, Table::Implicit);
  }
}

TEST_P(ConvRandom, ResidualMatchesReference) {
  // A residual tile added before the activation: dense, grouped, depthwise (full and tail
  // channel blocks), transposed, every table mode, FP32 and FP16, activations that clamp and
  // that do not.
  std::mt19937 rng(4141);
  const mcl_activation acts[] = {{MCL_ACT_NONE, 0, 0},
                                 {MCL_ACT_RELU, 0, 0},
                                 {MCL_ACT_CLIP, 0.0f, 0.6f},
                                 {MCL_ACT_LEAKY_RELU, 0.1f, 0},
                                 {MCL_ACT_HARD_SWISH, 0, 0}};
  const Table tables[] = {Table::Stored, Table::Implicit};
  for (int i = 0; i < 40; ++i) {
    ConvCase c = random_case(rng, i % 8 == 7, i % 4 == 1);
    if (i % 5 == 0) // several panels and a tail
      c.cout = c.groups * (i % 4 == 1 ? 1 : 37), c.cin = c.groups * (i % 4 == 1 ? 1 : 5);
    if (i % 3 == 2)
      c.dtype = c.out_dtype = MCL_DTYPE_F16;
    c.residual = true;
    c.act = acts[i % 5];
    run_case(c, 4100 + i, 1 + i % 2, tables[(i / 2) % 2]);
  }
  // Large K (row packing and K-chunks), FP32 and a widened FP16 input.
  ConvCase c{};
  c.H = 7, c.W = 9, c.cin = 301, c.cout = 37, c.groups = 1, c.kh = c.kw = 3, c.sh = c.sw = 1;
  c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1, c.OH = 7, c.OW = 9;
  c.oy0 = 2, c.ox0 = 1, c.oh = 4, c.ow = 7;
  c.residual = true;
  c.act = {MCL_ACT_RELU, 0, 0};
  run_case(c, 4200, 2, Table::Implicit);
  c.dtype = c.out_dtype = MCL_DTYPE_F16;
  c.whole_input = true;
  run_case(c, 4201, 2, Table::Implicit);
}

TEST_P(ConvRandom, Fp32ResidualIsConvThenAdd) {
  // FP32: the fused epilogue computes (conv + bias) + residual and then the activation, the
  // same IEEE operations as the convolution followed by the Add (+ ReLU / Clip): bit for bit.
  std::mt19937 rng(4343);
  for (int i = 0; i < 24; ++i) {
    ConvCase c = random_case(rng, false, i % 4 == 1);
    if (i % 6 == 0) // packed rows (large K)
      c.cin = c.groups * 160, c.kh = c.kw = 2;
    std::vector<double> conv, fused, residual;
    run_case(c, 4300 + i, 1 + i % 2, Table::Implicit, &conv);
    c.residual = true;
    c.act = i % 2 ? mcl_activation{MCL_ACT_RELU, 0, 0} : mcl_activation{MCL_ACT_CLIP, 0.0f, 0.5f};
    run_case(c, 4300 + i, 1 + i % 2, Table::Implicit, &fused, &residual);
    ASSERT_EQ(conv.size(), fused.size());
    ASSERT_EQ(conv.size(), residual.size());
    for (size_t k = 0; k < conv.size(); ++k) {
      const float sum = (float)conv[k] + (float)residual[k];
      const float want = c.act.kind == MCL_ACT_RELU ? (sum > 0.0f ? sum : 0.0f)
                                                    : std::min(std::max(sum, 0.0f), 0.5f);
      ASSERT_EQ((float)fused[k], want) << c.describe() << " element " << k;
    }
  }
}

ConvCase winograd_case(std::mt19937 &rng, uint32_t max_size) {
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  ConvCase c{};
  c.kh = c.kw = 3, c.sh = c.sw = c.dh = c.dw = 1, c.groups = 1;
  c.H = pick(1, max_size), c.W = pick(1, max_size);
  c.cin = pick(1, 70), c.cout = pick(1, 70);
  c.pt = pick(0, 2), c.pb = pick(0, 2), c.pl = pick(0, 2), c.pr = pick(0, 2);
  c.H = std::max(c.H, 3 - std::min(3u, c.pt + c.pb));
  c.W = std::max(c.W, 3 - std::min(3u, c.pl + c.pr));
  c.OH = c.H + c.pt + c.pb - 2, c.OW = c.W + c.pl + c.pr - 2;
  if (pick(0, 2) == 0) {
    c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
  } else {
    c.oy0 = pick(0, c.OH - 1), c.ox0 = pick(0, c.OW - 1);
    c.oh = pick(1, c.OH - c.oy0), c.ow = pick(1, c.OW - c.ox0);
  }
  c.winograd = true;
  return c;
}

TEST_P(ConvRandom, WinogradMatchesReference) {
  // F(4x4, 3x3): output tiles at every border (partial 4x4 blocks, padding inside the 6x6
  // patches), input tiles that are only the taps' window or the whole image, channel counts
  // around the vector widths and the channel chunk, output-channel tails, FP32 and FP16,
  // residuals and activations, 1 and 2 threads.
  std::mt19937 rng(3636);
  const mcl_activation acts[] = {{MCL_ACT_NONE, 0, 0},
                                 {MCL_ACT_RELU, 0, 0},
                                 {MCL_ACT_LEAKY_RELU, 0.1f, 0},
                                 {MCL_ACT_SILU, 0, 0}};
  for (int i = 0; i < 48; ++i) {
    ConvCase c = winograd_case(rng, i % 6 == 5 ? 40 : 13);
    if (i % 3 == 1)
      c.dtype = c.out_dtype = MCL_DTYPE_F16;
    c.whole_input = i % 4 == 0;
    c.residual = i % 5 == 2;
    c.act = acts[i % 4];
    run_case(c, 3600 + i, 1 + i % 2, Table::Implicit);
  }
  for (int i = 0; i < 12; ++i) { // no table: every tap inside the tile
    ConvCase c = winograd_case(rng, 20);
    c.pt = c.pb = c.pl = c.pr = 0;
    c.H = std::max(c.H, 3u), c.W = std::max(c.W, 3u);
    c.OH = c.H - 2, c.OW = c.W - 2;
    c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
    if (i % 2)
      c.dtype = c.out_dtype = MCL_DTYPE_F16;
    run_case(c, 3700 + i, 2, Table::None);
  }
  // Many tiles and channels: several tasks, channel chunks and panels per task.
  ConvCase c{};
  c.H = 52, c.W = 45, c.cin = 100, c.cout = 75, c.groups = 1, c.kh = c.kw = 3;
  c.sh = c.sw = c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1, c.OH = 52, c.OW = 45;
  c.oy0 = 0, c.ox0 = 0, c.oh = 52, c.ow = 45;
  c.winograd = true;
  c.act = {MCL_ACT_RELU, 0, 0};
  run_case(c, 3800, 2, Table::Implicit);
  c.dtype = c.out_dtype = MCL_DTYPE_F16;
  c.oy0 = 13, c.oh = 30;
  run_case(c, 3801, 1, Table::Implicit);
}

TEST_P(ConvRandom, LargeChannels) {
  // Several panels, K large enough for cache blocking, many rows: the fast path proper.
  ConvCase c{};
  c.H = 9, c.W = 11, c.cin = 67, c.cout = 70, c.groups = 1, c.kh = c.kw = 3, c.sh = c.sw = 1;
  c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1, c.OH = 9, c.OW = 11;
  c.oy0 = c.ox0 = 0, c.oh = 9, c.ow = 11;
  run_case(c, 800, 2);
  c.dtype = MCL_DTYPE_S8;
  c.out_dtype = MCL_DTYPE_U8;
  c.per_channel = true;
  run_case(c, 801, 2);
}

TEST_P(ConvRandom, FirstLayerTapRunsMatchReference) {
  // A few input channels over many taps (7x7, 5x5 and 11x11 first layers) run each kernel row's
  // contiguous taps as one loop: padding on every side breaks the runs at different taps for
  // different rows of a register block; partial output tiles, dilation (no runs), FP16,
  // residuals, stored and derived tables, 1 and 2 threads.
  const Table tables[] = {Table::Stored, Table::Implicit};
  for (int i = 0; i < 12; ++i) {
    ConvCase c{};
    const uint32_t k = i % 3 == 0 ? 7 : i % 3 == 1 ? 5 : 11;
    c.kh = c.kw = k;
    c.cin = 1 + i % 4, c.cout = i % 2 ? 64 : 21, c.groups = 1;
    c.sh = c.sw = 1 + i % 2;
    c.dh = c.dw = i == 5 ? 2 : 1;
    c.H = 23 + i, c.W = 19 + 2 * i;
    c.pt = c.pl = k / 2, c.pb = c.pr = (k / 2) - (i % 2);
    c.OH = (c.H + c.pt + c.pb - c.dh * (k - 1) - 1) / c.sh + 1;
    c.OW = (c.W + c.pl + c.pr - c.dw * (k - 1) - 1) / c.sw + 1;
    if (i % 4 == 3) {
      c.oy0 = 1, c.ox0 = 2, c.oh = c.OH - 2, c.ow = c.OW - 3;
    } else {
      c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
    }
    c.act = {MCL_ACT_RELU, 0, 0};
    c.residual = i % 5 == 4;
    c.dense_input = true; // the taps of a kernel row are contiguous
    if (i % 3 == 2)
      c.dtype = c.out_dtype = MCL_DTYPE_F16;
    run_case(c, 950 + i, 1 + i % 2, tables[i % 2]);
  }
}

TEST_P(ConvRandom, LargeKChunked) {
  // Panels beyond the L1 budget are split into K-chunks (whole taps, or channel ranges of a
  // tap) accumulated across row blocks: 3x3 with many channels, and a wide 1x1.
  ConvCase c{};
  c.H = 5, c.W = 7, c.cin = 301, c.cout = 37, c.groups = 1, c.kh = c.kw = 3, c.sh = c.sw = 1;
  c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1, c.OH = 5, c.OW = 7;
  c.oy0 = c.ox0 = 0, c.oh = 5, c.ow = 7;
  c.act = {MCL_ACT_RELU, 0, 0};
  run_case(c, 900, 2);
  c.dtype = c.out_dtype = MCL_DTYPE_F16;
  run_case(c, 901, 1);
  ConvCase w{};
  w.H = 3, w.W = 9, w.cin = 1030, w.cout = 20, w.groups = 1, w.kh = w.kw = 1, w.sh = w.sw = 1;
  w.dh = w.dw = 1, w.OH = 3, w.OW = 9, w.oh = 3, w.ow = 9;
  run_case(w, 902, 2);
  w.groups = 2, w.cout = 34; // grouped, chunked per group
  run_case(w, 903, 1);
  // Regression: 139 rows in 4 tasks leave a last task of 31 rows whose final row block
  // overruns a partial-sum buffer sized by 16-row granules.
  ConvCase r{};
  r.H = 1, r.W = 139, r.cin = 1030, r.cout = 24, r.groups = 1, r.kh = r.kw = 1, r.sh = r.sw = 1;
  r.dh = r.dw = 1, r.OH = 1, r.OW = 139, r.oh = 1, r.ow = 139;
  run_case(r, 904, 1);
  run_case(r, 905, 2);
  // Packed K-chunks reused by several panels per task (a ragged last panel), chunks that end
  // inside a tap, a stride-2 1x1 with K between the chunk and the L1 budget, binary16 weights.
  ConvCase p{};
  p.H = 6, p.W = 13, p.cin = 301, p.cout = 100, p.groups = 1, p.kh = p.kw = 3, p.sh = p.sw = 1;
  p.dh = p.dw = 1, p.pt = p.pl = p.pb = p.pr = 1, p.OH = 6, p.OW = 13;
  p.oy0 = 1, p.ox0 = 2, p.oh = 5, p.ow = 11;
  run_case(p, 906, 1, Table::Implicit);
  run_case(p, 907, 2);
  p.dtype = p.out_dtype = MCL_DTYPE_F16;
  run_case(p, 908, 2, Table::Implicit);
  ConvCase s2{};
  s2.H = 8, s2.W = 10, s2.cin = 480, s2.cout = 70, s2.groups = 1, s2.kh = s2.kw = 1;
  s2.sh = s2.sw = 2, s2.dh = s2.dw = 1, s2.OH = 4, s2.OW = 5, s2.oh = 4, s2.ow = 5;
  run_case(s2, 909, 1);
  s2.act = {MCL_ACT_LEAKY_RELU, 0.1f, 0};
  run_case(s2, 910, 2);
  // A first layer: 3 channels under a 7x7 stride-2 kernel (packed as well: runs of taps over
  // adjacent pixels are one copy, cut where the padding or a K-chunk ends), and 5x5 with 4.
  ConvCase f{};
  f.H = 23, f.W = 29, f.cin = 3, f.cout = 40, f.groups = 1, f.kh = f.kw = 7, f.sh = f.sw = 2;
  f.dh = f.dw = 1, f.pt = f.pl = f.pb = f.pr = 3, f.OH = 12, f.OW = 15;
  f.oy0 = f.ox0 = 0, f.oh = 12, f.ow = 15;
  f.act = {MCL_ACT_RELU, 0, 0};
  run_case(f, 911, 2, Table::Implicit);
  run_case(f, 912, 1);
  f.cin = 4, f.kh = f.kw = 5, f.sh = f.sw = 1, f.pt = f.pl = f.pb = f.pr = 2, f.OH = 23, f.OW = 29;
  f.oy0 = 2, f.ox0 = 1, f.oh = 17, f.ow = 25;
  f.dtype = f.out_dtype = MCL_DTYPE_F16;
  run_case(f, 913, 2, Table::Implicit);
}

TEST_P(ConvRandom, DepthwiseWideTiles) {
  // Depthwise tiles of many 8-pixel blocks (more than one block group), rows that are not a
  // multiple of the block, padding on every side (irregular blocks next to regular ones), a
  // channel tail, strides 1 and 2, FP32 and FP16, with and without a stored table.
  for (uint32_t stride : {1u, 2u}) {
    ConvCase c{};
    c.H = 37, c.W = 29, c.cin = c.cout = c.groups = 53, c.kh = c.kw = 3;
    c.sh = c.sw = stride, c.dh = c.dw = 1, c.pt = c.pl = c.pb = c.pr = 1;
    c.OH = (c.H + 2 - 3) / stride + 1, c.OW = (c.W + 2 - 3) / stride + 1;
    c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
    c.act = {MCL_ACT_CLIP, 0.0f, 6.0f};
    run_case(c, 2500 + stride, 2, Table::Implicit);
    run_case(c, 2510 + stride, 1);
    c.oy0 = 3, c.ox0 = 2, c.oh = c.OH - 5, c.ow = c.OW - 3; // an inner tile
    run_case(c, 2520 + stride, 2);
    c.dtype = c.out_dtype = MCL_DTYPE_F16;
    run_case(c, 2530 + stride, 2, Table::Implicit);
  }
}

TEST_P(ConvRandom, DepthwiseDerivedTableIsTheStoredTablesArithmetic) {
  // With a derived table the depthwise kernel addresses the pixels away from the padding from
  // the geometry (kernel rows sliding over the input row, blocks shifted to end a row's
  // interior) and the borders through the table: the same sums in the same order as with a
  // stored table, so the same bits. Kernels 3/5/7, strides 1/2, dilations 1/2 (stride 1 with
  // dilation 2 does not slide), asymmetric padding, rows narrower than a block, inner tiles,
  // 1-3 PEs (tasks starting inside a row), channel tails, the clamp and a general activation.
  struct Shape {
    uint32_t H, W, C, k, s, d, pt, pl, pb, pr;
  };
  const Shape shapes[] = {{23, 41, 35, 3, 1, 1, 1, 1, 1, 1}, {19, 44, 32, 3, 2, 1, 0, 0, 1, 1},
                          {17, 30, 16, 5, 1, 1, 2, 2, 2, 2}, {21, 27, 48, 5, 2, 1, 2, 1, 2, 2},
                          {15, 36, 20, 7, 1, 1, 3, 3, 3, 3}, {13, 25, 16, 7, 2, 1, 3, 3, 3, 3},
                          {19, 33, 24, 3, 1, 2, 2, 2, 2, 2}, {17, 35, 16, 3, 2, 1, 1, 0, 1, 0},
                          {9, 13, 64, 3, 1, 1, 1, 1, 1, 1},  {7, 7, 33, 3, 1, 1, 1, 1, 1, 1}};
  uint32_t seed = 2600;
  for (const Shape &sh : shapes)
    for (uint32_t variant = 0; variant < 3; ++variant) {
      ConvCase c{};
      c.H = sh.H, c.W = sh.W, c.cin = c.cout = c.groups = sh.C, c.kh = c.kw = sh.k;
      c.sh = c.sw = sh.s, c.dh = c.dw = sh.d;
      c.pt = sh.pt, c.pl = sh.pl, c.pb = sh.pb, c.pr = sh.pr;
      c.OH = (c.H + c.pt + c.pb - ((c.kh - 1) * c.dh + 1)) / c.sh + 1;
      c.OW = (c.W + c.pl + c.pr - ((c.kw - 1) * c.dw + 1)) / c.sw + 1;
      c.oy0 = c.ox0 = 0, c.oh = c.OH, c.ow = c.OW;
      c.act = variant == 1 ? mcl_activation{MCL_ACT_SILU, 0.0f, 0.0f}
                           : mcl_activation{MCL_ACT_CLIP, 0.0f, 6.0f};
      if (variant == 2) {
        c.oy0 = 1, c.ox0 = 2, c.oh = c.OH - 2, c.ow = c.OW - 3; // an inner tile
        c.dtype = c.out_dtype = MCL_DTYPE_F16;
      }
      const uint32_t pes = 1 + seed % 3;
      std::vector<double> stored, derived;
      run_case(c, seed, pes, Table::Stored, &stored);
      run_case(c, seed, pes, Table::Implicit, &derived);
      ASSERT_EQ(stored.size(), derived.size());
      size_t differ = 0;
      for (size_t i = 0; i < stored.size(); ++i)
        differ += std::memcmp(&stored[i], &derived[i], sizeof(double)) != 0;
      EXPECT_EQ(differ, 0u) << "shape " << sh.H << "x" << sh.W << "x" << sh.C << " k" << sh.k
                            << " s" << sh.s << " d" << sh.d << " variant " << variant;
      ++seed;
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, ConvRandom, ::testing::Values("generic", "avx2", "avx512"),
                         [](const auto &info) { return info.param; });

// GEMM through the registry: FP32 / FP16 / INT8, transposed and plain B.
// weight_zp != 0: INT8 weights with a zero point kept in the block (MCL_CONV_WEIGHT_ZERO_POINTS).
void run_gemm(uint32_t dtype, uint32_t out_dtype, uint32_t M, uint32_t K, uint32_t N, bool trans_b,
              uint32_t seed, int32_t weight_zp = 0) {
  SCOPED_TRACE("gemm M" + std::to_string(M) + " K" + std::to_string(K) + " N" + std::to_string(N) +
               " dtype" + std::to_string(dtype) + " transB" + std::to_string(trans_b));
  std::mt19937 rng(seed);
  Spm spm;
  const bool int8 = dtype == MCL_DTYPE_S8 || dtype == MCL_DTYPE_U8;
  mcl_gemm_args g{};
  g.input = place_tile(spm, 1, M, K, dtype, 0, 5, 0);
  g.output = place_tile(spm, 1, M, N, out_dtype, 0, 1, 0);
  std::uniform_real_distribution<float> uni(-1, 1);
  std::uniform_int_distribution<int32_t> q8(0, 255), s8(-128, 127);
  std::vector<double> A((size_t)M * K);
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t k = 0; k < K; ++k) {
      double v = int8 ? (dtype == MCL_DTYPE_U8 ? q8(rng) : s8(rng)) : uni(rng);
      set(spm, g.input, 0, m, k, v);
      A[(size_t)m * K + k] = get(spm, g.input, 0, m, k);
    }
  std::vector<float> Bf((size_t)K * N);
  std::vector<uint16_t> Bh(Bf.size());
  std::vector<int8_t> B8(Bf.size());
  for (size_t i = 0; i < Bf.size(); ++i) {
    Bh[i] = f2h(uni(rng));
    Bf[i] = dtype == MCL_DTYPE_F16 ? h2f(Bh[i]) : uni(rng);
    B8[i] = (int8_t)s8(rng);
  }
  auto bval = [&](uint32_t k, uint32_t n) -> double {
    const size_t i = trans_b ? (size_t)n * K + k : (size_t)k * N + n;
    return int8 ? (double)B8[i] - weight_zp : Bf[i];
  };
  const float xs = 0.01f, ys = 0.4f, ws = 0.03f;
  g.input_zero_point = int8 ? 3 : 0;
  g.output_zero_point = int8 ? -7 + (out_dtype == MCL_DTYPE_U8 ? 130 : 0) : 0;
  g.output_min = out_dtype == MCL_DTYPE_U8 ? 0 : -128;
  g.output_max = out_dtype == MCL_DTYPE_U8 ? 255 : 127;
  g.flags = weight_zp ? MCL_CONV_WEIGHT_ZERO_POINTS : 0;
  const size_t psize = mcl_native_gemm_params_size(&g);
  g.params_offset = spm.alloc(psize);
  mcl_weight_quant q{xs, ys, &ws, &weight_zp, 1};
  const void *b = int8                     ? (const void *)B8.data()
                  : dtype == MCL_DTYPE_F16 ? (const void *)Bh.data()
                                           : (const void *)Bf.data();
  ASSERT_EQ(mcl_native_pack_gemm(&g, b, trans_b, nullptr, int8 ? &q : nullptr,
                                 spm.base() + g.params_offset, psize),
            MCL_NATIVE_OK);
  spm.run(MCL_NATIVE_FN_GEMM, g);
  for (uint32_t m = 0; m < M; ++m)
    for (uint32_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (uint32_t k = 0; k < K; ++k) {
        const double t = (A[(size_t)m * K + k] - g.input_zero_point) * bval(k, n);
        acc += t;
        mag += std::fabs(t);
      }
      const double got = get(spm, g.output, 0, m, n);
      if (int8) {
        ASSERT_EQ((int32_t)got, requant_ref((int32_t)acc, xs * ws / ys, g.output_zero_point,
                                            g.output_min, g.output_max))
            << m << "," << n;
      } else {
        const double tol =
            dtype == MCL_DTYPE_F16 ? 2e-3 * mag + 1e-3 * std::fabs(acc) + 1e-4 : 1e-5 * mag + 1e-6;
        ASSERT_NEAR(got, acc, tol) << m << "," << n;
      }
    }
}

TEST(NativeGemm, AllPrecisions) {
  IsaGuard guard;
  for (const auto &isa : available_isas()) {
    ASSERT_EQ(mcl_native_set_isa(isa.c_str()), MCL_NATIVE_OK);
    SCOPED_TRACE(isa);
    run_gemm(MCL_DTYPE_F32, MCL_DTYPE_F32, 37, 53, 41, false, 1);
    run_gemm(MCL_DTYPE_F32, MCL_DTYPE_F32, 1, 300, 17, true, 2);
    run_gemm(MCL_DTYPE_F16, MCL_DTYPE_F16, 13, 29, 33, true, 3);
    run_gemm(MCL_DTYPE_U8, MCL_DTYPE_U8, 19, 77, 35, false, 4);
    run_gemm(MCL_DTYPE_S8, MCL_DTYPE_S8, 7, 16, 16, true, 5);
    run_gemm(MCL_DTYPE_U8, MCL_DTYPE_S8, 23, 45, 37, true, 6, 114); // QLinearMatMul-style
    run_gemm(MCL_DTYPE_S8, MCL_DTYPE_U8, 5, 300, 20, false, 7, -90);
  }
}

TEST(NativeConvTable, PlannerEncodesPaddingAsPadRow) {
  // 3x3 conv, pad 1, 2x2 input: corner output (0,0) reads the pad row for the first row and
  // column of taps and the input pixels for the others.
  mcl_conv_args a{};
  a.input = {64, 2, 2, 3, 6, 3, 1, MCL_DTYPE_F32};
  a.output = {1024, 2, 2, 4, 8, 4, 1, MCL_DTYPE_F32};
  a.pad_row_offset = 16;
  a.groups = 1;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  a.origin_y = a.origin_x = -1;
  std::vector<int32_t> table(mcl_native_conv_table_size(&a));
  ASSERT_EQ(table.size(), 2u * 2u * 9u);
  ASSERT_EQ(mcl_native_plan_conv(MCL_NATIVE_FN_CONV2D, &a, table.data(), table.size()),
            MCL_NATIVE_OK);
  const int32_t pad = (16 - 64) / 4;
  const int32_t want0[9] = {pad, pad, pad, pad, 0, 3, pad, 6, 9};
  for (int t = 0; t < 9; ++t)
    EXPECT_EQ(table[t], want0[t]) << t;
  EXPECT_EQ(mcl_native_plan_conv(MCL_NATIVE_FN_CONV2D, &a, table.data(), 3),
            MCL_NATIVE_ERR_BAD_SIZE);
  EXPECT_EQ(mcl_native_plan_conv(MCL_NATIVE_FN_POOL2D, &a, table.data(), table.size()),
            MCL_NATIVE_ERR_BAD_ARGS);
}

TEST(NativeConvTable, CheckedModeRejectsCorruptTable) {
  Spm spm;
  mcl_conv_args a{};
  a.input = place_tile(spm, 4, 4, 8, MCL_DTYPE_F32, 0, 0, 0);
  a.output = place_tile(spm, 4, 4, 8, MCL_DTYPE_F32, 0, 0, 0);
  a.groups = 1;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
  a.origin_y = a.origin_x = -1;
  a.pad_row_offset = spm.alloc(8 * 4);
  const size_t n = mcl_native_conv_table_size(&a);
  a.table_offset = spm.alloc(n * 4);
  ASSERT_EQ(mcl_native_plan_conv(MCL_NATIVE_FN_CONV2D, &a, spm.at<int32_t>(a.table_offset), n),
            MCL_NATIVE_OK);
  const size_t ps = mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &a);
  a.params_offset = spm.alloc(ps);
  std::vector<float> w(8 * 8 * 9, 0.5f);
  ASSERT_EQ(mcl_native_pack_conv(MCL_NATIVE_FN_CONV2D, &a, w.data(), nullptr, nullptr,
                                 spm.base() + a.params_offset, ps),
            MCL_NATIVE_OK);
  spm.exec().flags = MCL_NATIVE_EXEC_CHECKED;
  spm.run(MCL_NATIVE_FN_CONV2D, a);             // a good table passes the check
  spm.at<int32_t>(a.table_offset)[5] = 1 << 30; // far outside the SPM
  char msg[256];
  EXPECT_EQ(mcl_native_run(&spm.exec(), MCL_NATIVE_FN_CONV2D, &a, sizeof a, msg, sizeof msg),
            MCL_NATIVE_ERR_BAD_TABLE);
  EXPECT_NE(std::string(msg).find("table"), std::string::npos);
}

} // namespace
