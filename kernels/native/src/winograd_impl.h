// Winograd F(4x4, 3x3) convolution (MCL_CONV_WINOGRAD), written once over the SIMD traits
// class S of kernels_impl.h and compiled once per ISA translation unit.
//
// A 4x4 block of outputs is A^T [(G g G^T) . (B^T d B)] A, with d the 6x6 input patch under the
// block and g the 3x3 kernel: per output block and input channel 36 products instead of 144.
// The elementwise products over the input channels are 36 independent GEMMs
// (tiles x channels) . (channels x output channels), run with the same register blocking as the
// direct convolution. Transformation matrices: Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks" (2016), interpolation points 0, +-1, +-2 and infinity.
// Where a task's transforms, GEMMs and buffers live: winograd.cpp and docs/native.md.
#pragma once

#include "kernels_impl.h"
#include "winograd.h"

namespace {

template <class S> struct WinogradTransforms {
  using VF = typename S::VF;

  // o = B^T d over six values (a column or a row of the input patch).
  [[gnu::always_inline]] static inline void input(const VF *d, VF *o) {
    const VF four = S::bcast(4.0f), five = S::bcast(5.0f), two = S::bcast(2.0f);
    const VF d4_minus_d2 = d[4] - d[2];
    o[0] = S::fma(four, d[0], d[4]) - five * d[2];
    o[1] = (d[3] + d[4]) - four * (d[1] + d[2]);
    o[2] = (d[4] - d[3]) + four * (d[1] - d[2]);
    o[3] = d4_minus_d2 + two * (d[3] - d[1]);
    o[4] = d4_minus_d2 + two * (d[1] - d[3]);
    o[5] = S::fma(four, d[1], d[5]) - five * d[3];
  }

  // X^T d X of an N x N tile into an M x M one, for a 1-D transform `f` of N values into M
  // (B^T: 6 -> 6, G: 3 -> 6, A^T: 6 -> 4): columns first, then rows. load(y, x) gives
  // element (y, x); store(i, j, v) takes result (i, j).
  template <int N, int M, class F, class Load, class Store>
  [[gnu::always_inline]] static inline void separable(F &&f, Load &&load, Store &&store) {
    // Fully unrolled, so that the tile lives in registers (as loops, GCC kept it on the stack:
    // 5x the instructions of the weight transform).
    VF t[M][N];
#pragma GCC unroll 8
    for (int x = 0; x < N; ++x) {
      VF col[N], o[M];
#pragma GCC unroll 8
      for (int y = 0; y < N; ++y)
        col[y] = load(y, x);
      f(col, o);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i)
        t[i][x] = o[i];
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      VF o[M];
      f(t[i], o);
#pragma GCC unroll 8
      for (int j = 0; j < M; ++j)
        store(i, j, o[j]);
    }
  }

  // B^T d B of one 6x6 patch, W channels: load(y, x) gives patch pixel (y, x); point (i, j)
  // is stored at dst + (6 i + j) * point_stride.
  template <class Load>
  [[gnu::always_inline]] static inline void input_patch(Load &&load, float *dst,
                                                        size_t point_stride) {
    separable<6, 6>(input, load, [&](int i, int j, VF v) {
      S::store(dst + (size_t)(i * 6 + j) * point_stride, v);
    });
  }

  // o = A^T m over six values: four outputs.
  [[gnu::always_inline]] static inline void output(const VF *m, VF *o) {
    const VF two = S::bcast(2.0f), four = S::bcast(4.0f), eight = S::bcast(8.0f);
    const VF sum12 = m[1] + m[2], diff12 = m[1] - m[2];
    const VF sum34 = m[3] + m[4], diff34 = m[3] - m[4];
    o[0] = (m[0] + sum12) + sum34;
    o[1] = S::fma(two, diff34, diff12);
    o[2] = S::fma(four, sum34, sum12);
    o[3] = S::fma(eight, diff34, diff12) + m[5];
  }

  // o = G g over three values: six outputs.
  [[gnu::always_inline]] static inline void weights(const VF *g, VF *o) {
    const VF quarter = S::bcast(0.25f), sixth = S::bcast(1.0f / 6.0f);
    const VF twelfth = S::bcast(1.0f / 12.0f), twentyfourth = S::bcast(1.0f / 24.0f);
    const VF outer = g[0] + g[2];
    o[0] = quarter * g[0];
    o[1] = -(sixth * (outer + g[1]));
    o[2] = -(sixth * (outer - g[1]));
    const VF even = S::fma(twentyfourth, g[0], sixth * g[2]);
    o[3] = S::fma(twelfth, g[1], even);
    o[4] = even - twelfth * g[1];
    o[5] = g[2];
  }
};

// Zero elements for the patch pixels outside the input tile: a channel chunk's worth.
template <class T> alignas(64) inline constexpr T kZeroChannels[kWinogradMaxChunk] = {};

// C[MR][16] (+)= sum over c in [0, n) of A[i][c] * U[c][0..16), row i of A at a[i] (the
// transformed input of one tile and point, channels contiguous), row i of C at c + i * stride:
// the direct path's micro-kernel (kernels_impl.h) with strided sums, so that a tile's 36
// products are contiguous for the output transform.
template <class S, int MR>
static inline void winograd_gemm_block(uint32_t n, const float *const *a, const float *u,
                                       bool accumulate, float *c, size_t stride) {
  constexpr int V = kPanelWidth / S::W;
  typename S::VF acc[MR][V];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      acc[i][v] = accumulate ? S::load(c + i * stride + v * S::W) : S::zero();
  for (uint32_t k = 0; k < n; ++k, u += kPanelWidth) {
    typename S::VF b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      b[v] = S::load(u + v * S::W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const typename S::VF ai = S::bcast(a[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[i][v] = S::fma(ai, b[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      S::store(c + i * stride + v * S::W, acc[i][v]);
}

// The last register block of a task: `n` rows (1 <= n <= N < MR), rows `a_stride` floats
// apart from `a0`, as a block of exactly n rows.
template <class S, int N>
static inline void winograd_gemm_tail(uint32_t n, uint32_t cn, const float *a0, size_t a_stride,
                                      const float *u, bool accumulate, float *c, size_t stride) {
  if constexpr (N >= 1) {
    if (n == (uint32_t)N) {
      const float *a[N];
      for (int i = 0; i < N; ++i)
        a[i] = a0 + (size_t)i * a_stride;
      winograd_gemm_block<S, N>(cn, a, u, accumulate, c, stride);
      return;
    }
    winograd_gemm_tail<S, N - 1>(n, cn, a0, a_stride, u, accumulate, c, stride);
  }
}

// G g G^T of input channels [c0, c0 + cn) of panel `panel` (its 16 output channels, V vectors)
// into ut, [point][channel - c0][16] with points winograd_weight_point_floats apart. The taps
// of channel c + 8 are fetched ahead (nine lines far apart, read once per transform).
template <class S, class T>
static void winograd_weight_chunk(const WinogradJob &w, uint32_t panel, uint32_t c0, uint32_t cn,
                                  float *ut) {
  using VF = typename S::VF;
  using X = WinogradTransforms<S>;
  constexpr int W = S::W, V = kPanelWidth / W;
  const ConvJob &j = *w.conv;
  const uint32_t cin = j.cin_g;
  const size_t upoint = winograd_weight_point_floats(w);
  const T *weights =
      reinterpret_cast<const T *>(j.weights) + (size_t)panel * ((size_t)j.taps * cin * kPanelWidth);
  for (uint32_t c = 0; c < cn; ++c) {
    const T *wc = weights + (size_t)(c0 + c) * kPanelWidth;
    if (c + 8 < cn)
      for (int t = 0; t < 9; ++t)
        __builtin_prefetch(wc + ((size_t)t * cin + 8) * kPanelWidth);
    for (int v = 0; v < V; ++v) {
      X::template separable<3, 6>(
          X::weights,
          [&](int ky, int kx) {
            return S::load(wc + (size_t)(ky * 3 + kx) * cin * kPanelWidth + v * W);
          },
          [&](int i, int k, VF value) {
            S::store(ut + (size_t)(i * 6 + k) * upoint + (size_t)c * kPanelWidth + v * W, value);
          });
    }
  }
}

// One task: tiles [tile_begin, tile_end) x panels [nb_begin, nb_end) of a call, in chunks of
// w.channel_chunk input channels. Per chunk: the tiles' inputs are transformed (B^T d B), then
// per panel the chunk's weights (G g G^T) and the 36 GEMMs add into the panel's products; at
// the end A^T M A and the epilogue write the outputs. Scratch (r.scratch): the chunk's
// transformed inputs [row][point][chunk], one panel's transformed weights [point][chunk][16],
// the products of every panel [panel][row][point][16]. A tile's 36 points are contiguous, so
// transforming a tile touches one block of memory, and all of it stays in L2 (the planner in
// winograd.cpp sizes the tasks). T: input, weight and output elements (float or binary16).
template <class S, class T>
static void winograd_impl(const WinogradJob &w, const WinogradRange &r) {
  using VF = typename S::VF;
  using X = WinogradTransforms<S>;
  constexpr int W = S::W, V = kPanelWidth / W, MR = S::MR;
  constexpr uint32_t P = kWinogradPoints;
  const ConvJob &j = *w.conv;
  const T *in = reinterpret_cast<const T *>(j.in);
  T *out = reinterpret_cast<T *>(j.out);
  const T *residual = reinterpret_cast<const T *>(j.residual);
  const float *bias = static_cast<const float *>(j.bias);
  const FloatEpilogue ep(j.act);
  const uint32_t cin = j.cin_g, chunk = w.channel_chunk;
  const uint32_t tiles = r.tile_end - r.tile_begin, panels = r.nb_end - r.nb_begin;
  const uint32_t rows = (tiles + MR - 1) / MR * MR; // whole register blocks
  // A chunk's 36 points of a tile are chunk floats apart (128 bytes), those of the weights
  // padded (winograd_weight_point_floats).
  const size_t vpoint = chunk, vrow = P * vpoint;
  const size_t upoint = winograd_weight_point_floats(w);
  const size_t panel_floats = r.transformed ? winograd_panel_weight_floats(w) : 0;
  float *vt = r.scratch;
  float *ut = vt + rows * vrow;
  float *mt = ut + P * upoint;

  // The tiles' patch origins and which of their rows and columns lie inside the input tile.
  using Patch = WinogradPatch<T>;
  Patch patches[kWinogradMaxTaskTiles];
  winograd_patches(w, in, r.tile_begin, tiles, kWinogradOut, 6, patches);

  for (uint32_t c0 = 0; c0 < cin; c0 += chunk) {
    const uint32_t cn = std::min(chunk, cin - c0);
    const bool first = c0 == 0;
    // Inputs of the chunk, W channels at a time.
    for (uint32_t row = 0; row < tiles; ++row) {
      float *dst = vt + row * vrow;
      const Patch &pt = patches[row];
      // A patch inside the input tile and whole vectors of channels: plain loads.
      if (pt.rows_inside == 0x3f && pt.cols_inside == 0x3f && cn % W == 0) {
        for (uint32_t c = 0; c < cn; c += W) {
          const T *base = pt.origin + c0 + c;
          X::input_patch(
              [&](int y, int x) {
                return S::load(base + y * w.in_row_stride + x * w.in_pixel_stride);
              },
              dst + c, vpoint);
        }
        continue;
      }
      // A patch over the border, whole vectors: its pixels outside the input tile read a row
      // of zeros (small maps are mostly border: 12 of 16 patches at 13x13).
      if (cn % W == 0) {
        const T *pixel[36];
        for (int y = 0; y < 6; ++y)
          for (int x = 0; x < 6; ++x)
            pixel[y * 6 + x] = ((pt.rows_inside >> y) & (pt.cols_inside >> x) & 1)
                                   ? pt.origin + y * w.in_row_stride + x * w.in_pixel_stride + c0
                                   : kZeroChannels<T>;
        for (uint32_t c = 0; c < cn; c += W)
          X::input_patch([&](int y, int x) { return S::load(pixel[y * 6 + x] + c); }, dst + c,
                         vpoint);
        continue;
      }
      for (uint32_t c = 0; c < cn; c += W) {
        const uint32_t count = std::min<uint32_t>(W, cn - c);
        // W channels of patch pixel (y, x): zero outside the input tile or past the channels.
        auto load_pixel = [&](int y, int x) -> VF {
          if (!((pt.rows_inside >> y) & (pt.cols_inside >> x) & 1))
            return S::zero();
          const T *p = pt.origin + y * w.in_row_stride + x * w.in_pixel_stride + c0 + c;
          if (count == (uint32_t)W)
            return S::load(p);
          alignas(64) float tmp[W] = {};
          for (uint32_t l = 0; l < count; ++l)
            tmp[l] = to_float(p[l]);
          return S::load(tmp);
        };
        X::input_patch(load_pixel, dst + c, vpoint);
      }
    }
    for (uint32_t p = 0; p < panels; ++p) {
      // The chunk's transformed weights for this panel: cached for the call, or computed now.
      const float *u_chunk = ut;
      if (r.transformed)
        u_chunk = r.transformed + (size_t)(r.nb_begin + p) * panel_floats +
                  (size_t)(c0 / chunk) * P * upoint;
      else
        winograd_weight_chunk<S, T>(w, r.nb_begin + p, c0, cn, ut);
      // The 36 GEMMs of the chunk, register block by register block; the last block has the
      // tiles left (no products of padding rows: 13x13 maps are 16 tiles, 18 rows in blocks
      // of 6).
      float *m_panel = mt + (size_t)p * rows * P * 16;
      const uint32_t full_rows = tiles / MR * MR;
      for (uint32_t point = 0; point < P; ++point) {
        const float *u = u_chunk + (size_t)point * upoint;
        float *m_point = m_panel + (size_t)point * 16;
        for (uint32_t row = 0; row < full_rows; row += MR) {
          const float *a[MR];
          for (int i = 0; i < MR; ++i)
            a[i] = vt + (row + i) * vrow + point * vpoint;
          winograd_gemm_block<S, MR>(cn, a, u, !first, m_point + (size_t)row * P * 16,
                                     (size_t)P * 16);
        }
        if (full_rows < tiles)
          winograd_gemm_tail<S, MR - 1>(tiles - full_rows, cn,
                                        vt + full_rows * vrow + point * vpoint, vrow, u, !first,
                                        m_point + (size_t)full_rows * P * 16, (size_t)P * 16);
      }
    }
  }

  // Outputs: A^T M A per tile and panel, then bias, residual, activation and store.
  for (uint32_t p = 0; p < panels; ++p) {
    const float *m = mt + (size_t)p * rows * P * 16;
    const uint32_t n0 = (r.nb_begin + p) * kPanelWidth;
    const uint32_t nvalid = std::min<uint32_t>(kPanelWidth, j.cout_g - n0);
    // A whole panel with a clamp or LeakyRelu epilogue: each output row of a block leaves
    // from the registers through the direct path's finish_block.
    if constexpr (StoresFromRegisters<S, T>) {
      if ((!ep.general || ep.leaky) && nvalid == kPanelWidth) {
        for (uint32_t row = 0; row < tiles; ++row) {
          const uint32_t tile = r.tile_begin + row;
          const uint32_t ty = tile / w.tiles_x, tx = tile % w.tiles_x;
          const uint32_t ny = std::min<uint32_t>(kWinogradOut, w.out_h - ty * kWinogradOut);
          const uint32_t nx = std::min<uint32_t>(kWinogradOut, w.out_w - tx * kWinogradOut);
          VF block[kWinogradOut][kWinogradOut][V];
          for (int v = 0; v < V; ++v)
            X::template separable<6, 4>(
                X::output,
                [&](int y, int x) {
                  return S::load(m + ((size_t)row * P + y * 6 + x) * 16 + v * W);
                },
                [&](int y, int x, VF value) { block[y][x][v] = value; });
          for (uint32_t y = 0; y < ny; ++y) {
            const uint32_t oy = ty * kWinogradOut + y;
            T *o[kWinogradOut];
            const T *res[kWinogradOut];
            for (uint32_t x = 0; x < kWinogradOut; ++x) {
              const uint32_t ox = tx * kWinogradOut + std::min(x, nx - 1);
              o[x] = out + oy * j.out_row_stride + ox * j.out_pixel_stride + n0;
              res[x] = residual ? residual + oy * j.res_row_stride + ox * j.res_pixel_stride + n0
                                : nullptr;
            }
            const DirectStore<T> direct{
                o, residual ? res : nullptr, bias + n0, ep.lo, ep.hi, ep.leaky, j.act.alpha, nx};
            finish_block<S, (int)kWinogradOut, V, T>(block[y], nullptr, &direct);
          }
        }
        continue;
      }
    }
    for (uint32_t row = 0; row < tiles; ++row) {
      const uint32_t tile = r.tile_begin + row;
      const uint32_t ty = tile / w.tiles_x, tx = tile % w.tiles_x;
      alignas(64) float block[kWinogradOut * kWinogradOut][kPanelWidth];
      for (int v = 0; v < V; ++v)
        X::template separable<6, 4>(
            X::output,
            [&](int y, int x) { return S::load(m + ((size_t)row * P + y * 6 + x) * 16 + v * W); },
            [&](int y, int x, VF value) { S::store(&block[y * 4 + x][v * W], value); });
      for (uint32_t y = 0; y < kWinogradOut; ++y) {
        const uint32_t oy = ty * kWinogradOut + y;
        if (oy >= w.out_h)
          break;
        for (uint32_t x = 0; x < kWinogradOut; ++x) {
          const uint32_t ox = tx * kWinogradOut + x;
          if (ox >= w.out_w)
            break;
          T *o = out + oy * j.out_row_stride + ox * j.out_pixel_stride + n0;
          const T *res =
              residual ? residual + oy * j.res_row_stride + ox * j.res_pixel_stride + n0 : nullptr;
          epilogue_row<S, T>(j, ep, block[y * 4 + x], nvalid, bias + n0, o, res);
        }
      }
    }
  }
}

template <class S> static void winograd(const WinogradJob &w, const WinogradRange &r) {
  if (w.conv->in_dtype == MCL_DTYPE_F16)
    winograd_impl<S, uint16_t>(w, r);
  else
    winograd_impl<S, float>(w, r);
}

// Every chunk of one panel's weights, transformed (WinogradRange::transformed's layout).
template <class S> static void winograd_weights(const WinogradJob &w, uint32_t panel, float *dst) {
  const uint32_t cin = w.conv->cin_g, chunk = w.channel_chunk;
  const size_t chunk_floats = (size_t)kWinogradPoints * winograd_weight_point_floats(w);
  for (uint32_t c0 = 0; c0 < cin; c0 += chunk, dst += chunk_floats) {
    if (w.conv->in_dtype == MCL_DTYPE_F16)
      winograd_weight_chunk<S, uint16_t>(w, panel, c0, std::min(chunk, cin - c0), dst);
    else
      winograd_weight_chunk<S, float>(w, panel, c0, std::min(chunk, cin - c0), dst);
  }
}

} // namespace
