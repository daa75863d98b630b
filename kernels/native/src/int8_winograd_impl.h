// Integer Winograd F(2x2, 3x3) for INT8 convolutions (int8_winograd.h: the arithmetic and why
// it is exact), compiled once per ISA translation unit over the INT8 traits class K, which
// provides requant_store16 and wino_gemm<R> (C[R][16] (+)= sum over channel pairs of the
// transformed inputs times the transformed weights, INT32 wrapping).
//
// A task takes a range of 2x2 output blocks ("tiles") and of panels. Per chunk of input
// channels it transforms its tiles' inputs (B^T d B, INT16), then per panel the chunk's weights
// (G2 g G2^T, INT16, channel pairs interleaved for vpmaddwd) and runs the 16 GEMMs, adding into
// the panel's INT32 products; at the end A^T M A / 4 per tile gives the direct path's sums,
// which the direct path's requantization stores.
#pragma once

#include "int8_conv_impl.h"
#include "int8_winograd.h"

// The 256- and 512-bit vector types below never cross a translation unit (internal linkage,
// inlined): GCC's note that passing them by value differs between ISAs does not apply. GCC
// emits that note at the end of the translation unit, so it stays off for the including unit.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Sixteen lanes of INT16 (transformed values) and of INT32 (weight bytes, sums); GCC maps them
// onto the translation unit's vectors (two AVX2 registers for the INT32 ones).
typedef int16_t WinoV16s __attribute__((vector_size(32)));
typedef int32_t WinoV16i __attribute__((vector_size(64)));
typedef uint32_t WinoV16u __attribute__((vector_size(64)));
typedef uint8_t WinoV16b __attribute__((vector_size(16)));

template <class V> inline V wino_load(const void *p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V> inline void wino_store(void *p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Weight byte k = (tap, channel) of the panel's 16 output channels (quad k / 4, lane x, byte
// k % 4), sign-extended.
[[gnu::always_inline]] inline WinoV16i wino_weight_bytes(const int8_t *panel, uint32_t k) {
  const WinoV16i quads = wino_load<WinoV16i>(panel + (size_t)(k / 4) * 64);
  return (quads << (24 - 8 * (int)(k % 4))) >> 24;
}

template <class K, class TI, class TO>
void int8_winograd_impl(const manycl::native::Int8WinogradJob &w,
                        const manycl::native::Int8WinogradRange &r) {
  using namespace manycl::native;
  constexpr int MR = K::WMR;
  constexpr uint32_t P = kInt8WinogradPoints;
  const ConvJob &j = *w.conv;
  const TI *in = reinterpret_cast<const TI *>(j.in);
  TO *out = reinterpret_cast<TO *>(j.out);
  const uint32_t cin = j.cin_g, chunk = w.channel_chunk; // chunk: a multiple of 16
  const uint32_t tiles = r.tile_end - r.tile_begin, panels = r.nb_end - r.nb_begin;
  const uint32_t rows = (tiles + MR - 1) / MR * MR;
  const uint32_t k_total = 9 * cin;
  const size_t panel_bytes = (size_t)int8_padded_k(9, cin) * kPanelWidth;
  const int8_t *weights = reinterpret_cast<const int8_t *>(j.weights);
  const int32_t *bias = static_cast<const int32_t *>(j.bias);
  const int32_t *wzp = j.weight_zero_points;
  const float lo = (float)(j.out_min - j.out_zp), hi = (float)(j.out_max - j.out_zp);
  const WinoV16b flip = (WinoV16b){} + (uint8_t)(std::is_same_v<TI, int8_t> ? 0x80 : 0);
  const WinoV16s zu = (WinoV16s){} + (int16_t)w.zu;
  // Scratch: transformed inputs [rows][P][chunk], one panel's transformed weights
  // [P][chunk / 2][16][2], products [panels][rows][P][16].
  uint8_t *base = reinterpret_cast<uint8_t *>(((uintptr_t)r.scratch + 63) & ~(uintptr_t)63);
  int16_t *vt = reinterpret_cast<int16_t *>(base);
  int16_t *ut = vt + (size_t)rows * P * chunk;
  int32_t *mt = reinterpret_cast<int32_t *>(ut + (size_t)P * chunk * kPanelWidth);
  const size_t vrow = (size_t)P * chunk;

  using Patch = WinogradPatch<TI>;
  Patch patches[kInt8WinogradMaxTaskTiles];
  winograd_patches(w, in, r.tile_begin, tiles, 2, 4, patches);
  std::fill_n(vt + (size_t)tiles * vrow, (size_t)(rows - tiles) * vrow, (int16_t)0);

  for (uint32_t c0 = 0; c0 < cin; c0 += chunk) {
    const uint32_t cn = std::min(chunk, cin - c0), cn2 = (cn + 1) / 2 * 2;
    const bool first = c0 == 0;
    // B^T d B of each tile's 4x4 patch of (x - x_zp), 16 channels at a time; zero outside the
    // input tile and past the chunk's channels.
    for (uint32_t row = 0; row < tiles; ++row) {
      const Patch &pt = patches[row];
      int16_t *dst = vt + (size_t)row * vrow;
      for (uint32_t c = 0; c < cn; c += 16) {
        WinoV16s d[16];
        for (int y = 0; y < 4; ++y)
          for (int x = 0; x < 4; ++x) {
            WinoV16s &v = d[y * 4 + x];
            if (!((pt.rows_inside >> y) & (pt.cols_inside >> x) & 1)) {
              v = (WinoV16s){};
              continue;
            }
            const TI *p = pt.origin + y * w.in_row_stride + x * w.in_pixel_stride + c0 + c;
            if (c + 16 <= cn) {
              v = __builtin_convertvector(wino_load<WinoV16b>(p) ^ flip, WinoV16s) - zu;
            } else {
              alignas(32) int16_t tmp[16] = {};
              for (uint32_t l = 0; l < cn - c; ++l)
                tmp[l] = (int16_t)((int16_t)unsigned_byte(p[l]) - (int16_t)w.zu);
              v = wino_load<WinoV16s>(tmp);
            }
          }
        WinoV16s t[16];
        for (int x = 0; x < 4; ++x) { // columns: B^T d
          t[x] = d[x] - d[8 + x];
          t[4 + x] = d[4 + x] + d[8 + x];
          t[8 + x] = d[8 + x] - d[4 + x];
          t[12 + x] = d[4 + x] - d[12 + x];
        }
        for (int y = 0; y < 4; ++y) { // rows: (B^T d) B
          const WinoV16s *ty = t + y * 4;
          int16_t *o = dst + (size_t)y * 4 * chunk + c;
          wino_store(o, ty[0] - ty[2]);
          wino_store(o + chunk, ty[1] + ty[2]);
          wino_store(o + 2 * chunk, ty[2] - ty[1]);
          wino_store(o + 3 * chunk, ty[1] - ty[3]);
        }
      }
    }
    for (uint32_t p = 0; p < panels; ++p) {
      const uint32_t nb = r.nb_begin + p;
      const int8_t *panel = weights + nb * panel_bytes;
      const WinoV16i zw = wzp ? wino_load<WinoV16i>(wzp + nb * 16) : (WinoV16i){};
      // G2 g G2^T of 16 output channels per input channel; channel pairs interleaved.
      for (uint32_t c = 0; c < cn2; c += 2) {
        WinoV16s v[2][16];
        for (uint32_t h = 0; h < 2; ++h) {
          WinoV16s g[9];
          for (uint32_t tap = 0; tap < 9; ++tap)
            g[tap] = c + h < cn
                         ? __builtin_convertvector(
                               wino_weight_bytes(panel, tap * cin + c0 + c + h) - zw, WinoV16s)
                         : (WinoV16s){};
          for (int i = 0; i < 4; ++i) {
            WinoV16s row[3]; // row i of G2 g
            for (int kx = 0; kx < 3; ++kx) {
              const WinoV16s g0 = g[kx], g1 = g[3 + kx], g2 = g[6 + kx];
              row[kx] = i == 0 ? g0 + g0 : i == 1 ? g0 + g1 + g2 : i == 2 ? g0 - g1 + g2 : g2 + g2;
            }
            v[h][i * 4] = row[0] + row[0];
            v[h][i * 4 + 1] = row[0] + row[1] + row[2];
            v[h][i * 4 + 2] = row[0] - row[1] + row[2];
            v[h][i * 4 + 3] = row[2] + row[2];
          }
        }
        for (uint32_t point = 0; point < P; ++point) {
          int16_t *u = ut + (size_t)point * chunk * kPanelWidth + (size_t)c * kPanelWidth;
          const WinoV16s a = v[0][point], b = v[1][point];
          wino_store(u, __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                                22, 7, 23));
          wino_store(u + 16, __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                                     29, 14, 30, 15, 31));
        }
      }
      int32_t *m_panel = mt + (size_t)p * rows * P * 16;
      for (uint32_t point = 0; point < P; ++point) {
        const int16_t *u = ut + (size_t)point * chunk * kPanelWidth;
        for (uint32_t row = 0; row < rows; row += MR)
          K::template wino_gemm<MR>(cn2 / 2, vt + (size_t)row * vrow + (size_t)point * chunk, vrow,
                                    u, !first, m_panel + ((size_t)row * P + point) * 16,
                                    (size_t)P * 16);
      }
    }
  }

  // A^T M A = 4 y; the direct path's sums are y + zu * sum_k (w - w_zp) (int8_conv.h).
  for (uint32_t p = 0; p < panels; ++p) {
    const uint32_t nb = r.nb_begin + p, n0 = nb * kPanelWidth;
    const uint32_t nvalid = std::min<uint32_t>(kPanelWidth, j.cout_g - n0);
    const int8_t *panel = weights + nb * panel_bytes;
    WinoV16u wsum = {};
    for (uint32_t k = 0; k < k_total; ++k)
      wsum += (WinoV16u)wino_weight_bytes(panel, k);
    if (wzp)
      wsum -= (WinoV16u)wino_load<WinoV16i>(wzp + n0) * k_total;
    const WinoV16u fold = (uint32_t)w.zu * wsum;
    const int32_t *m = mt + (size_t)p * rows * P * 16;
    for (uint32_t row = 0; row < tiles; ++row) {
      const uint32_t tile = r.tile_begin + row;
      const uint32_t ty = tile / w.tiles_x, tx = tile % w.tiles_x;
      const int32_t *mp = m + (size_t)row * P * 16;
      WinoV16u t[2][4];
      for (int col = 0; col < 4; ++col) {
        const WinoV16u m0 = wino_load<WinoV16u>(mp + col * 16),
                       m1 = wino_load<WinoV16u>(mp + (4 + col) * 16),
                       m2 = wino_load<WinoV16u>(mp + (8 + col) * 16),
                       m3 = wino_load<WinoV16u>(mp + (12 + col) * 16);
        t[0][col] = m0 + m1 + m2;
        t[1][col] = m1 - m2 - m3;
      }
      alignas(64) int32_t y[4][16];
      for (int i = 0; i < 2; ++i) {
        const WinoV16u y0 = t[i][0] + t[i][1] + t[i][2], y1 = t[i][1] - t[i][2] - t[i][3];
        wino_store(y[i * 2], (WinoV16u)((WinoV16i)y0 >> 2) + fold);
        wino_store(y[i * 2 + 1], (WinoV16u)((WinoV16i)y1 >> 2) + fold);
      }
      for (uint32_t dy = 0; dy < 2; ++dy) {
        const uint32_t oy = ty * 2 + dy;
        if (oy >= w.out_h)
          break;
        for (uint32_t dx = 0; dx < 2; ++dx) {
          const uint32_t ox = tx * 2 + dx;
          if (ox >= w.out_w)
            break;
          TO *o = out + oy * j.out_row_stride + ox * j.out_pixel_stride + n0;
          const int32_t *c = y[dy * 2 + dx];
          if (nvalid == kPanelWidth)
            K::requant_store16(c, bias + n0, j.multipliers + n0, lo, hi, j.out_zp, o);
          else
            for (uint32_t x = 0; x < nvalid; ++x)
              o[x] = (TO)requantize(wrap_add(c[x], bias[n0 + x]), j.multipliers[n0 + x], lo, hi,
                                    j.out_zp);
        }
      }
    }
  }
}

template <class K>
void int8_winograd(const manycl::native::Int8WinogradJob &w,
                   const manycl::native::Int8WinogradRange &r) {
  const manycl::native::ConvJob &j = *w.conv;
  const bool in_u8 = j.in_dtype == MCL_DTYPE_U8, out_u8 = j.out_dtype == MCL_DTYPE_U8;
  if (in_u8 && out_u8)
    int8_winograd_impl<K, uint8_t, uint8_t>(w, r);
  else if (in_u8)
    int8_winograd_impl<K, uint8_t, int8_t>(w, r);
  else if (out_u8)
    int8_winograd_impl<K, int8_t, uint8_t>(w, r);
  else
    int8_winograd_impl<K, int8_t, int8_t>(w, r);
}

// Portable GEMM of the Winograd points: C[R][16] (+)= sum over channel pairs q of
// a[i][2q] u[q][x][0] + a[i][2q+1] u[q][x][1], wrapping INT32.
struct PortableWinoGemm {
  static constexpr int WMR = 4;
  template <int R>
  static void wino_gemm(uint32_t pairs, const int16_t *a0, size_t a_stride, const int16_t *u,
                        bool accumulate, int32_t *c, size_t stride) {
    for (int i = 0; i < R; ++i) {
      const int16_t *ai = a0 + (size_t)i * a_stride;
      uint32_t acc[16];
      for (int x = 0; x < 16; ++x)
        acc[x] = accumulate ? (uint32_t)c[i * stride + x] : 0u;
      for (uint32_t q = 0; q < pairs; ++q) {
        const int32_t x0 = ai[2 * q], x1 = ai[2 * q + 1];
        const int16_t *uq = u + (size_t)q * 32;
        for (int x = 0; x < 16; ++x)
          acc[x] += (uint32_t)(x0 * uq[2 * x] + x1 * uq[2 * x + 1]);
      }
      for (int x = 0; x < 16; ++x)
        c[i * stride + x] = (int32_t)acc[x];
    }
  }
};

} // namespace
