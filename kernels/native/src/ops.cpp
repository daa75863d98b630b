// Pooling, element-wise, per-channel scale, activations, softmax, resize, copy/convert, pad
// and MatMul. These are bandwidth-bound: plain loops over the contiguous channel axis, one
// instantiation per element type, rows split over the PEs.
#include "cost_model.h"
#include "internal.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace manycl::native {

namespace {

struct half_t {
  uint16_t bits;
};

// Element <-> float conversion; INT8 types (de)quantize with q.
inline float to_f(float v, const mcl_quant &) {
  return v;
}
inline float to_f(half_t v, const mcl_quant &) {
  return half_to_float(v.bits);
}
inline float to_f(int8_t v, const mcl_quant &q) {
  return dequantize(v, q);
}
inline float to_f(uint8_t v, const mcl_quant &q) {
  return dequantize(v, q);
}
inline void from_f(float &d, float v, const mcl_quant &) {
  d = v;
}
inline void from_f(half_t &d, float v, const mcl_quant &) {
  d.bits = float_to_half(v);
}
inline void from_f(int8_t &d, float v, const mcl_quant &q) {
  d = (int8_t)quantize(v, q, MCL_DTYPE_S8);
}
inline void from_f(uint8_t &d, float v, const mcl_quant &q) {
  d = (uint8_t)quantize(v, q, MCL_DTYPE_U8);
}

// Calls f(T{}) with the C++ type of a dtype.
template <class F> void with_type(uint32_t dtype, F &&f) {
  switch (dtype) {
  case MCL_DTYPE_F32:
    return f(float{});
  case MCL_DTYPE_F16:
    return f(half_t{});
  case MCL_DTYPE_S8:
    return f(int8_t{});
  case MCL_DTYPE_U8:
    return f(uint8_t{});
  default:
    return;
  }
}

template <class T> T *elem(uint8_t *spm, const mcl_tile &t, uint64_t y, uint64_t x) {
  return reinterpret_cast<T *>(tile_ptr(spm, t, y, x, 0));
}

// Activation with the clamp-like kinds as min/max.
struct Act {
  mcl_activation a;
  float lo = -INFINITY, hi = INFINITY;
  bool general = false;
  explicit Act(const mcl_activation &act) : a(act) {
    if (act.kind == MCL_ACT_RELU)
      lo = 0.0f;
    else if (act.kind == MCL_ACT_CLIP)
      lo = act.alpha, hi = act.beta;
    else if (act.kind != MCL_ACT_NONE)
      general = true;
  }
  float operator()(float v) const {
    if (general)
      return apply_activation(a, v);
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
  }
};

uint32_t row_chunks(const mcl_native_exec &exec, uint32_t rows) {
  return std::min<uint32_t>(rows, std::max<uint32_t>(1, exec.pe_count) * 2);
}

// Splits [0, rows) into `chunks` parts and runs body(y_begin, y_end) for each in parallel.
template <class F> void parallel_rows(const mcl_native_exec &exec, uint32_t rows, F &&body) {
  const uint32_t chunks = row_chunks(exec, rows);
  parallel_for(exec, chunks, [&](uint32_t i) {
    const uint32_t y0 = (uint32_t)((uint64_t)rows * i / chunks);
    const uint32_t y1 = (uint32_t)((uint64_t)rows * (i + 1) / chunks);
    body(y0, y1);
  });
}

} // namespace

// acc[c] = max(acc[c], p[c] ^ flip): restrict pointers and a local count, so that the byte
// stores cannot alias the count and the loop vectorizes (as a lambda's captures, the count
// was reloaded after every store: one byte per iteration, 3 ms of an INT8 SqueezeNet).
[[gnu::noinline]] static void max_bytes(const uint8_t *__restrict p, uint8_t *__restrict acc,
                                        uint32_t n, uint8_t flip) {
  for (uint32_t c = 0; c < n; ++c)
    acc[c] = std::max<uint8_t>(acc[c], (uint8_t)(p[c] ^ flip));
}

[[gnu::noinline]] static void flip_bytes(const uint8_t *__restrict p, uint8_t *__restrict out,
                                         uint32_t n, uint8_t flip) {
  for (uint32_t c = 0; c < n; ++c)
    out[c] = (uint8_t)(p[c] ^ flip);
}

// INT8 max pooling with the same quantization in and out: dequantizing is increasing and
// requantizing the maximum gives its byte back (|q - zp| <= 255, so the float round trip errs
// by far less than half a step), so the maximum of the bytes is the result, without a float
// step per element. Signed bytes are compared as unsigned with the sign bit flipped, which
// keeps their order and lets the compiler use byte-wise vector maxima.
template <class T> bool int8_max_pool_raw(const mcl_native_exec &exec, const mcl_pool_args &a) {
  const float s = a.in_quant.scale;
  if (a.kind != MCL_POOL_MAX || a.input.channel_stride != 1 || a.output.channel_stride != 1 ||
      a.in_quant.scale != a.out_quant.scale || a.in_quant.zero_point != a.out_quant.zero_point ||
      !(s >= 1e-30f && s <= 1e30f))
    return false;
  uint8_t *spm = exec.spm_base;
  const uint32_t C = a.output.c;
  const uint8_t flip = std::is_same_v<T, int8_t> ? 0x80 : 0x00;
  T empty; // a window with no input pixel yields quantize(0), as the float path
  from_f(empty, 0.0f, a.out_quant);
  parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
    std::vector<uint8_t> acc(C);
    for (uint32_t oy = y0; oy < y1; ++oy)
      for (uint32_t ox = 0; ox < a.output.w; ++ox) {
        const int64_t by = a.origin_y + (int64_t)oy * a.stride_h;
        const int64_t bx = a.origin_x + (int64_t)ox * a.stride_w;
        bool inside = false;
        std::fill(acc.begin(), acc.end(), (uint8_t)0);
        for (uint32_t ky = 0; ky < a.kernel_h; ++ky) {
          const int64_t iy = by + (int64_t)ky * a.dilation_h;
          if (iy < 0 || iy >= a.input.h)
            continue;
          for (uint32_t kx = 0; kx < a.kernel_w; ++kx) {
            const int64_t ix = bx + (int64_t)kx * a.dilation_w;
            if (ix < 0 || ix >= a.input.w)
              continue;
            inside = true;
            max_bytes(reinterpret_cast<const uint8_t *>(elem<T>(spm, a.input, iy, ix)), acc.data(),
                      C, flip);
          }
        }
        uint8_t *o = reinterpret_cast<uint8_t *>(elem<T>(spm, a.output, oy, ox));
        if (!inside) {
          std::fill(o, o + C, (uint8_t)empty);
        } else {
          flip_bytes(acc.data(), o, C, flip);
        }
      }
  });
  return true;
}

namespace {
// The window of output pixel (oy, ox): calls visit(iy, ix) for each of its pixels inside the
// input tile, in window order, and returns how many of its pixels the count region holds
// (the average's divisor).
template <class Visit>
uint32_t visit_window(const mcl_pool_args &a, uint32_t oy, uint32_t ox, Visit &&visit) {
  const int64_t by = a.origin_y + (int64_t)oy * a.stride_h;
  const int64_t bx = a.origin_x + (int64_t)ox * a.stride_w;
  uint32_t counted = 0;
  for (uint32_t ky = 0; ky < a.kernel_h; ++ky) {
    const int64_t iy = by + (int64_t)ky * a.dilation_h;
    for (uint32_t kx = 0; kx < a.kernel_w; ++kx) {
      const int64_t ix = bx + (int64_t)kx * a.dilation_w;
      if (iy >= a.count_y0 && iy < a.count_y1 && ix >= a.count_x0 && ix < a.count_x1)
        ++counted;
      if (iy < 0 || ix < 0 || iy >= a.input.h || ix >= a.input.w)
        continue;
      visit((uint32_t)iy, (uint32_t)ix);
    }
  }
  return counted;
}
} // namespace

Status run_pool(const mcl_native_exec &exec, const mcl_pool_args &a) {
  uint8_t *spm = exec.spm_base;
  const uint32_t C = a.output.c;
  with_type(a.input.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kInt8 = std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;
    // Contiguous binary16 rows are widened and narrowed by the ISA's vector conversions.
    constexpr bool kHalf = std::is_same_v<T, half_t>;
    const IsaKernels &isa = active_kernels();
    const bool half_rows = kHalf && a.input.channel_stride == 1 && a.output.channel_stride == 1;
    if constexpr (kInt8) {
      if (int8_max_pool_raw<T>(exec, a))
        return;
    }
    // Float tiles with contiguous channels: the ISA's pooling of one output pixel over the
    // window's pixels (pool_floats), the same sums in the same order.
    // Binary16 the same way (pool_halves), widened at load and rounded once at the store.
    constexpr uint32_t kMaxWindow = 256;
    const bool pixel_kernel = (std::is_same_v<T, float> || kHalf) && a.input.channel_stride == 1 &&
                              a.output.channel_stride == 1 &&
                              (uint64_t)a.kernel_h * a.kernel_w <= kMaxWindow;
    if (pixel_kernel) {
      using E = std::conditional_t<kHalf, uint16_t, float>; // the elements' bits
      parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
        const E *pixels[kMaxWindow];
        const bool is_max = a.kind == MCL_POOL_MAX;
        for (uint32_t oy = y0; oy < y1; ++oy)
          for (uint32_t ox = 0; ox < a.output.w; ++ox) {
            uint32_t inside = 0;
            const uint32_t counted = visit_window(a, oy, ox, [&](uint32_t iy, uint32_t ix) {
              pixels[inside++] = reinterpret_cast<const E *>(elem<T>(spm, a.input, iy, ix));
            });
            E *o = reinterpret_cast<E *>(elem<T>(spm, a.output, oy, ox));
            const float divisor = (float)std::max<uint32_t>(counted, 1);
            if (is_max && inside == 0) // a window with no input pixel yields 0 (+0 bits)
              std::fill_n(o, C, E{});
            else if constexpr (kHalf)
              isa.pool_halves(pixels, inside, C, is_max, divisor, o);
            else
              isa.pool_floats(pixels, inside, C, is_max, divisor, o);
          }
      });
      return;
    }
    parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
      std::vector<float> accf(C), row(half_rows ? C : 0);
      std::vector<int32_t> acci(C);
      for (uint32_t oy = y0; oy < y1; ++oy)
        for (uint32_t ox = 0; ox < a.output.w; ++ox) {
          uint32_t inside = 0;
          const bool is_max = a.kind == MCL_POOL_MAX;
          std::fill(accf.begin(), accf.end(), is_max ? -INFINITY : 0.0f);
          std::fill(acci.begin(), acci.end(), 0);
          const uint32_t counted = visit_window(a, oy, ox, [&](uint32_t iy, uint32_t ix) {
            ++inside;
            const T *p = elem<T>(spm, a.input, iy, ix);
            const uint32_t cs = a.input.channel_stride;
            if (half_rows && is_max) {
              isa.max_halves(reinterpret_cast<const uint16_t *>(p), C, accf.data());
            } else if (half_rows) {
              isa.widen_halves(reinterpret_cast<const uint16_t *>(p), C, row.data());
              if (is_max)
                for (uint32_t c = 0; c < C; ++c)
                  accf[c] = std::max(accf[c], row[c]);
              else
                for (uint32_t c = 0; c < C; ++c)
                  accf[c] += row[c];
            } else if (std::is_same_v<T, float> && cs == 1) {
              // Contiguous float channels: unit-stride loops the compiler vectorizes.
              const float *pf = reinterpret_cast<const float *>(p);
              if (is_max)
                for (uint32_t c = 0; c < C; ++c)
                  accf[c] = std::max(accf[c], pf[c]);
              else
                for (uint32_t c = 0; c < C; ++c)
                  accf[c] += pf[c];
            } else if (is_max) {
              for (uint32_t c = 0; c < C; ++c)
                accf[c] = std::max(accf[c], to_f(p[c * cs], a.in_quant));
            } else if constexpr (kInt8) {
              for (uint32_t c = 0; c < C; ++c)
                acci[c] += (int32_t)p[c * cs] - a.in_quant.zero_point;
            } else {
              for (uint32_t c = 0; c < C; ++c)
                accf[c] += to_f(p[c * cs], a.in_quant);
            }
          });
          T *o = elem<T>(spm, a.output, oy, ox);
          if (half_rows) {
            const float divisor = (float)std::max<uint32_t>(counted, 1);
            for (uint32_t c = 0; c < C; ++c) // a max window with no input pixel yields 0
              accf[c] = is_max ? (inside ? accf[c] : 0.0f) : accf[c] / divisor;
            isa.narrow_halves(accf.data(), C, reinterpret_cast<uint16_t *>(o));
          } else if (is_max) {
            for (uint32_t c = 0; c < C; ++c) // a window with no input pixel yields 0
              from_f(o[c], inside ? accf[c] : 0.0f, a.out_quant);
          } else {
            const float divisor = (float)std::max<uint32_t>(counted, 1);
            for (uint32_t c = 0; c < C; ++c) {
              float v;
              if constexpr (kInt8)
                v = (float)acci[c] * a.in_quant.scale / divisor;
              else
                v = accf[c] / divisor;
              from_f(o[c], v, a.out_quant);
            }
          }
        }
    });
  });
  return Status::Ok();
}

namespace {
template <uint32_t Op> inline float binary(float x, float y) {
  if constexpr (Op == MCL_ELTWISE_ADD)
    return x + y;
  else if constexpr (Op == MCL_ELTWISE_SUB)
    return x - y;
  else if constexpr (Op == MCL_ELTWISE_MUL)
    return x * y;
  else if constexpr (Op == MCL_ELTWISE_DIV)
    return x / y;
  else if constexpr (Op == MCL_ELTWISE_MAX)
    return std::max(x, y);
  else
    return std::min(x, y);
}

// INT8 ADD with contiguous channels and a clamp activation (residual additions of quantized
// networks): the ISA's requantizing row kernel, over whole rows when pixels are dense.
template <class T>
bool int8_add_rows(const mcl_native_exec &exec, const mcl_eltwise_args &a, const Act &act) {
  const bool clamp_act =
      a.act.kind == MCL_ACT_NONE || a.act.kind == MCL_ACT_RELU || a.act.kind == MCL_ACT_CLIP;
  if (!clamp_act || a.a.channel_stride != 1 || a.b.channel_stride != 1 ||
      a.output.channel_stride != 1)
    return false;
  const uint32_t C = a.output.c;
  const bool dense = a.a.pixel_stride == C && a.b.pixel_stride == C && a.output.pixel_stride == C;
  Int8AddJob proto{};
  proto.is_signed = a.output.dtype == MCL_DTYPE_S8;
  proto.a_scale = a.a_quant.scale, proto.a_zero = a.a_quant.zero_point;
  proto.b_scale = a.b_quant.scale, proto.b_zero = a.b_quant.zero_point;
  proto.out_scale = a.out_quant.scale, proto.out_zero = a.out_quant.zero_point;
  proto.act_lo = act.lo, proto.act_hi = act.hi;
  proto.q_lo = (float)(qmin(a.output.dtype) - a.out_quant.zero_point);
  proto.q_hi = (float)(qmax(a.output.dtype) - a.out_quant.zero_point);
  const IsaKernels &isa = active_kernels();
  uint8_t *spm = exec.spm_base;
  parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
    for (uint32_t y = y0; y < y1; ++y)
      for (uint32_t x = 0; x < (dense ? 1 : a.output.w); ++x) {
        Int8AddJob j = proto;
        j.a = reinterpret_cast<const uint8_t *>(elem<T>(spm, a.a, y, x));
        j.b = reinterpret_cast<const uint8_t *>(elem<T>(spm, a.b, y, x));
        j.out = reinterpret_cast<uint8_t *>(elem<T>(spm, a.output, y, x));
        j.n = dense ? C * a.output.w : C;
        isa.int8_add(j);
      }
  });
  return true;
}

template <uint32_t Op, class T>
void eltwise_typed(const mcl_native_exec &exec, const mcl_eltwise_args &a) {
  uint8_t *spm = exec.spm_base;
  const Act act(a.act);
  if constexpr (Op == MCL_ELTWISE_ADD && (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>))
    if (int8_add_rows<T>(exec, a, act))
      return;
  if constexpr (std::is_same_v<T, half_t>) {
    // Contiguous binary16 channels: widened and narrowed by the ISA's vector conversions
    // (the same rounding as float_to_half), the arithmetic in float vectors between.
    if (a.a.channel_stride == 1 && a.b.channel_stride == 1 && a.output.channel_stride == 1) {
      const IsaKernels &isa = active_kernels();
      const uint32_t C = a.output.c;
      parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
        std::vector<float> xa(C), xb(C);
        std::vector<uint16_t> out(C);
        for (uint32_t y = y0; y < y1; ++y)
          for (uint32_t x = 0; x < a.output.w; ++x) {
            isa.widen_halves(reinterpret_cast<const uint16_t *>(elem<T>(spm, a.a, y, x)), C,
                             xa.data());
            isa.widen_halves(reinterpret_cast<const uint16_t *>(elem<T>(spm, a.b, y, x)), C,
                             xb.data());
            for (uint32_t c = 0; c < C; ++c)
              xa[c] = act(binary<Op>(xa[c], xb[c]));
            // Through a buffer: the output may alias an input (in-place residual additions).
            isa.narrow_halves(xa.data(), C, out.data());
            std::memcpy(elem<T>(spm, a.output, y, x), out.data(), C * sizeof(uint16_t));
          }
      });
      return;
    }
  }
  parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
    for (uint32_t y = y0; y < y1; ++y)
      for (uint32_t x = 0; x < a.output.w; ++x) {
        const T *pa = elem<T>(spm, a.a, y, x), *pb = elem<T>(spm, a.b, y, x);
        T *po = elem<T>(spm, a.output, y, x);
        const uint32_t as = a.a.channel_stride, bs = a.b.channel_stride;
        if (as == 1 && bs == 1) {
          for (uint32_t c = 0; c < a.output.c; ++c)
            from_f(po[c], act(binary<Op>(to_f(pa[c], a.a_quant), to_f(pb[c], a.b_quant))),
                   a.out_quant);
        } else {
          for (uint32_t c = 0; c < a.output.c; ++c)
            from_f(po[c], act(binary<Op>(to_f(pa[c * as], a.a_quant), to_f(pb[c * bs], a.b_quant))),
                   a.out_quant);
        }
      }
  });
}

template <class T> void eltwise_dispatch(const mcl_native_exec &exec, const mcl_eltwise_args &a) {
  switch (a.op) {
  case MCL_ELTWISE_ADD:
    return eltwise_typed<MCL_ELTWISE_ADD, T>(exec, a);
  case MCL_ELTWISE_SUB:
    return eltwise_typed<MCL_ELTWISE_SUB, T>(exec, a);
  case MCL_ELTWISE_MUL:
    return eltwise_typed<MCL_ELTWISE_MUL, T>(exec, a);
  case MCL_ELTWISE_DIV:
    return eltwise_typed<MCL_ELTWISE_DIV, T>(exec, a);
  case MCL_ELTWISE_MAX:
    return eltwise_typed<MCL_ELTWISE_MAX, T>(exec, a);
  default:
    return eltwise_typed<MCL_ELTWISE_MIN, T>(exec, a);
  }
}
} // namespace

Status run_eltwise(const mcl_native_exec &exec, const mcl_eltwise_args &a) {
  with_type(a.output.dtype, [&](auto tag) { eltwise_dispatch<decltype(tag)>(exec, a); });
  return Status::Ok();
}

Status run_scale_shift(const mcl_native_exec &exec, const mcl_scale_shift_args &a) {
  uint8_t *spm = exec.spm_base;
  const float *scale =
      reinterpret_cast<const float *>(params_at(exec, a.params_offset, (uint64_t)a.input.c * 8));
  const float *shift = scale + a.input.c;
  const Act act(a.act);
  with_type(a.input.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
      for (uint32_t y = y0; y < y1; ++y)
        for (uint32_t x = 0; x < a.output.w; ++x) {
          const T *p = elem<T>(spm, a.input, y, x);
          T *o = elem<T>(spm, a.output, y, x);
          for (uint32_t c = 0; c < a.output.c; ++c)
            from_f(o[c], act(to_f(p[c], a.in_quant) * scale[c] + shift[c]), a.out_quant);
        }
    });
  });
  return Status::Ok();
}

// out[x * out_step] = quantize(in[x * in_step]) for x < n (from_f's steps, so its bytes).
[[gnu::noinline]] static void quantize_run(const float *__restrict in, uint64_t in_step,
                                           uint8_t *__restrict out, uint64_t out_step, uint32_t n,
                                           mcl_quant q, uint32_t dtype) {
  for (uint32_t x = 0; x < n; ++x)
    out[x * out_step] = (uint8_t)quantize(in[x * in_step], q, dtype);
}

// out[x * out_step] = table[in[x * in_step]] for x < n. Not restrict: an activation may run
// in place (each byte is read before it is written); the local count and steps keep the
// stores from reloading them.
[[gnu::noinline]] static void lut_run(const uint8_t *in, uint64_t in_step, uint8_t *out,
                                      uint64_t out_step, uint64_t n, const uint8_t *table) {
  for (uint64_t x = 0; x < n; ++x)
    out[x * out_step] = table[in[x * in_step]];
}

Status run_unary(const mcl_native_exec &exec, uint32_t fn, const mcl_unary_args &a) {
  uint8_t *spm = exec.spm_base;
  const uint32_t C = a.output.c;
  with_type(a.input.dtype, [&](auto in_tag) {
    with_type(a.output.dtype, [&](auto out_tag) {
      using TI = decltype(in_tag);
      using TO = decltype(out_tag);
      const Act act(a.act);
      const bool raw_copy =
          fn == MCL_NATIVE_FN_COPY && std::is_same_v<TI, TO> && a.input.channel_stride == 1 &&
          a.output.channel_stride == 1 &&
          (!is_int8(a.input.dtype) || (a.in_quant.scale == a.out_quant.scale &&
                                       a.in_quant.zero_point == a.out_quant.zero_point));
      // Contiguous binary16 in and out: vector conversions (widening reads all of the input
      // row before the narrowed output is written, so in place is fine).
      const bool kHalfRows = std::is_same_v<TI, half_t> && std::is_same_v<TO, half_t> &&
                             a.input.channel_stride == 1 && a.output.channel_stride == 1;
      const IsaKernels &isa = active_kernels();
      // INT8 in and out: the result depends on the byte alone, so a 256-entry table built
      // with the scalar steps gives the same bytes at one lookup per element (activations and
      // requantizing copies of quantized networks).
      constexpr bool kInt8Lut = sizeof(TI) == 1 && sizeof(TO) == 1;
      TO lut[kInt8Lut ? 256 : 1];
      const bool use_lut =
          kInt8Lut && !raw_copy && (fn == MCL_NATIVE_FN_ACTIVATION || fn == MCL_NATIVE_FN_COPY);
      if constexpr (kInt8Lut) {
        if (use_lut)
          for (uint32_t v = 0; v < 256; ++v) {
            const TI q = (TI)(uint8_t)v;
            if (fn == MCL_NATIVE_FN_ACTIVATION)
              from_f(lut[(uint8_t)q], act(to_f(q, a.in_quant)), a.out_quant);
            else
              from_f(lut[(uint8_t)q], to_f(q, a.in_quant), a.out_quant);
          }
      }
      // float <-> binary16 copies of dense rows (a model's float input and output, often of
      // three channels): one conversion call per row, not per pixel.
      constexpr bool kConversion = (std::is_same_v<TI, float> && std::is_same_v<TO, half_t>) ||
                                   (std::is_same_v<TI, half_t> && std::is_same_v<TO, float>);
      auto tile_end = [](const mcl_tile &t) {
        return t.offset + (uint64_t)t.h * t.row_stride * dtype_size(t.dtype);
      };
      const bool apart =
          tile_end(a.input) <= a.output.offset || tile_end(a.output) <= a.input.offset;
      // Rows whose pixels' channels follow each other, in and out: one run per row.
      const bool dense = a.input.channel_stride == 1 && a.output.channel_stride == 1 &&
                         a.input.pixel_stride == C && a.output.pixel_stride == C;
      const bool dense_rows = kConversion && fn == MCL_NATIVE_FN_COPY && apart && dense;
      // Dense INT8 rows in and out, apart or the same tile (an in-place activation).
      const bool lut_rows = dense && (apart || (a.input.offset == a.output.offset &&
                                                a.input.row_stride == a.output.row_stride));
      // float -> INT8 copies (QuantizeLinear: a quantized model's float input, often NCHW):
      // channel by channel along a row, in a helper whose locals cannot alias the byte stores.
      constexpr bool kQuantize = std::is_same_v<TI, float> && sizeof(TO) == 1;
      const bool quantize_rows = kQuantize && fn == MCL_NATIVE_FN_COPY && apart;
      parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
        if constexpr (kInt8Lut) {
          // Dense INT8 rows in and out (an activation between two tiles of the same layout):
          // one table run per row.
          if (use_lut && lut_rows) {
            for (uint32_t y = y0; y < y1; ++y)
              lut_run(reinterpret_cast<const uint8_t *>(elem<TI>(spm, a.input, y, 0)), 1,
                      reinterpret_cast<uint8_t *>(elem<TO>(spm, a.output, y, 0)), 1, a.output.w * C,
                      reinterpret_cast<const uint8_t *>(lut));
            return;
          }
        }
        if (quantize_rows) {
          for (uint32_t y = y0; y < y1; ++y)
            for (uint32_t c = 0; c < C; ++c)
              quantize_run(reinterpret_cast<const float *>(elem<TI>(spm, a.input, y, 0)) +
                               (size_t)c * a.input.channel_stride,
                           a.input.pixel_stride,
                           reinterpret_cast<uint8_t *>(elem<TO>(spm, a.output, y, 0)) +
                               (size_t)c * a.output.channel_stride,
                           a.output.pixel_stride, a.output.w, a.out_quant, a.output.dtype);
          return;
        }
        if (dense_rows) {
          for (uint32_t y = y0; y < y1; ++y) {
            const TI *p = elem<TI>(spm, a.input, y, 0);
            TO *o = elem<TO>(spm, a.output, y, 0);
            if constexpr (std::is_same_v<TI, float> && std::is_same_v<TO, half_t>)
              isa.narrow_halves(reinterpret_cast<const float *>(p), a.output.w * C,
                                reinterpret_cast<uint16_t *>(o));
            else if constexpr (std::is_same_v<TI, half_t> && std::is_same_v<TO, float>)
              isa.widen_halves(reinterpret_cast<const uint16_t *>(p), a.output.w * C,
                               reinterpret_cast<float *>(o));
          }
          return;
        }
        std::vector<float> row(use_lut ? 0 : C);
        for (uint32_t y = y0; y < y1; ++y)
          for (uint32_t x = 0; x < a.output.w; ++x) {
            const TI *p = elem<TI>(spm, a.input, y, x);
            TO *o = elem<TO>(spm, a.output, y, x);
            const uint32_t cs = a.input.channel_stride;
            if (raw_copy) {
              std::memmove(o, p, (size_t)C * sizeof(TO));
            } else if (fn == MCL_NATIVE_FN_COPY && cs == 1 && a.output.channel_stride == 1 &&
                       std::is_same_v<TI, float> && std::is_same_v<TO, half_t>) {
              // float -> binary16 rows (a model's float input): the ISA's conversions, the
              // same rounding as float_to_half.
              isa.narrow_halves(reinterpret_cast<const float *>(p), C,
                                reinterpret_cast<uint16_t *>(o));
            } else if (fn == MCL_NATIVE_FN_COPY && cs == 1 && a.output.channel_stride == 1 &&
                       std::is_same_v<TI, half_t> && std::is_same_v<TO, float>) {
              isa.widen_halves(reinterpret_cast<const uint16_t *>(p), C,
                               reinterpret_cast<float *>(o));
            } else if (use_lut) {
              if constexpr (kInt8Lut) {
                const uint32_t ocs = fn == MCL_NATIVE_FN_COPY ? a.output.channel_stride : 1;
                lut_run(reinterpret_cast<const uint8_t *>(p), cs, reinterpret_cast<uint8_t *>(o),
                        ocs, C, reinterpret_cast<const uint8_t *>(lut));
              }
            } else if (fn == MCL_NATIVE_FN_SOFTMAX) {
              float mx = -INFINITY;
              for (uint32_t c = 0; c < C; ++c) {
                row[c] = to_f(p[c * cs], a.in_quant);
                mx = std::max(mx, row[c]);
              }
              float sum = 0.0f;
              for (uint32_t c = 0; c < C; ++c) {
                row[c] = std::exp(row[c] - mx);
                sum += row[c];
              }
              const float inv = 1.0f / sum;
              for (uint32_t c = 0; c < C; ++c)
                from_f(o[c], row[c] * inv, a.out_quant);
            } else if (fn == MCL_NATIVE_FN_ACTIVATION && kHalfRows) {
              isa.widen_halves(reinterpret_cast<const uint16_t *>(p), C, row.data());
              for (uint32_t c = 0; c < C; ++c)
                row[c] = act(row[c]);
              isa.narrow_halves(row.data(), C, reinterpret_cast<uint16_t *>(o));
            } else if (fn == MCL_NATIVE_FN_ACTIVATION) {
              for (uint32_t c = 0; c < C; ++c)
                from_f(o[c], act(to_f(p[c * cs], a.in_quant)), a.out_quant);
            } else {
              const uint32_t ocs = a.output.channel_stride; // COPY only; else 1
              for (uint32_t c = 0; c < C; ++c)
                from_f(o[c * ocs], to_f(p[c * cs], a.in_quant), a.out_quant);
            }
          }
      });
    });
  });
  return Status::Ok();
}

namespace {
// ONNX Resize: output coordinate -> input coordinate (full-image, before clamping).
float source_coord(uint32_t coord_mode, float out_x, float scale, uint32_t in_len,
                   uint32_t out_len) {
  switch (coord_mode) {
  case MCL_COORD_ASYMMETRIC:
    return out_x / scale;
  case MCL_COORD_ALIGN_CORNERS:
    return out_len == 1 ? 0.0f : out_x * (float)(in_len - 1) / (float)(out_len - 1);
  case MCL_COORD_PYTORCH_HALF_PIXEL:
    return out_len > 1 ? (out_x + 0.5f) / scale - 0.5f : 0.0f;
  default:
    return (out_x + 0.5f) / scale - 0.5f;
  }
}

int64_t nearest_index(uint32_t mode, float x) {
  switch (mode) {
  case MCL_NEAREST_FLOOR:
    return (int64_t)std::floor(x);
  case MCL_NEAREST_CEIL:
    return (int64_t)std::ceil(x);
  case MCL_NEAREST_ROUND_PREFER_CEIL:
    return (int64_t)std::floor(x + 0.5f);
  default: // round_prefer_floor
    return (int64_t)std::ceil(x - 0.5f);
  }
}

// Per output coordinate: two tile-local source indices and the weight of the second.
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w1;
};

Taps axis_taps(const mcl_resize_args &a, bool vertical) {
  const uint32_t out_n = vertical ? a.output.h : a.output.w;
  const uint32_t in_tile = vertical ? a.input.h : a.input.w;
  const uint32_t full_in = vertical ? a.full_in_h : a.full_in_w;
  const uint32_t full_out = vertical ? a.full_out_h : a.full_out_w;
  const int64_t in0 = vertical ? a.in_y0 : a.in_x0, out0 = vertical ? a.out_y0 : a.out_x0;
  const float scale = vertical ? a.scale_h : a.scale_w;
  Taps t;
  t.i0.resize(out_n), t.i1.resize(out_n), t.w1.resize(out_n);
  auto to_tile = [&](int64_t full) {
    full = std::clamp<int64_t>(full, 0, (int64_t)full_in - 1);
    return std::clamp<int64_t>(full - in0, 0, (int64_t)in_tile - 1); // stay inside the tile
  };
  for (uint32_t o = 0; o < out_n; ++o) {
    float x = source_coord(a.coord_mode, (float)(out0 + o), scale, full_in, full_out);
    if (a.mode == MCL_RESIZE_NEAREST) {
      t.i0[o] = t.i1[o] = to_tile(nearest_index(a.nearest_mode, x));
      t.w1[o] = 0.0f;
    } else {
      x = std::clamp(x, 0.0f, (float)full_in - 1.0f);
      const int64_t x0 = (int64_t)std::floor(x);
      t.i0[o] = to_tile(x0);
      t.i1[o] = to_tile(x0 + 1);
      t.w1[o] = x - (float)x0;
    }
  }
  return t;
}
} // namespace

Status run_resize(const mcl_native_exec &exec, const mcl_resize_args &a) {
  uint8_t *spm = exec.spm_base;
  const Taps ty = axis_taps(a, true), tx = axis_taps(a, false);
  const uint32_t C = a.output.c;
  with_type(a.input.dtype, [&](auto tag) {
    using T = decltype(tag);
    parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
      for (uint32_t oy = y0; oy < y1; ++oy)
        for (uint32_t ox = 0; ox < a.output.w; ++ox) {
          T *o = elem<T>(spm, a.output, oy, ox);
          const uint32_t cs = a.input.channel_stride;
          const T *p00 = elem<T>(spm, a.input, ty.i0[oy], tx.i0[ox]);
          if (a.mode == MCL_RESIZE_NEAREST) {
            for (uint32_t c = 0; c < C; ++c)
              from_f(o[c], to_f(p00[c * cs], a.in_quant), a.out_quant);
            continue;
          }
          const T *p01 = elem<T>(spm, a.input, ty.i0[oy], tx.i1[ox]);
          const T *p10 = elem<T>(spm, a.input, ty.i1[oy], tx.i0[ox]);
          const T *p11 = elem<T>(spm, a.input, ty.i1[oy], tx.i1[ox]);
          const float wy = ty.w1[oy], wx = tx.w1[ox];
          for (uint32_t c = 0; c < C; ++c) {
            const float top =
                to_f(p00[c * cs], a.in_quant) * (1.0f - wx) + to_f(p01[c * cs], a.in_quant) * wx;
            const float bottom =
                to_f(p10[c * cs], a.in_quant) * (1.0f - wx) + to_f(p11[c * cs], a.in_quant) * wx;
            from_f(o[c], top * (1.0f - wy) + bottom * wy, a.out_quant);
          }
        }
    });
  });
  return Status::Ok();
}

Status run_pad(const mcl_native_exec &exec, const mcl_pad_args &a) {
  uint8_t *spm = exec.spm_base;
  with_type(a.input.dtype, [&](auto tag) {
    using T = decltype(tag);
    T fill;
    from_f(fill, a.value, a.quant);
    parallel_rows(exec, a.output.h, [&](uint32_t y0, uint32_t y1) {
      for (uint32_t y = y0; y < y1; ++y)
        for (uint32_t x = 0; x < a.output.w; ++x) {
          T *o = elem<T>(spm, a.output, y, x);
          const bool row_in = y >= a.pad_top && y - a.pad_top < a.input.h && x >= a.pad_left &&
                              x - a.pad_left < a.input.w;
          const T *p = row_in ? elem<T>(spm, a.input, y - a.pad_top, x - a.pad_left) : nullptr;
          for (uint32_t c = 0; c < a.output.c; ++c) {
            const bool inside = p && c >= a.pad_channel && c - a.pad_channel < a.input.c;
            o[c] = inside ? p[(c - a.pad_channel) * a.input.channel_stride] : fill;
          }
        }
    });
  });
  return Status::Ok();
}

Status run_matmul(const mcl_native_exec &exec, const mcl_matmul_args &a) {
  uint8_t *spm = exec.spm_base;
  const uint32_t K = a.a.c, N = a.output.c, W = a.output.w;
  const Act act(a.act);
  const mcl_quant no_quant{1.0f, 0};
  with_type(a.output.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, half_t>) {
      const uint32_t rows = a.output.h * a.output.w;
      parallel_rows(exec, rows, [&](uint32_t r0, uint32_t r1) {
        std::vector<float> acc(N);
        for (uint32_t r = r0; r < r1; ++r) {
          std::fill(acc.begin(), acc.end(), 0.0f);
          const T *pa = elem<T>(spm, a.a, r / a.a.w, r % a.a.w);
          for (uint32_t k = 0; k < K; ++k) {
            const float av = to_f(pa[k * a.a.channel_stride], no_quant);
            const T *pb = elem<T>(spm, a.b, 0, k);
            for (uint32_t n = 0; n < N; ++n)
              acc[n] += av * to_f(pb[n * a.b.channel_stride], no_quant);
          }
          T *o = elem<T>(spm, a.output, r / W, r % W);
          for (uint32_t n = 0; n < N; ++n)
            from_f(o[n], act(acc[n]), no_quant);
        }
      });
    }
  });
  return Status::Ok();
}

} // namespace manycl::native

namespace manycl::native::cost {

namespace {

// Arithmetic type of vector work: FP16 stays FP16; INT8 is computed on dequantized FP32.
uint32_t arith(uint32_t dtype) {
  return dtype == MCL_DTYPE_F16 ? MCL_DTYPE_F16 : MCL_DTYPE_F32;
}

// VLIW operations to dequantize an INT8 operand (subtract, scale) or quantize a result
// (scale, round, zero point, clamp).
double dequant_ops(uint32_t dtype) {
  return is_int8(dtype) ? 2.0 : 0.0;
}
double quant_ops(uint32_t dtype) {
  return is_int8(dtype) ? 4.0 : 0.0;
}

// Bytes an operand tile contributes per output element: 0 when broadcast over pixels (a
// per-channel vector stays in registers).
double operand_bytes(const mcl_tile &t) {
  if (t.row_stride == 0 && t.pixel_stride == 0)
    return 0.0;
  return dtype_size(t.dtype);
}

} // namespace

Cost matmul_cost(const mcl_matmul_args &a, uint32_t pes) {
  // The same blocked GEMM as a 1x1 convolution without an address table (B's columns are
  // loaded with load-scatters like packed weights: same bytes per block).
  mcl_gemm_args g{};
  g.input = a.a;
  g.output = a.output;
  g.act = a.act;
  return conv_cost(MCL_NATIVE_FN_CONV2D, gemm_as_conv(g), pes);
}

Cost pool_cost(const mcl_pool_args &a, uint32_t pes) {
  const uint64_t taps = (uint64_t)a.kernel_h * a.kernel_w;
  const uint32_t in_bytes = dtype_size(a.input.dtype);
  // A row of outputs slides its window in registers; a global pool (one output column)
  // reads every tap.
  const double loads =
      a.output.w > 1
          ? std::min<double>((double)taps, (double)a.kernel_h * std::max<uint16_t>(1, a.stride_w))
          : (double)taps;
  const double bytes = loads * in_bytes + dtype_size(a.output.dtype);
  const double ops =
      (double)taps + (a.kind == MCL_POOL_AVG ? 1.0 : 0.0) +
      (a.kind == MCL_POOL_AVG ? dequant_ops(a.input.dtype) + quant_ops(a.output.dtype) : 0.0);
  return stream(elements(a.output), bytes, ops, arith(a.input.dtype), pes);
}

Cost eltwise_cost(const mcl_eltwise_args &a, uint32_t pes) {
  const double bytes = operand_bytes(a.a) + operand_bytes(a.b) + dtype_size(a.output.dtype);
  const double op = a.op == MCL_ELTWISE_DIV ? 8.0 : 1.0; // reciprocal + Newton steps
  const double ops = op + activation_ops(a.act) + dequant_ops(a.a.dtype) + dequant_ops(a.b.dtype) +
                     quant_ops(a.output.dtype);
  return stream(elements(a.output), bytes, ops, arith(a.output.dtype), pes);
}

Cost scale_shift_cost(const mcl_scale_shift_args &a, uint32_t pes) {
  const double bytes = (double)dtype_size(a.input.dtype) + dtype_size(a.output.dtype);
  const double ops =
      1.0 + activation_ops(a.act) + dequant_ops(a.input.dtype) + quant_ops(a.output.dtype);
  return stream(elements(a.output), bytes, ops, arith(a.output.dtype), pes);
}

Cost unary_cost(uint32_t fn, const mcl_unary_args &a, uint32_t pes) {
  const double in = dtype_size(a.input.dtype), out = dtype_size(a.output.dtype);
  double bytes = in + out, ops;
  if (fn == MCL_NATIVE_FN_SOFTMAX) {
    bytes = 2 * in + out; // max pass, then exp/sum/scale
    ops = 16.0;           // max, subtract, exp, add, reciprocal-multiply
  } else if (fn == MCL_NATIVE_FN_COPY) {
    ops = a.input.dtype == a.output.dtype
              ? 0.0
              : 1.0 + dequant_ops(a.input.dtype) + quant_ops(a.output.dtype);
  } else {
    ops = activation_ops(a.act) + dequant_ops(a.input.dtype) + quant_ops(a.output.dtype);
  }
  return stream(elements(a.output), bytes, ops, arith(a.output.dtype), pes);
}

Cost resize_cost(const mcl_resize_args &a, uint32_t pes) {
  const bool bilinear = a.mode == MCL_RESIZE_BILINEAR;
  const double in = dtype_size(a.input.dtype);
  const double bytes = (bilinear ? 4.0 : 1.0) * in + dtype_size(a.output.dtype);
  const double ops = bilinear ? 8.0 + dequant_ops(a.input.dtype) + quant_ops(a.output.dtype) : 0.0;
  return stream(elements(a.output), bytes, ops, arith(a.output.dtype), pes);
}

Cost pad_cost(const mcl_pad_args &a, uint32_t pes) {
  const uint64_t out = elements(a.output);
  const double bytes = (double)dtype_size(a.output.dtype) +
                       (out ? (double)elements(a.input) * dtype_size(a.input.dtype) / out : 0.0);
  return stream(out, bytes, 0.0, arith(a.output.dtype), pes);
}

} // namespace manycl::native::cost
