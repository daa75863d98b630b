// Internal declarations shared by the native compute function sources.
#pragma once

#include "manycl/native/native.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace manycl::native {

// Result of an internal step: ok, or a status code with a message. Never thrown.
struct Status {
  int code = MCL_NATIVE_OK;
  std::string message;
  bool ok() const { return code == MCL_NATIVE_OK; }
  static Status Ok() { return {}; }
  static Status Error(int code, std::string message) { return {code, std::move(message)}; }
};

// Columns of the packed weight panels: fixed by the parameter format so a compiled program
// runs unchanged on every host ISA.
inline constexpr int kPanelWidth = 16;

// ---- IEEE binary16 <-> binary32, portable, round-to-nearest-even ----
static inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
    return (uint16_t)(sign | 0x7c00u);
  if (absx < 0x38800000u) { // result is subnormal or zero
    if (absx < 0x33000000u)
      return (uint16_t)sign;
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(E-150); in units of the half subnormal step 2^-24: mant >> (126-E)
    int shift = 126 - (int)(absx >> 23);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t midpoint = 1u << (shift - 1);
    if (rem > midpoint || (rem == midpoint && (half & 1u)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((absx >> 13) - ((127u - 15u) << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
    ++half;
  return (uint16_t)(sign | half);
}

static inline uint32_t dtype_size(uint32_t dtype) {
  switch (dtype) {
  case MCL_DTYPE_F32:
  case MCL_DTYPE_S32:
    return 4;
  case MCL_DTYPE_F16:
    return 2;
  case MCL_DTYPE_S8:
  case MCL_DTYPE_U8:
    return 1;
  default:
    return 0;
  }
}
static inline bool is_int8(uint32_t dtype) {
  return dtype == MCL_DTYPE_S8 || dtype == MCL_DTYPE_U8;
}
static inline int32_t qmin(uint32_t dtype) {
  return dtype == MCL_DTYPE_U8 ? 0 : -128;
}
static inline int32_t qmax(uint32_t dtype) {
  return dtype == MCL_DTYPE_U8 ? 255 : 127;
}

// std::nearbyint in the default rounding mode (to nearest, ties to even), without the libm
// call that the baseline ISA makes of it (no SSE4.1 ROUNDSS): below 2^22, adding and
// subtracting 1.5 * 2^23 rounds to an integer at unit precision, exactly.
static inline float round_half_even(float r) {
  constexpr float kShift = 12582912.0f; // 1.5 * 2^23
  if (!(std::fabs(r) < 4194304.0f))     // large, infinite or NaN
    return std::nearbyint(r);
  return (r + kShift) - kShift;
}

// QuantizeLinear: saturate(round_half_even(v / scale) + zero_point). NaN maps to the low end
// so garbage data never triggers undefined float->int conversions.
static inline int32_t quantize(float v, const mcl_quant &q, uint32_t dtype) {
  float r = v / q.scale;
  float lo = (float)(qmin(dtype) - q.zero_point), hi = (float)(qmax(dtype) - q.zero_point);
  r = r > lo ? r : lo;
  r = r < hi ? r : hi;
  return (int32_t)round_half_even(r) + q.zero_point;
}
static inline float dequantize(int32_t q, const mcl_quant &p) {
  return (float)(q - p.zero_point) * p.scale;
}

static inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

static inline float apply_activation(const mcl_activation &a, float x) {
  switch (a.kind) {
  case MCL_ACT_RELU:
    return x > 0.0f ? x : 0.0f;
  case MCL_ACT_CLIP:
    return std::min(std::max(x, a.alpha), a.beta);
  case MCL_ACT_LEAKY_RELU:
    return x < 0.0f ? a.alpha * x : x;
  case MCL_ACT_SIGMOID:
    return sigmoid(x);
  case MCL_ACT_SILU:
    return x * sigmoid(x);
  case MCL_ACT_HARD_SIGMOID:
    return std::max(0.0f, std::min(1.0f, a.alpha * x + a.beta));
  case MCL_ACT_HARD_SWISH:
    return x * std::max(0.0f, std::min(1.0f, x * (1.0f / 6.0f) + 0.5f));
  case MCL_ACT_TANH:
    return std::tanh(x);
  case MCL_ACT_MISH:
    return x * std::tanh(std::log1p(std::exp(x)));
  default:
    return x;
  }
}

// ---- convolution jobs: everything resolved to pointers, shared by all ISA kernels ----
// The input pixel each output pixel and tap reads, when the address table is derived from it
// (no table stored with the parameters): kernels may address the pixels away from the
// padding from it instead of reading the table. Element offsets relative to ConvJob::in.
struct ConvGeometry {
  int64_t kernel_h, kernel_w, stride_h, stride_w, dilation_h, dilation_w;
  int64_t origin_y, origin_x, in_h, in_w, row_stride, pixel_stride;
};
inline constexpr uint32_t kMaxGeometryTaps = 64;

struct ConvJob {
  uint32_t in_dtype = 0, out_dtype = 0;
  const uint8_t *in = nullptr; // input.offset
  // Binary16 input widened by run_conv: `in` points at floats (tile and pad row), the table
  // addresses them; weights and output stay binary16.
  bool in_widened = false;
  const int32_t *table = nullptr;         // [m][taps] element offsets relative to `in`
  const ConvGeometry *geometry = nullptr; // non-null when the table follows it (convolutions)
  uint8_t *out = nullptr;
  int64_t out_row_stride = 0, out_pixel_stride = 0; // elements
  uint32_t out_w = 0;
  uint32_t m = 0, taps = 0, cin_g = 0, cout_g = 0, groups = 0;
  bool depthwise = false;
  // packed parameters
  const uint8_t *weights = nullptr;   // see pack layout in conv.cpp
  uint64_t weights_group_stride = 0;  // bytes between groups
  const void *bias = nullptr;         // float or int32, [groups][nblocks*16] (depthwise: [Cp])
  const float *multipliers = nullptr; // INT8
  const int32_t *weight_zero_points = nullptr; // INT8 with MCL_CONV_WEIGHT_ZERO_POINTS
  mcl_activation act{};
  // MCL_CONV_RESIDUAL (float): a tile of the output's type added before the activation.
  const uint8_t *residual = nullptr;
  int64_t res_row_stride = 0, res_pixel_stride = 0; // elements
  int32_t in_zp = 0, out_zp = 0, out_min = 0, out_max = 0;
  uint32_t nblocks = 0;         // ceil(cout_g / 16)
  uint32_t channels_padded = 0; // depthwise: round_up(C, 16)
};

// Half-open work range of a convolution task.
struct ConvRange {
  uint32_t group, m_begin, m_end, nb_begin, nb_end;
  int32_t *scratch; // INT8 packed rows of A: kMaxRows * int8_row_scratch_words() words
  float *acc;       // FP32/FP16 packing rows (else null): (nbs) x (m rows + kMaxRows) x 16 sums
  float *apack;     // FP32/FP16 with large K: kMaxRows x kPackK row values of one K-chunk
};
inline constexpr int kMaxRows = 16;     // largest register block (rows) of any ISA
inline constexpr uint32_t kPackK = 256; // K-chunk of a large-K convolution
// Float convolutions whose register block's rows of A would not stay in L1 (K = taps x
// channels large) are computed in K-chunks with those rows packed per chunk. (A few input
// channels over many taps, a CNN's first layer, run directly over the taps' contiguous runs
// instead: tap_runs in kernels_impl.h.)
inline bool conv_float_packs_rows(uint32_t taps, uint32_t cin_g) {
  return (uint64_t)taps * cin_g > 448;
}
// Panels per task (at least) that reuse a K-chunk's packed rows.
inline constexpr uint32_t kPackedPanels = 4;

// Requantizing INT8 addition of two rows (element-wise ADD on U8 / S8 with a clamp
// activation): out = quantize(clamp(dequantize(a) + dequantize(b))), every step in FP32 as the
// scalar element-wise path computes it, so every ISA gives the same bytes.
struct Int8AddJob {
  const uint8_t *a, *b; // U8 or S8 elements (the bytes)
  uint8_t *out;
  uint32_t n;
  bool is_signed;
  float a_scale, b_scale, out_scale;
  int32_t a_zero, b_zero, out_zero;
  float act_lo, act_hi; // the activation's clamp on the float sum (ReLU, Clip, or none)
  float q_lo, q_hi;     // qmin - out_zero, qmax - out_zero
};

// Keeps a product from being contracted with the following sum into one FMA: the reference
// rounds both.
static inline float rounded(float v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#endif
  return v;
}

static inline uint8_t int8_add_one(const Int8AddJob &j, uint32_t i) {
  const int32_t qa = j.is_signed ? (int32_t)(int8_t)j.a[i] : (int32_t)j.a[i];
  const int32_t qb = j.is_signed ? (int32_t)(int8_t)j.b[i] : (int32_t)j.b[i];
  float v =
      rounded((float)(qa - j.a_zero) * j.a_scale) + rounded((float)(qb - j.b_zero) * j.b_scale);
  v = v > j.act_lo ? v : j.act_lo;
  v = v < j.act_hi ? v : j.act_hi;
  float r = v / j.out_scale;
  r = r > j.q_lo ? r : j.q_lo;
  r = r < j.q_hi ? r : j.q_hi;
  return (uint8_t)((int32_t)round_half_even(r) + j.out_zero);
}

struct WinogradJob;   // winograd.h
struct WinogradRange; // winograd.h

// Hot loops, one implementation per ISA translation unit.
struct IsaKernels {
  const char *name;
  int rows;                                               // register block rows (MR)
  void (*conv_float)(const ConvJob &, const ConvRange &); // F32 and F16 inputs
  void (*depthwise)(const ConvJob &, const ConvRange &);  // all types
  // Winograd F(4x4, 3x3) (winograd_impl.h), F32 and F16
  void (*winograd)(const WinogradJob &, const WinogradRange &);
  // G g G^T of every chunk of one panel (the layout of WinogradRange::transformed).
  void (*winograd_weights)(const WinogradJob &, uint32_t panel, float *dst);
  void (*int8_add)(const Int8AddJob &); // requantizing INT8 add of rows
  // Rows of binary16 <-> float (round to nearest even), for the element-wise paths.
  void (*widen_halves)(const uint16_t *, uint32_t n, float *);
  void (*narrow_halves)(const float *, uint32_t n, uint16_t *);
  // acc[i] = std::max(acc[i], float(p[i])) for a row of binary16 (max pooling).
  void (*max_halves)(const uint16_t *p, uint32_t n, float *acc);
  // One output pixel of float pooling over `n` input pixels of C contiguous channels: the
  // maximum, or the sum in pixel order divided by `divisor`.
  void (*pool_floats)(const float *const *pixels, uint32_t n, uint32_t C, bool is_max,
                      float divisor, float *out);
  // The same over binary16 pixels: float arithmetic, the result rounded to nearest even.
  void (*pool_halves)(const uint16_t *const *pixels, uint32_t n, uint32_t C, bool is_max,
                      float divisor, uint16_t *out);
};

const IsaKernels &generic_kernels();
const IsaKernels *avx2_kernels();   // nullptr when not compiled in
const IsaKernels *avx512_kernels(); // nullptr when not compiled in
const IsaKernels &active_kernels();

// Pointer to element (y, x, ch) of a tile.
static inline uint8_t *tile_ptr(uint8_t *spm, const mcl_tile &t, uint64_t y, uint64_t x,
                                uint64_t ch) {
  return spm + t.offset +
         (y * t.row_stride + x * t.pixel_stride + ch * t.channel_stride) * dtype_size(t.dtype);
}

// PE-private float scratch of at least `floats` (host threads stand in for PEs): kept per
// thread and grown, never shrunk; a task uses it only while it runs.
inline std::vector<float> &float_scratch_for_this_thread(size_t floats) {
  static thread_local std::vector<float> buffer;
  if (buffer.size() < floats)
    buffer.resize(floats);
  return buffer;
}

// Runs body(i) for i in [0, n) through the exec context.
template <class F> void parallel_for(const mcl_native_exec &exec, uint32_t n, F &&body) {
  if (n == 0)
    return;
  if (!exec.parallel_for || n == 1 || exec.pe_count <= 1) {
    for (uint32_t i = 0; i < n; ++i)
      body(i);
    return;
  }
  auto trampoline = [](void *arg, uint32_t index, uint32_t) { (*static_cast<F *>(arg))(index); };
  exec.parallel_for(exec.user, n, trampoline, &body);
}

// Operator entry points (arguments already validated).
Status run_conv(const mcl_native_exec &exec, uint32_t fn, const mcl_conv_args &a);
Status run_gemm(const mcl_native_exec &exec, const mcl_gemm_args &a);
Status run_matmul(const mcl_native_exec &exec, const mcl_matmul_args &a);
Status run_pool(const mcl_native_exec &exec, const mcl_pool_args &a);
Status run_eltwise(const mcl_native_exec &exec, const mcl_eltwise_args &a);
Status run_scale_shift(const mcl_native_exec &exec, const mcl_scale_shift_args &a);
Status run_unary(const mcl_native_exec &exec, uint32_t fn, const mcl_unary_args &a);
Status run_resize(const mcl_native_exec &exec, const mcl_resize_args &a);
Status run_pad(const mcl_native_exec &exec, const mcl_pad_args &a);

// The SPM ranges a call's arguments name (collected by validate).
struct OperandRecorder {
  struct Range {
    uint64_t offset, bytes;
    uint32_t kind; // mcl_native_operand_kind
  };
  static constexpr uint32_t kMax = 16; // more than any function names
  Range ranges[kMax];
  uint32_t count = 0;
  bool overflow = false; // then the hook is told the whole SPM is an operand
  void add(uint64_t offset, uint64_t bytes, uint32_t kind) {
    if (count < kMax)
      ranges[count++] = {offset, bytes, kind};
    else
      overflow = true;
  }
};
Status validate(uint32_t fn, const void *args, size_t size, uint64_t spm_size,
                OperandRecorder *record = nullptr);

// A function's parameter block: from exec.params_view when the block lies inside it (a
// deferred copy's source), else from the SPM.
inline const uint8_t *params_at(const mcl_native_exec &exec, uint64_t offset, uint64_t bytes) {
  if (exec.params_view && offset >= exec.params_view_offset && bytes <= exec.params_view_size &&
      offset - exec.params_view_offset <= exec.params_view_size - bytes)
    return exec.params_view + (offset - exec.params_view_offset);
  return exec.spm_base + offset;
}
bool conv_is_depthwise(const mcl_conv_args &a);
uint64_t conv_params_size(uint32_t fn, const mcl_conv_args &a);
mcl_conv_args gemm_as_conv(const mcl_gemm_args &g);

} // namespace manycl::native
