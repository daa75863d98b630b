// INT8 drivers over an ISA traits class K, compiled once per ISA translation unit (see
// int8_conv.h for the layout and the arithmetic). Internal linkage only, like kernels_impl.h.
//
// K provides: MR (rows of the register block), AElem (uint8_t: bytes in quads; int16_t:
// bytes widened), pack_row (activations -> u values), ukernel<MR> (C[MR][16] = sum over quads
// of A[i] . W), and requant_store16 (the shared epilogue steps).
#pragma once

#include "int8_conv.h"
#include "kernels_impl.h"

namespace {

// u = x for U8, x + 128 for S8 (the sign bit flipped): the byte the kernels multiply.
inline uint8_t unsigned_byte(uint8_t x) {
  return x;
}
inline uint8_t unsigned_byte(int8_t x) {
  return (uint8_t)((uint8_t)x ^ 0x80u);
}

template <class K, class TI, class TO> void int8_conv_impl(const ConvJob &j, const ConvRange &r) {
  constexpr int MR = K::MR;
  using A = typename K::AElem;
  const TI *in = reinterpret_cast<const TI *>(j.in) + (size_t)r.group * j.cin_g;
  const uint32_t kc = j.cin_g;
  const uint32_t k_padded = (uint32_t)int8_padded_k(j.taps, kc), quads = k_padded / 4;
  const size_t panel = (size_t)quads * 4 * kPanelWidth; // bytes
  const int8_t *wg = reinterpret_cast<const int8_t *>(j.weights + r.group * j.weights_group_stride);
  const size_t channel0 = (size_t)r.group * j.nblocks * 16;
  const int32_t *bias = static_cast<const int32_t *>(j.bias) + channel0;
  const float *mult = j.multipliers + channel0;
  const int32_t *wzp = j.weight_zero_points ? j.weight_zero_points + channel0 : nullptr;
  TO *out = reinterpret_cast<TO *>(j.out);
  const float lo = (float)(j.out_min - j.out_zp), hi = (float)(j.out_max - j.out_zp);
  alignas(64) int32_t c[MR][16];
  uint32_t row_sum[MR] = {};
  A *apack = reinterpret_cast<A *>(r.scratch);
  for (uint32_t m0 = r.m_begin; m0 < r.m_end; m0 += MR) {
    const uint32_t mr = std::min<uint32_t>(MR, r.m_end - m0);
    TO *orow[MR];
    // Pack MR rows of A once (rows past the end repeat the last one: computed, not stored);
    // reused by every panel.
    for (int i = 0; i < MR; ++i) {
      const uint32_t m = m0 + std::min<uint32_t>(i, mr - 1);
      orow[i] = out + (m / j.out_w) * j.out_row_stride + (m % j.out_w) * j.out_pixel_stride +
                (size_t)r.group * j.cout_g;
      const int32_t *tab = j.table + (size_t)m * j.taps;
      A *row = apack + (size_t)i * k_padded;
      A *dst = row;
      // Taps whose pixels follow each other in memory (a kernel row over a dense tile) are
      // one run: the same bytes, one call (a 3-channel first layer: 3 calls a pixel, not 9).
      for (uint32_t t = 0; t < j.taps;) {
        uint32_t t_end = t + 1;
        while (t_end < j.taps && tab[t_end] == tab[t_end - 1] + (int32_t)kc)
          ++t_end;
        const uint32_t n = (t_end - t) * kc;
        K::pack_row(in + tab[t], n, dst);
        dst += n;
        t = t_end;
      }
      for (uint32_t k = j.taps * kc; k < k_padded; ++k)
        row[k] = 0; // multiplies the zero weights of the last quad
      if (wzp) {
        uint32_t s = 0;
        for (uint32_t k = 0; k < k_padded; ++k)
          s += (uint32_t)row[k];
        row_sum[i] = s;
      }
    }
    for (uint32_t nb = r.nb_begin; nb < r.nb_end; ++nb) {
      const uint32_t n0 = nb * 16, nvalid = std::min<uint32_t>(16, j.cout_g - n0);
      K::template ukernel<MR>(quads, apack, k_padded, wg + nb * panel, c);
      if (wzp)
        for (uint32_t i = 0; i < mr; ++i)
          for (int x = 0; x < 16; ++x)
            c[i][x] = (int32_t)((uint32_t)c[i][x] - (uint32_t)wzp[n0 + x] * row_sum[i]);
      if (nvalid == kPanelWidth) {
        for (uint32_t i = 0; i < mr; ++i)
          K::requant_store16(c[i], bias + n0, mult + n0, lo, hi, j.out_zp, orow[i] + n0);
      } else {
        for (uint32_t i = 0; i < mr; ++i) {
          TO *o = orow[i] + n0;
          for (uint32_t x = 0; x < nvalid; ++x)
            o[x] = (TO)requantize(wrap_add(c[i][x], bias[n0 + x]), mult[n0 + x], lo, hi, j.out_zp);
        }
      }
    }
  }
}

// Depthwise: 16 channels of 4 pixels at a time, sum_t (x - x_zp) * (w - w_zp) in INT32 that
// wraps like every other path; plain loops the ISA's compiler flags vectorize.
template <class K, class TI, class TO>
void int8_depthwise_impl(const ConvJob &j, const ConvRange &r) {
  const TI *in = reinterpret_cast<const TI *>(j.in);
  const int8_t *w = reinterpret_cast<const int8_t *>(j.weights);
  const int32_t *bias = static_cast<const int32_t *>(j.bias);
  const int32_t *wzp = j.weight_zero_points;
  const uint32_t C = j.cout_g * j.groups, Cp = j.channels_padded;
  TO *out = reinterpret_cast<TO *>(j.out);
  const float lo = (float)(j.out_min - j.out_zp), hi = (float)(j.out_max - j.out_zp);
  constexpr uint32_t kPixels = 4;
  alignas(64) int32_t c[kPixels][16];
  for (uint32_t mb = r.m_begin; mb < r.m_end; mb += kPixels) {
    const uint32_t np = std::min<uint32_t>(kPixels, r.m_end - mb);
    const int32_t *tabs[kPixels];
    TO *orow[kPixels];
    for (uint32_t i = 0; i < kPixels; ++i) {
      const uint32_t m = mb + std::min(i, np - 1);
      tabs[i] = j.table + (size_t)m * j.taps;
      orow[i] = out + (m / j.out_w) * j.out_row_stride + (m % j.out_w) * j.out_pixel_stride;
    }
    for (uint32_t c0 = 0; c0 < C; c0 += kPanelWidth) {
      const uint32_t n = std::min<uint32_t>(kPanelWidth, C - c0);
      int32_t zw[16] = {};
      if (wzp)
        for (int x = 0; x < 16; ++x)
          zw[x] = wzp[c0 + x];
      K::depthwise_block(in + c0, tabs, j.taps, w + c0, Cp, j.in_zp, zw, n, c);
      if (n == kPanelWidth) {
        for (uint32_t i = 0; i < np; ++i)
          K::requant_store16(c[i], bias + c0, j.multipliers + c0, lo, hi, j.out_zp, orow[i] + c0);
      } else {
        for (uint32_t i = 0; i < np; ++i)
          for (uint32_t x = 0; x < n; ++x)
            orow[i][c0 + x] = (TO)requantize(wrap_add(c[i][x], bias[c0 + x]), j.multipliers[c0 + x],
                                             lo, hi, j.out_zp);
      }
    }
  }
}

// Portable depthwise block: n <= 16 channels (a full block reads 16: the input rows of a tile
// are whole pixels and the tail takes the exact count).
struct PortableDepthwise {
  template <class TI>
  static void depthwise_block(const TI *in, const int32_t *const *tabs, uint32_t taps,
                              const int8_t *w, uint32_t w_stride, int32_t zp, const int32_t *zw,
                              uint32_t n, int32_t (*c)[16]) {
    for (int i = 0; i < 4; ++i) {
      uint32_t acc[16] = {};
      if (n == 16) {
        for (uint32_t t = 0; t < taps; ++t) {
          const TI *p = in + tabs[i][t];
          const int8_t *wt = w + (size_t)t * w_stride;
          for (int x = 0; x < 16; ++x)
            acc[x] += (uint32_t)(((int32_t)p[x] - zp) * ((int32_t)wt[x] - zw[x]));
        }
      } else {
        for (uint32_t t = 0; t < taps; ++t) {
          const TI *p = in + tabs[i][t];
          const int8_t *wt = w + (size_t)t * w_stride;
          for (uint32_t x = 0; x < n; ++x)
            acc[x] += (uint32_t)(((int32_t)p[x] - zp) * ((int32_t)wt[x] - zw[x]));
        }
      }
      for (int x = 0; x < 16; ++x)
        c[i][x] = (int32_t)acc[x];
    }
  }
};

template <class K> void int8_conv(const ConvJob &j, const ConvRange &r) {
  const bool in_u8 = j.in_dtype == MCL_DTYPE_U8, out_u8 = j.out_dtype == MCL_DTYPE_U8;
  if (in_u8 && out_u8)
    int8_conv_impl<K, uint8_t, uint8_t>(j, r);
  else if (in_u8)
    int8_conv_impl<K, uint8_t, int8_t>(j, r);
  else if (out_u8)
    int8_conv_impl<K, int8_t, uint8_t>(j, r);
  else
    int8_conv_impl<K, int8_t, int8_t>(j, r);
}

template <class K> void int8_depthwise(const ConvJob &j, const ConvRange &r) {
  const bool in_u8 = j.in_dtype == MCL_DTYPE_U8, out_u8 = j.out_dtype == MCL_DTYPE_U8;
  if (in_u8 && out_u8)
    int8_depthwise_impl<K, uint8_t, uint8_t>(j, r);
  else if (in_u8)
    int8_depthwise_impl<K, uint8_t, int8_t>(j, r);
  else if (out_u8)
    int8_depthwise_impl<K, int8_t, uint8_t>(j, r);
  else
    int8_depthwise_impl<K, int8_t, int8_t>(j, r);
}

} // namespace
