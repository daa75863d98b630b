// Hot loops of the native compute functions, written once over a SIMD traits class S and
// compiled once per ISA translation unit (kernels_generic.cpp, kernels_avx2.cpp,
// kernels_avx512.cpp). Everything here has internal linkage so code built with -mavx2 or
// -mavx512f can never be picked by the linker for another ISA.
//
// S provides: W (float lanes), MR (rows of the register block), the VF vector type and
// zero/load/bcast/fma/store for floats (load and bcast also from binary16). The INT8
// convolutions are in int8_conv*.cpp (byte weights); the requantizing epilogue steps here
// are shared with them.
#pragma once

#include "internal.h"

#include <cstring>
#include <type_traits>

namespace {

using namespace manycl::native;

// Epilogue bounds of the activations that are a clamp; others are applied per element.
struct FloatEpilogue {
  float lo, hi;
  bool general; // apply_activation() afterwards
  bool leaky;   // general, and LeakyRelu: vectorized as a select
  explicit FloatEpilogue(const mcl_activation &act) {
    lo = -INFINITY;
    hi = INFINITY;
    general = false;
    leaky = act.kind == MCL_ACT_LEAKY_RELU;
    if (act.kind == MCL_ACT_RELU) {
      lo = 0.0f;
    } else if (act.kind == MCL_ACT_CLIP) {
      lo = act.alpha;
      hi = act.beta;
    } else if (act.kind != MCL_ACT_NONE) {
      general = true;
    }
  }
  float operator()(const mcl_activation &act, float v) const {
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    return general ? apply_activation(act, v) : v;
  }
};

static inline float to_float(float v) {
  return v;
}
static inline float to_float(uint16_t v) {
  return half_to_float(v);
}
static inline void from_float(float *p, float v) {
  *p = v;
}
static inline void from_float(uint16_t *p, float v) {
  *p = float_to_half(v);
}

// A register block of MR rows x V vectors: loaded from c (or zero), stored back to c.
template <class S, int MR, int V>
static inline void block_load(typename S::VF (&acc)[MR][V], const float (*c)[16], bool accumulate) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[i][v] = accumulate ? S::load(&c[i][v * S::W]) : S::zero();
}
template <class S, int MR, int V>
static inline void block_store(const typename S::VF (&acc)[MR][V], float (*c)[16]) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      S::store(&c[i][v * S::W], acc[i][v]);
}

// C[MR][16] = sum over taps t and channels k of A[row i](t, k) * W[t][k][0..16).
// rows[i][t] is the element offset of the input pixel of row i, tap t (address table); the
// panel is [taps][kc][16]; run_end (or null) the taps' contiguous runs (tap_runs).
// VN: vectors of the panel computed (all, or the first when only those columns are valid).
// TI: input elements (float, or binary16 widened here); TW: panel elements (converted at load).
// The epilogue of a whole 16-column panel straight from the registers (ISAs with the
// register epilogue steps): rows [0, mr) of the block to o[i], with the bias, the residual
// rows res[i] (MCL_CONV_RESIDUAL, or null), the clamp and LeakyRelu as epilogue_row
// computes them.
template <class T> struct DirectStore {
  T *const *o;
  const T *const *res;
  const float *bias;
  float lo, hi;
  bool leaky;
  float alpha;
  uint32_t mr;
};
template <class S, class T>
concept StoresFromRegisters = requires(typename S::VF x, T *o) {
  S::store_out(o, S::leaky(S::clamp(S::add(x, x), x, x), x));
};

// The end of a micro-kernel: with `direct`, the finished block's epilogue straight from the
// registers; otherwise the block goes to C (partial sums, or the general epilogue's input).
// Always inlined: a call would take acc by address and keep the accumulators in memory
// through the micro-kernel's loop.
template <class S, int MR, int V, class TO>
[[gnu::always_inline]] static inline void finish_block(typename S::VF (&acc)[MR][V], float (*c)[16],
                                                       const DirectStore<TO> *direct) {
  if constexpr (StoresFromRegisters<S, TO>) {
    if (direct) {
      using VF = typename S::VF;
      const VF lo = S::bcast(direct->lo), hi = S::bcast(direct->hi);
      VF bias[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        bias[v] = S::load(direct->bias + v * S::W);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          acc[i][v] = S::add(acc[i][v], bias[v]);
      if (direct->res) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
          if ((uint32_t)i < direct->mr) {
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v)
              acc[i][v] = S::add(acc[i][v], S::load(direct->res[i] + v * S::W));
          }
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          acc[i][v] = S::clamp(acc[i][v], lo, hi);
      if (direct->leaky) {
        const VF alpha = S::bcast(direct->alpha);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            acc[i][v] = S::leaky(acc[i][v], alpha);
      }
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
        if ((uint32_t)i < direct->mr) {
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            S::store_out(direct->o[i] + v * S::W, acc[i][v]);
        }
      return;
    }
  }
  block_store<S, MR, V>(acc, c);
}

template <class S, int MR, class TI, class TW, int VN = kPanelWidth / S::W, class TO = float>
static inline void ukernel_float(uint32_t taps, uint32_t kc, const TI *in,
                                 const int32_t *const *rows, const uint16_t *run_end,
                                 const TW *panel, float (*c)[16],
                                 const DirectStore<TO> *direct = nullptr) {
  constexpr int V = VN;
  typename S::VF acc[MR][V];
  block_load<S, MR, V>(acc, c, false);
  // One k step: the panel row w (16 columns) times the MR row values a[i][k].
  auto step = [&](const TW *w, const auto *const *a, uint32_t k) {
    typename S::VF b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      b[v] = S::load(w + v * S::W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      typename S::VF ai = S::bcast(a[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[i][v] = S::fma(ai, b[v], acc[i][v]);
    }
  };
  // Taps [t, run_end[t]) follow each other in memory for every row (a kernel row over a
  // dense input tile): one loop of their channels, the same products in the same order.
  for (uint32_t t = 0; t < taps;) {
    const uint32_t t_end = run_end ? run_end[t] : t + 1;
    const uint32_t n = (t_end - t) * kc;
    const TI *a[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
      a[i] = in + rows[i][t];
    const TW *w = panel + (size_t)t * kc * kPanelWidth;
    if constexpr (std::is_same_v<TI, uint16_t>) {
      // Binary16 rows are widened a chunk at a time (8 per instruction) instead of once per
      // broadcast: the same float values, so the same sums, at a fraction of the conversions.
      constexpr uint32_t kChunk = 128;
      alignas(32) float wide[MR][kChunk];
      const float *af[MR];
      for (int i = 0; i < MR; ++i)
        af[i] = wide[i];
      for (uint32_t kb = 0; kb < n; kb += kChunk) {
        const uint32_t kn = std::min(kChunk, n - kb);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
          S::widen_halves(a[i] + kb, kn, wide[i]);
        for (uint32_t k = 0; k < kn; ++k, w += kPanelWidth)
          step(w, af, k);
      }
    } else {
      for (uint32_t k = 0; k < n; ++k, w += kPanelWidth)
        step(w, a, k);
    }
    t = t_end;
  }
  finish_block<S, MR, V, TO>(acc, c, direct);
}

// C[MR][16] (+)= sum over k in [0, n) of A[i][k] * W[k][0..16), A packed as MR rows of KC
// values (a[i * KC + k]): one pointer addresses every row, so the loop keeps all its
// addresses in registers.
template <class S, int MR, class TW, int VN = kPanelWidth / S::W, class TO = float>
static inline void ukernel_packed(uint32_t n, const float *a, const TW *w, bool accumulate,
                                  float (*c)[16], const DirectStore<TO> *direct = nullptr) {
  constexpr int V = VN;
  constexpr uint32_t KC = kPackK, kPrefetchSteps = 8;
  typename S::VF acc[MR][V];
  block_load<S, MR, V>(acc, c, accumulate);
  for (uint32_t k = 0; k < n; ++k, ++a, w += kPanelWidth) {
    // The panel streams from L2: fetched a few steps ahead.
    __builtin_prefetch(w + kPrefetchSteps * kPanelWidth);
    typename S::VF b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      b[v] = S::load(w + v * S::W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      typename S::VF ai = S::bcast(a[i * KC]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[i][v] = S::fma(ai, b[v], acc[i][v]);
    }
  }
  finish_block<S, MR, V, TO>(acc, c, direct);
}

// Bias, activation, conversion and store of nvalid columns of one row of a C block; with
// `res` (MCL_CONV_RESIDUAL) the residual row is added to conv + bias before the activation,
// in that order: FP32 gives the bits of the convolution followed by the Add.
template <class S, class T>
static inline void epilogue_row(const ConvJob &j, const FloatEpilogue &ep, const float *c,
                                uint32_t nvalid, const float *bias, T *out,
                                const T *res = nullptr) {
  if (res) {
    if (nvalid == kPanelWidth && !ep.general) {
      S::bias_residual_clamp_store16(c, bias, res, ep.lo, ep.hi, out);
      return;
    }
    alignas(64) float v[kPanelWidth];
    for (uint32_t x = 0; x < nvalid; ++x)
      v[x] = ep(j.act, (c[x] + bias[x]) + to_float(res[x]));
    if constexpr (std::is_same_v<T, uint16_t>)
      S::narrow_halves(v, nvalid, out);
    else
      std::memcpy(out, v, nvalid * sizeof(float));
    return;
  }
  if (nvalid == kPanelWidth && !ep.general) {
    S::bias_clamp_store16(c, bias, ep.lo, ep.hi, out);
  } else if (nvalid == kPanelWidth && ep.leaky) {
    S::bias_leaky_store16(c, bias, ep.lo, ep.hi, j.act.alpha, out);
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    // The activation in float, then the row narrowed by the ISA's conversions (the same
    // rounding as float_to_half, without its per-element software steps).
    alignas(64) float v[kPanelWidth];
    for (uint32_t x = 0; x < nvalid; ++x)
      v[x] = ep(j.act, c[x] + bias[x]);
    S::narrow_halves(v, nvalid, out);
  } else {
    for (uint32_t x = 0; x < nvalid; ++x)
      from_float(out + x, ep(j.act, c[x] + bias[x]));
  }
}

// Bias, activation, conversion and store of mr rows x nvalid columns of a C block.
template <class S, class T>
static inline void float_epilogue(const ConvJob &j, const FloatEpilogue &ep, const float (*c)[16],
                                  uint32_t mr, uint32_t nvalid, const float *bias, T *const *orow,
                                  const T *const *rrow) {
  for (uint32_t i = 0; i < mr; ++i)
    epilogue_row<S, T>(j, ep, c[i], nvalid, bias, orow[i], rrow ? rrow[i] : nullptr);
}

// Taps of a register block whose input pixels follow each other in memory for every row
// (the taps of a kernel row over a dense input tile; not those reading the pad row) are one
// run: run_end[t] is the end of the run starting at t. Null when no two taps are contiguous,
// or where finding the runs costs more than it saves: they pay for a few input channels over
// many taps (a CNN's 7x7 first layer: 7 loops of 21 channels instead of 49 of 3, about 8 %
// faster than packing the rows), not for 3x3 kernels (measured 10 % slower with 3 channels).
inline constexpr uint32_t kMaxRunTaps = 256;
inline bool tap_runs_pay(uint32_t taps, uint32_t kc) {
  return kc <= 4 && taps >= 25 && taps <= kMaxRunTaps;
}
template <int MR>
static inline const uint16_t *tap_runs(const int32_t *const *rows, uint32_t taps, uint32_t kc,
                                       uint16_t *run_end) {
  if (!tap_runs_pay(taps, kc))
    return nullptr;
  bool merged = false;
  run_end[taps - 1] = (uint16_t)taps;
  for (uint32_t t = taps - 1; t-- > 0;) {
    bool contiguous = true;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
      contiguous &= rows[i][t + 1] == rows[i][t] + (int32_t)kc;
    run_end[t] = contiguous ? run_end[t + 1] : (uint16_t)(t + 1);
    merged |= contiguous;
  }
  return merged ? run_end : nullptr;
}

// T: weights and output elements; TI: input elements (float for a widened binary16 input).
template <class S, class T, class TI = T>
static void conv_float_impl(const ConvJob &j, const ConvRange &r) {
  constexpr int MR = S::MR, kHalfMR = (MR + 1) / 2;
  const TI *in = reinterpret_cast<const TI *>(j.in) + (size_t)r.group * j.cin_g;
  const size_t panel = (size_t)j.taps * j.cin_g * kPanelWidth;
  const T *wg = reinterpret_cast<const T *>(j.weights + r.group * j.weights_group_stride);
  const float *bias = static_cast<const float *>(j.bias) + (size_t)r.group * j.nblocks * 16;
  T *out = reinterpret_cast<T *>(j.out);
  const T *residual = reinterpret_cast<const T *>(j.residual);
  const FloatEpilogue ep(j.act);
  const uint32_t kc = j.cin_g;

  auto setup_rows = [&](uint32_t m0, uint32_t mr, const int32_t **rows, T **orow, const T **rrow) {
    for (int i = 0; i < MR; ++i) {
      // Rows past the end repeat the last valid row: computed, never stored.
      const uint32_t m = m0 + std::min<uint32_t>(i, mr - 1);
      const int64_t y = m / j.out_w, x = m % j.out_w;
      rows[i] = j.table + (size_t)m * j.taps;
      orow[i] = out + y * j.out_row_stride + x * j.out_pixel_stride + (size_t)r.group * j.cout_g;
      if (residual)
        rrow[i] =
            residual + y * j.res_row_stride + x * j.res_pixel_stride + (size_t)r.group * j.cout_g;
    }
  };
  // The residual rows of a panel (null without a residual).
  auto panel_residual = [&](const T *const *rrow, uint32_t n0, const T **r_o) -> const T *const * {
    if (!residual)
      return nullptr;
    for (int i = 0; i < MR; ++i)
      r_o[i] = rrow[i] + n0;
    return r_o;
  };

  if (r.acc == nullptr) { // run_conv packs rows only when conv_float_packs_rows()
    // Small K: the whole panel stays in cache; a row block is reused by every panel.
    alignas(64) float c[MR][16];
    uint16_t run_end[kMaxRunTaps];
    for (uint32_t m0 = r.m_begin; m0 < r.m_end; m0 += MR) {
      const uint32_t mr = std::min<uint32_t>(MR, r.m_end - m0);
      const int32_t *rows[MR];
      T *orow[MR];
      const T *rrow[MR];
      setup_rows(m0, mr, rows, orow, rrow);
      const uint16_t *runs = tap_runs<MR>(rows, j.taps, kc, run_end);
      for (uint32_t nb = r.nb_begin; nb < r.nb_end; ++nb) {
        const uint32_t n0 = nb * 16;
        const T *wp = wg + nb * panel;
        T *o[MR];
        for (int i = 0; i < MR; ++i)
          o[i] = orow[i] + n0;
        const uint32_t nvalid = std::min<uint32_t>(16, j.cout_g - n0);
        if constexpr (StoresFromRegisters<S, T>) {
          if ((!ep.general || ep.leaky) && nvalid == 16) {
            const T *r_o[MR];
            const DirectStore<T> direct{
                o, panel_residual(rrow, n0, r_o), bias + n0, ep.lo, ep.hi, ep.leaky, j.act.alpha,
                mr};
            if (mr <= (uint32_t)kHalfMR)
              ukernel_float<S, kHalfMR, TI, T, kPanelWidth / S::W, T>(j.taps, kc, in, rows, runs,
                                                                      wp, c, &direct);
            else
              ukernel_float<S, MR, TI, T, kPanelWidth / S::W, T>(j.taps, kc, in, rows, runs, wp, c,
                                                                 &direct);
            continue;
          }
        }
        if (kPanelWidth / S::W == 2 && j.cout_g - n0 <= (uint32_t)S::W) // narrow last panel
          ukernel_float<S, MR, TI, T, 1>(j.taps, kc, in, rows, runs, wp, c);
        else if (mr <= (uint32_t)kHalfMR) // a short last block: half the rows, half the work
          ukernel_float<S, kHalfMR, TI, T>(j.taps, kc, in, rows, runs, wp, c);
        else
          ukernel_float<S, MR, TI, T>(j.taps, kc, in, rows, runs, wp, c);
        const T *r_o[MR];
        float_epilogue<S, T>(j, ep, c, mr, nvalid, bias + n0, o, panel_residual(rrow, n0, r_o));
      }
    }
    return;
  }
  // Large K: K is cut into chunks of kPackK (flattened over taps and channels). Per chunk, a
  // row block's A values are first copied (binary16 widened) into one packed block in L1
  // that every panel of the task then reuses; the panels' chunk streams from L2. Partial sums
  // live in r.acc between chunks. Per output, the same products in the same order as above.
  const uint32_t K = j.taps * kc;
  const uint32_t rows_rounded = (r.m_end - r.m_begin + MR - 1) / MR * MR;
  float(*acc)[16] = reinterpret_cast<float(*)[16]>(r.acc); // [nb - nb_begin][row][16]
  float *apack = r.apack;                                  // [MR][kPackK]
  for (uint32_t q0 = 0; q0 < K; q0 += kPackK) {
    const uint32_t q1 = std::min(K, q0 + kPackK), qn = q1 - q0;
    const bool first = q0 == 0, last = q1 == K;
    for (uint32_t m0 = r.m_begin; m0 < r.m_end; m0 += MR) {
      const uint32_t mr = std::min<uint32_t>(MR, r.m_end - m0);
      const int32_t *rows[MR];
      T *orow[MR];
      const T *rrow[MR];
      setup_rows(m0, mr, rows, orow, rrow);
      const uint32_t t_first = q0 / kc, k_first = q0 % kc;
      for (int i = 0; i < MR; ++i) {
        float *dst = apack + (size_t)i * kPackK;
        uint32_t t = t_first, k = k_first; // of q: no division per tap
        for (uint32_t q = q0; q < q1;) {
          // Taps whose pixels follow each other in memory (a kernel row over a dense tile
          // with few channels) are one copy.
          uint32_t n = kc - k, t_end = t + 1;
          while (t_end < j.taps && rows[i][t_end] == rows[i][t_end - 1] + (int32_t)kc)
            n += kc, ++t_end;
          n = std::min(n, q1 - q);
          const TI *src = in + rows[i][t] + k;
          if constexpr (std::is_same_v<TI, uint16_t>)
            S::widen_halves(src, n, dst);
          else
            std::memcpy(dst, src, (size_t)n * sizeof(float));
          dst += n;
          q += n;
          t += (k + n) / kc;
          k = (k + n) % kc;
        }
      }
      for (uint32_t nb = r.nb_begin; nb < r.nb_end; ++nb) {
        const uint32_t n0 = nb * 16, nvalid = std::min<uint32_t>(16, j.cout_g - n0);
        const T *wp = wg + nb * panel + (size_t)q0 * kPanelWidth;
        float(*c)[16] = acc + (size_t)(nb - r.nb_begin) * rows_rounded + (m0 - r.m_begin);
        if constexpr (StoresFromRegisters<S, T>) {
          if (last && (!ep.general || ep.leaky) && nvalid == 16) {
            T *o[MR];
            for (int i = 0; i < MR; ++i)
              o[i] = orow[i] + n0;
            const T *r_o[MR];
            const DirectStore<T> direct{
                o, panel_residual(rrow, n0, r_o), bias + n0, ep.lo, ep.hi, ep.leaky, j.act.alpha,
                mr};
            if (mr <= (uint32_t)kHalfMR)
              ukernel_packed<S, kHalfMR, T, kPanelWidth / S::W, T>(qn, apack, wp, !first, c,
                                                                   &direct);
            else
              ukernel_packed<S, MR, T, kPanelWidth / S::W, T>(qn, apack, wp, !first, c, &direct);
            continue;
          }
        }
        if (kPanelWidth / S::W == 2 && nvalid <= (uint32_t)S::W)
          ukernel_packed<S, MR, T, 1>(qn, apack, wp, !first, c);
        else if (mr <= (uint32_t)kHalfMR)
          ukernel_packed<S, kHalfMR, T>(qn, apack, wp, !first, c);
        else
          ukernel_packed<S, MR, T>(qn, apack, wp, !first, c);
        if (last) {
          T *o[MR];
          for (int i = 0; i < MR; ++i)
            o[i] = orow[i] + n0;
          const T *r_o[MR];
          float_epilogue<S, T>(j, ep, c, mr, nvalid, bias + n0, o, panel_residual(rrow, n0, r_o));
        }
      }
    }
  }
}

template <class S> static void conv_float(const ConvJob &j, const ConvRange &r) {
  if (j.in_dtype == MCL_DTYPE_F16 && j.in_widened)
    conv_float_impl<S, uint16_t, float>(j, r);
  else if (j.in_dtype == MCL_DTYPE_F16)
    conv_float_impl<S, uint16_t>(j, r);
  else
    conv_float_impl<S, float>(j, r);
}

// Requantization, exactly as documented in docs/native.md:
//   y = clamp(round_half_even(float(acc + bias) * multiplier), min - zp, max - zp) + zp
static inline int32_t requantize(int32_t acc, float multiplier, float lo, float hi, int32_t zp) {
  float v = (float)acc * multiplier;
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return (int32_t)round_half_even(v) + zp;
}

static inline int32_t wrap_add(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}

// Portable versions of the epilogue / packing steps; ISA traits may override them.
struct PortableSteps {
  static void widen_halves(const uint16_t *p, uint32_t n, float *out) {
    for (uint32_t i = 0; i < n; ++i)
      out[i] = half_to_float(p[i]);
  }
  static void narrow_halves(const float *p, uint32_t n, uint16_t *out) {
    for (uint32_t i = 0; i < n; ++i)
      out[i] = float_to_half(p[i]);
  }
  static void max_halves(const uint16_t *p, uint32_t n, float *acc) {
    for (uint32_t i = 0; i < n; ++i)
      acc[i] = std::max(acc[i], half_to_float(p[i]));
  }
  template <class T>
  static void bias_clamp_store16(const float *c, const float *bias, float lo, float hi, T *out) {
    for (int x = 0; x < 16; ++x) {
      float v = c[x] + bias[x];
      v = v > lo ? v : lo;
      v = v < hi ? v : hi;
      from_float(out + x, v);
    }
  }
  // (c + bias) + residual, then the clamp: a residual Add fused into the epilogue.
  template <class T>
  static void bias_residual_clamp_store16(const float *c, const float *bias, const T *res, float lo,
                                          float hi, T *out) {
    for (int x = 0; x < 16; ++x) {
      float v = (c[x] + bias[x]) + to_float(res[x]);
      v = v > lo ? v : lo;
      v = v < hi ? v : hi;
      from_float(out + x, v);
    }
  }
  // The clamp, then LeakyRelu as apply_activation computes it.
  template <class T>
  static void bias_leaky_store16(const float *c, const float *bias, float lo, float hi, float alpha,
                                 T *out) {
    for (int x = 0; x < 16; ++x) {
      float v = c[x] + bias[x];
      v = v > lo ? v : lo;
      v = v < hi ? v : hi;
      from_float(out + x, v < 0.0f ? alpha * v : v);
    }
  }
  template <class TO>
  static void requant_store16(const int32_t *c, const int32_t *bias, const float *mult, float lo,
                              float hi, int32_t zp, TO *out) {
    for (int x = 0; x < 16; ++x)
      out[x] = (TO)requantize(wrap_add(c[x], bias[x]), mult[x], lo, hi, zp);
  }
};

// One kernel row of a depthwise block (one vector of channels per pixel): R taps, each d
// elements after the previous, for NP pixels SX * d apart. The NP + ... input vectors the row
// reads are loaded once; acc[i] gets the R products in tap order.
template <class S, class T, uint32_t R, uint32_t SX, uint32_t NP>
static inline void sliding_run(const T *p, ptrdiff_t d, const T *w, uint32_t Cp,
                               typename S::VF (*acc)[1]) {
  constexpr uint32_t NQ = SX * (NP - 1) + R;
  typename S::VF x[NQ];
#pragma GCC unroll 32
  for (uint32_t q = 0; q < NQ; ++q)
    x[q] = S::load(p + (ptrdiff_t)q * d);
#pragma GCC unroll 8
  for (uint32_t k = 0; k < R; ++k) {
    const typename S::VF wk = S::load(w + (size_t)k * Cp);
#pragma GCC unroll 8
    for (uint32_t i = 0; i < NP; ++i)
      acc[i][0] = S::fma(x[SX * i + k], wk, acc[i][0]);
  }
}

// Depthwise: one channel per group, vectorized over channels (16 at a time), taps from the
// address table. Channel tails take the scalar path.
template <class S, class T, uint32_t kGroupBlocks>
static void depthwise_float_impl(const ConvJob &j, const ConvRange &r) {
  constexpr int V = kPanelWidth / S::W;
  const T *in = reinterpret_cast<const T *>(j.in);
  const T *w = reinterpret_cast<const T *>(j.weights);
  const float *bias = static_cast<const float *>(j.bias);
  const uint32_t C = j.cout_g * j.groups, Cp = j.channels_padded;
  const uint32_t full = C / kPanelWidth * kPanelWidth;
  T *out = reinterpret_cast<T *>(j.out);
  const T *residual = reinterpret_cast<const T *>(j.residual);
  auto residual_at = [&](int64_t y, int64_t x) -> const T * {
    return residual ? residual + y * j.res_row_stride + x * j.res_pixel_stride : nullptr;
  };
  FloatEpilogue ep(j.act);
  // Blocks of kPixels output pixels share each weight load (rows past the end repeat the
  // last pixel: computed, not stored). The loops over pixels and vectors are unrolled so the
  // accumulators stay in registers.
  constexpr uint32_t kPixels = 8 / V;
  // With many channels, blocks are taken kGroupBlocks (32) at a time, and within a group one
  // channel block after the other: the input is then read pixel after pixel at a fixed stride
  // (which the hardware prefetches), and a channel block's weights stay in L1. With up to 8
  // channel blocks (a pixel of at most 512 bytes), each block runs all its channel blocks:
  // the lines of a pixel are read together (MobileNetV2's 32- and 96-channel layers: 12-14 %
  // faster, mostly as the one block then lives in registers).
  struct Block {
    const int32_t *tabs[kPixels];
    T *orow[kPixels];
    const T *rrow[kPixels]; // residual pixels (MCL_CONV_RESIDUAL), else null
    uint32_t np = 0;
    int32_t step = 0; // != 0: every pixel's taps are the first pixel's moved by i * step
    // With step: pixel 0's tap t reads element tap0[t] + shift.
    const int32_t *tap0;
    int32_t shift;
    // != 0 (with step): the taps are runs of `run` taps, each `step / stride` after the
    // previous (a kernel row): see sliding_run.
    uint32_t run, stride;
  };
  Block blocks[kGroupBlocks];
  alignas(64) float c[kPixels][16];
  auto pixel_tap = [&](const Block &blk, uint32_t i, uint32_t t) -> ptrdiff_t {
    return blk.step != 0 ? (ptrdiff_t)blk.shift + blk.tap0[t] + (ptrdiff_t)i * blk.step
                         : blk.tabs[i][t];
  };

  // With the geometry (a derived table), interior blocks (one output row, every tap inside
  // the tile) are found and addressed from it: the table is read only at the borders.
  const ConvGeometry *geo = j.geometry && j.taps <= kMaxGeometryTaps ? j.geometry : nullptr;
  int32_t tap_off[kMaxGeometryTaps];
  uint32_t geo_run = 0, geo_stride = 0;
  if (geo) {
    for (uint32_t t = 0; t < j.taps; ++t)
      tap_off[t] = (int32_t)((t / geo->kernel_w) * geo->dilation_h * geo->row_stride +
                             (t % geo->kernel_w) * geo->dilation_w * geo->pixel_stride);
    const uint32_t kw = geo->kernel_w;
    if (V == 1 && (kw == 3 || kw == 5 || kw == 7) &&
        (geo->stride_w == geo->dilation_w || geo->stride_w == 2 * geo->dilation_w)) {
      geo_run = kw;
      geo_stride = geo->stride_w / geo->dilation_w;
    }
  }
  // With the geometry, an output row's pixels split into the interior [x_lo, x_hi) and the
  // borders; interior blocks start at x_lo, and the row's last interior block ends at x_hi
  // (it may recompute, and store again, pixels of the previous block of this task).
  int64_t x_lo = 0, x_hi = 0;
  if (geo) {
    const int64_t sw = geo->stride_w, reach = (geo->kernel_w - 1) * geo->dilation_w;
    x_lo = geo->origin_x >= 0 ? 0 : (-geo->origin_x + sw - 1) / sw;
    const int64_t last = geo->in_w - 1 - reach - geo->origin_x; // largest ix offset allowed
    x_hi = last < 0 ? 0 : std::min<int64_t>(j.out_w, last / sw + 1);
    if (x_hi - x_lo < (int64_t)kPixels || kPixels == 1)
      x_lo = x_hi = 0; // no interior block fits a row
  }
  auto row_inside = [&](uint32_t oy) {
    const int64_t iy = geo->origin_y + (int64_t)oy * geo->stride_h;
    return iy >= 0 && iy + (geo->kernel_h - 1) * geo->dilation_h < geo->in_h;
  };
  uint32_t m = r.m_begin;
  uint32_t oy = m / j.out_w, ox = m % j.out_w;
  bool oy_inside = geo && x_hi > x_lo && row_inside(oy);
  while (m < r.m_end) {
    uint32_t nblocks = 0;
    while (m < r.m_end && nblocks < kGroupBlocks) {
      Block &blk = blocks[nblocks++];
      blk.step = 0;
      blk.run = blk.stride = 0;
      const uint32_t row_end = m + (j.out_w - ox); // m of the next row's first pixel
      uint32_t np = 0;
      int64_t x0 = 0; // first pixel of an interior block
      if (oy_inside && ox >= x_lo && ox < x_hi) {
        // The new pixels [ox, ox + np) must be this task's; a block shifted back to end at
        // x_hi recomputes pixels this task already stored.
        np = (uint32_t)std::min<int64_t>(kPixels, x_hi - ox);
        x0 = (int64_t)ox + np - kPixels;
        if ((uint64_t)m + np > std::min<uint64_t>(r.m_end, row_end) ||
            (int64_t)ox - x0 > (int64_t)(m - r.m_begin))
          np = 0;
      }
      if (np > 0) {
        // Interior: every tap of the 8 pixels inside the tile.
        const int64_t iy = geo->origin_y + (int64_t)oy * geo->stride_h;
        const int64_t ix = geo->origin_x + (int64_t)x0 * geo->stride_w;
        blk.np = kPixels;
        blk.step = (int32_t)(geo->stride_w * geo->pixel_stride);
        blk.tap0 = tap_off;
        blk.shift = (int32_t)(iy * geo->row_stride + ix * geo->pixel_stride);
        blk.run = geo_run;
        blk.stride = geo_stride;
        T *o = out + oy * j.out_row_stride + x0 * j.out_pixel_stride;
        for (uint32_t i = 0; i < kPixels; ++i) {
          blk.orow[i] = o + i * j.out_pixel_stride;
          blk.rrow[i] = residual_at(oy, x0 + i);
        }
      } else {
        // Through the table: up to 8 pixels, stopping where a row's interior starts.
        np = std::min<uint32_t>(kPixels, r.m_end - m);
        if (oy_inside && ox < x_lo)
          np = std::min<uint32_t>(np, (uint32_t)x_lo - ox);
        blk.np = np;
        uint32_t y = oy, x = ox;
        for (uint32_t i = 0; i < kPixels; ++i) {
          blk.tabs[i] = j.table + (size_t)(m + std::min(i, np - 1)) * j.taps;
          blk.orow[i] = out + y * j.out_row_stride + x * j.out_pixel_stride;
          blk.rrow[i] = residual_at(y, x);
          if (i + 1 < np && ++x == j.out_w) {
            x = 0;
            ++y;
          }
        }
        if (!geo) {
          // Pixels of one output row away from the padding (nearly all of them) are regular.
          bool regular = np == kPixels && kPixels > 1;
          const int32_t step = regular ? blk.tabs[1][0] - blk.tabs[0][0] : 0;
          for (uint32_t i = 1; i < kPixels && regular; ++i)
            for (uint32_t t = 0; t < j.taps; ++t)
              regular &= blk.tabs[i][t] == blk.tabs[0][t] + (int32_t)i * step;
          blk.step = regular ? step : 0; // 0 also when all pixels read the same taps
          blk.tap0 = blk.tabs[0];
          blk.shift = 0;
          if (V == 1 && blk.step != 0 && j.taps > 1) {
            const int32_t *t0 = blk.tabs[0];
            const int32_t d = t0[1] - t0[0];
            uint32_t run = 1;
            while (run < j.taps && t0[run] - t0[run - 1] == d)
              ++run;
            bool runs = d != 0 && j.taps % run == 0 && (step == d || step == 2 * d) &&
                        (run == 3 || run == 5 || run == 7);
            for (uint32_t t = 0; t < j.taps && runs; ++t)
              runs = t % run == 0 || t0[t] - t0[t - 1] == d;
            if (runs) {
              blk.run = run;
              blk.stride = (uint32_t)(step / d);
            }
          }
        }
      }
      m += np;
      ox += np;
      while (ox >= j.out_w) {
        ox -= j.out_w;
        ++oy;
        oy_inside = geo && x_hi > x_lo && row_inside(oy);
      }
    }
    for (uint32_t c0 = 0; c0 < full; c0 += kPanelWidth) {
      const T *inc = in + c0;
      const T *wc = w + c0;
      for (uint32_t b = 0; b < nblocks; ++b) {
        const Block &blk = blocks[b];
        typename S::VF acc[kPixels][V];
#pragma GCC unroll 8
        for (uint32_t i = 0; i < kPixels; ++i)
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            acc[i][v] = S::zero();
        auto tap = [&](uint32_t t, auto &&pixel) {
          const T *wt = wc + (size_t)t * Cp;
          typename S::VF wv[V];
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            wv[v] = S::load(wt + v * S::W);
#pragma GCC unroll 8
          for (uint32_t i = 0; i < kPixels; ++i) {
            const T *p = pixel(i);
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v)
              acc[i][v] = S::fma(S::load(p + v * S::W), wv[v], acc[i][v]);
          }
        };
        if (blk.step == 0 && blk.np <= 3) {
          // A few border pixels: one at a time (the 8-pixel block would compute 8).
          for (uint32_t i = 0; i < blk.np; ++i) {
            typename S::VF a1[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v)
              a1[v] = S::zero();
            for (uint32_t t = 0; t < j.taps; ++t) {
              const T *p = inc + blk.tabs[i][t];
              const T *wt = wc + (size_t)t * Cp;
#pragma GCC unroll 4
              for (int v = 0; v < V; ++v)
                a1[v] = S::fma(S::load(p + v * S::W), S::load(wt + v * S::W), a1[v]);
            }
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v)
              S::store(c[0] + v * S::W, a1[v]);
            epilogue_row<S, T>(j, ep, c[0], kPanelWidth, bias + c0, blk.orow[i] + c0,
                               residual ? blk.rrow[i] + c0 : nullptr);
          }
          continue;
        }
        bool slid = false;
        if constexpr (V == 1) {
          if (blk.run != 0) {
            slid = true;
            // Kernel rows slide over the block's input row: each input vector is loaded once
            // per kernel row instead of once per tap and pixel (3x3 stride 1: 10 loads for
            // 24 FMAs instead of 24). Each pixel still adds its taps in tap order.
            const ptrdiff_t d = blk.step / (int32_t)blk.stride;
            auto rows = [&]<uint32_t R, uint32_t SX>() {
              for (uint32_t t = 0; t < j.taps; t += R)
                sliding_run<S, T, R, SX, kPixels>(inc + blk.shift + blk.tap0[t], d,
                                                  wc + (size_t)t * Cp, Cp, acc);
            };
            const uint32_t key = blk.run * 2 + blk.stride - 1;
            switch (key) {
            case 3 * 2:
              rows.template operator()<3, 1>();
              break;
            case 3 * 2 + 1:
              rows.template operator()<3, 2>();
              break;
            case 5 * 2:
              rows.template operator()<5, 1>();
              break;
            case 5 * 2 + 1:
              rows.template operator()<5, 2>();
              break;
            case 7 * 2:
              rows.template operator()<7, 1>();
              break;
            default:
              rows.template operator()<7, 2>();
              break;
            }
          }
        }
        if (!slid && blk.step != 0) {
          const ptrdiff_t step = blk.step;
          for (uint32_t t = 0; t < j.taps; ++t) {
            const T *p0 = inc + blk.shift + blk.tap0[t];
            tap(t, [&](uint32_t i) { return p0 + (ptrdiff_t)i * step; });
          }
        } else if (!slid) {
          for (uint32_t t = 0; t < j.taps; ++t)
            tap(t, [&](uint32_t i) { return inc + blk.tabs[i][t]; });
        }
        if constexpr (StoresFromRegisters<S, T>) {
          if (!ep.general || ep.leaky) {
            T *o[kPixels];
            const T *res[kPixels];
#pragma GCC unroll 8
            for (uint32_t i = 0; i < kPixels; ++i) {
              o[i] = blk.orow[i] + c0;
              res[i] = residual ? blk.rrow[i] + c0 : nullptr;
            }
            const DirectStore<T> direct{
                o,     residual ? res : nullptr, bias + c0, ep.lo, ep.hi, ep.leaky, j.act.alpha,
                blk.np};
            finish_block<S, (int)kPixels, V, T>(acc, nullptr, &direct);
            continue;
          }
        }
#pragma GCC unroll 8
        for (uint32_t i = 0; i < kPixels; ++i)
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v)
            S::store(c[i] + v * S::W, acc[i][v]);
        for (uint32_t i = 0; i < blk.np; ++i)
          epilogue_row<S, T>(j, ep, c[i], kPanelWidth, bias + c0, blk.orow[i] + c0,
                             residual ? blk.rrow[i] + c0 : nullptr);
      }
    }
    if (full == C)
      continue;
    // Channel tail (C not a multiple of 16): scalar.
    const uint32_t n = C - full;
    for (uint32_t b = 0; b < nblocks; ++b) {
      const Block &blk = blocks[b];
      for (uint32_t i = 0; i < blk.np; ++i) {
        T *o = blk.orow[i];
        float acc[16] = {};
        for (uint32_t t = 0; t < j.taps; ++t) {
          const T *p = in + pixel_tap(blk, i, t) + full;
          const T *wt = w + (size_t)t * Cp + full;
          for (uint32_t x = 0; x < n; ++x)
            acc[x] += to_float(p[x]) * to_float(wt[x]);
        }
        const T *res = blk.rrow[i];
        for (uint32_t x = 0; x < n; ++x)
          from_float(o + full + x,
                     ep(j.act, res ? (acc[x] + bias[full + x]) + to_float(res[full + x])
                                   : acc[x] + bias[full + x]));
      }
    }
  }
}

// F32 and F16 (INT8 depthwise: int8_conv_impl.h).
template <class S> static void depthwise(const ConvJob &j, const ConvRange &r) {
  const bool few_channels = j.cout_g * j.groups <= 8 * kPanelWidth;
  if (j.in_dtype == MCL_DTYPE_F16) { // converted at load (run_conv does not widen depthwise)
    if (few_channels)
      depthwise_float_impl<S, uint16_t, 1>(j, r);
    else
      depthwise_float_impl<S, uint16_t, 32>(j, r);
  } else if (few_channels) {
    depthwise_float_impl<S, float, 1>(j, r);
  } else {
    depthwise_float_impl<S, float, 32>(j, r);
  }
}

// Pooling of one output pixel (IsaKernels::pool_floats and pool_halves): 16 channels at a time
// in float registers over the window's pixels, in pixel order (the sums are the scalar loop's);
// the maximum starts at -inf and keeps the accumulator on NaN inputs, as std::max(acc, x)
// does. T: float, or binary16 widened at load and narrowed (round to nearest even) at store,
// which gives the bits of the row-at-a-time binary16 path.
template <class S, class T>
static void pool_pixels(const T *const *pixels, uint32_t n, uint32_t C, bool is_max, float divisor,
                        T *out) {
  constexpr int V = kPanelWidth / S::W;
  using VF = typename S::VF;
  alignas(64) float sums[kPanelWidth];
  // sums[0, count) to out[0, count): divided for an average, narrowed for binary16.
  auto finish = [&](uint32_t count, T *o) {
    if (!is_max)
      for (uint32_t k = 0; k < count; ++k)
        sums[k] /= divisor;
    if constexpr (std::is_same_v<T, uint16_t>)
      S::narrow_halves(sums, count, o);
    else
      std::memcpy(o, sums, count * sizeof(float));
  };
  uint32_t c = 0;
  for (; c + kPanelWidth <= C; c += kPanelWidth) {
    VF acc[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[v] = is_max ? S::bcast(-INFINITY) : S::zero();
    for (uint32_t t = 0; t < n; ++t)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const VF x = S::load(pixels[t] + c + v * S::W);
        acc[v] = is_max ? S::max(x, acc[v]) : S::add(acc[v], x);
      }
    if constexpr (std::is_same_v<T, float>) {
      if (is_max) { // straight from the registers
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v)
          S::store(out + c + v * S::W, acc[v]);
        continue;
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      S::store(sums + v * S::W, acc[v]);
    finish(kPanelWidth, out + c);
  }
  if (c == C)
    return;
  for (uint32_t k = 0; c + k < C; ++k) {
    float acc = is_max ? -INFINITY : 0.0f;
    for (uint32_t t = 0; t < n; ++t) {
      const float x = to_float(pixels[t][c + k]);
      acc = is_max ? std::max(acc, x) : acc + x;
    }
    sums[k] = acc;
  }
  finish(C - c, out + c);
}

// Requantizing INT8 add, portable form (the compiler vectorizes what the baseline ISA can).
[[maybe_unused]] static void int8_add_portable(const Int8AddJob &j) {
  for (uint32_t i = 0; i < j.n; ++i)
    j.out[i] = int8_add_one(j, i);
}

} // namespace
