// INT8 3x3 convolutions computed on the host as integer Winograd F(2x2, 3x3): a host-side
// choice for calls whose result it reproduces exactly (the record still describes the direct
// convolution, so the simulated device, its modeled time and the bytes are unchanged).
//
// Exactness. With B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G2 = 2 G = [2 0 0; 1 1 1;
// 1 -1 1; 0 0 2] and A^T = [1 1 1 0; 0 1 -1 -1], every matrix is integer and
//   4 y = A^T [ (G2 g G2^T) . (B^T d B) ] A
// for a 2x2 output block y, d the 4x4 patch of (x - x_zp) and g the 3x3 kernel of (w - w_zp).
// |x - x_zp| <= 255 gives |B^T d B| <= 1020 and |w - w_zp| <= 255 gives |G2 g G2^T| <= 2295:
// both INT16, products and pair sums exact in vpmaddwd. The sums wrap modulo 2^32 like the
// direct path's; 4 y is recovered exactly when |4 y| < 2^31, which int8_winograd_exact()
// guarantees from the channel count and the weights' range (9 cin 255 |w - w_zp| < 2^29).
#pragma once

#include "winograd_geometry.h"

namespace manycl::native {

inline constexpr uint32_t kInt8WinogradPoints = 16; // (2 + 3 - 1)^2

struct Int8WinogradJob : WinogradGeometry { // tiles: 2x2 output blocks
  const ConvJob *conv = nullptr;
  uint32_t channel_chunk = 0; // input channels per pass (a multiple of 16)
  int32_t zu = 0;             // the input zero point as the unsigned byte multiplied
};

inline constexpr uint32_t kInt8WinogradMaxTaskTiles = 96;

struct Int8WinogradRange {
  uint32_t tile_begin, tile_end, nb_begin, nb_end;
  uint8_t *scratch; // int8_winograd_scratch_bytes
};

// Bytes of scratch of a task: transformed inputs [rows][16][chunk] INT16, one panel's
// transformed weights [16][chunk/2][16][2] INT16, the products [panels][rows][16][16] INT32.
inline size_t int8_winograd_scratch_bytes(const Int8WinogradJob &w, uint32_t tiles,
                                          uint32_t panels) {
  const size_t rows = (size_t)tiles + kMaxRows;
  return 2 * kInt8WinogradPoints * (rows * w.channel_chunk + (size_t)w.channel_chunk * 16) +
         4 * (size_t)panels * rows * kInt8WinogradPoints * 16 + 64;
}

// Whether an INT8 convolution call is a 3x3, stride 1, dilation 1, one-group convolution with
// a derived table whose Winograd result is exact (see above).
bool int8_winograd_exact(uint32_t fn, const mcl_conv_args &a, bool weight_zero_points);

// Whether the host computes the call faster as Winograd (enough blocks and channels).
bool int8_winograd_pays(const mcl_conv_args &a);

Status run_int8_winograd(const mcl_native_exec &exec, const mcl_conv_args &a, const ConvJob &j,
                         void (*kernel)(const Int8WinogradJob &, const Int8WinogradRange &));

} // namespace manycl::native
