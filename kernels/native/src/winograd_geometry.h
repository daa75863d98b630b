// What the float F(4x4, 3x3) and the INT8 F(2x2, 3x3) Winograd paths share: which calls have
// their shape, a call seen as a grid of output tiles, and each tile's input patch.
#pragma once

#include "internal.h"

namespace manycl::native {

// A 3x3, stride-1, dilation-1, one-group convolution whose input tile is read by its geometry
// (no stored address table): the shape both Winograd paths compute.
inline bool winograd_shape(uint32_t fn, const mcl_conv_args &a) {
  return fn == MCL_NATIVE_FN_CONV2D && a.groups == 1 && a.kernel_h == 3 && a.kernel_w == 3 &&
         a.stride_h == 1 && a.stride_w == 1 && a.dilation_h == 1 && a.dilation_w == 1 &&
         (a.flags & (MCL_CONV_NO_TABLE | MCL_CONV_IMPLICIT_TABLE)) != 0;
}

// A call's output as a grid of `out_tile` x `out_tile` blocks ("tiles"); tile t covers output
// rows out_tile*(t / tiles_x) + [0, out_tile) and the matching columns.
struct WinogradGeometry {
  int64_t origin_y = 0, origin_x = 0; // input pixel under output (0, 0)'s first tap
  int64_t in_h = 0, in_w = 0, in_row_stride = 0, in_pixel_stride = 0; // elements
  uint32_t out_h = 0, out_w = 0;
  uint32_t tiles_x = 0, tiles = 0;

  void set_geometry(const mcl_conv_args &a, uint32_t out_tile) {
    origin_y = a.origin_y;
    origin_x = a.origin_x;
    in_h = a.input.h;
    in_w = a.input.w;
    in_row_stride = a.input.row_stride;
    in_pixel_stride = a.input.pixel_stride;
    out_h = a.output.h;
    out_w = a.output.w;
    tiles_x = (a.output.w + out_tile - 1) / out_tile;
    tiles = tiles_x * ((a.output.h + out_tile - 1) / out_tile);
  }
};

// A tile's input patch: its origin and which of its rows and columns lie inside the input
// tile (bit k: patch row / column k).
template <class T> struct WinogradPatch {
  const T *origin;
  uint8_t rows_inside, cols_inside;
};

// The patches (`patch` x `patch` inputs) of tiles [tile_begin, tile_begin + count).
template <class T>
void winograd_patches(const WinogradGeometry &g, const T *in, uint32_t tile_begin, uint32_t count,
                      uint32_t out_tile, int patch, WinogradPatch<T> *out) {
  for (uint32_t row = 0; row < count; ++row) {
    const uint32_t tile = tile_begin + row;
    const int64_t y0 = g.origin_y + (int64_t)(tile / g.tiles_x) * out_tile;
    const int64_t x0 = g.origin_x + (int64_t)(tile % g.tiles_x) * out_tile;
    WinogradPatch<T> &pt = out[row];
    pt.origin = in + y0 * g.in_row_stride + x0 * g.in_pixel_stride;
    pt.rows_inside = pt.cols_inside = 0;
    for (int k = 0; k < patch; ++k) {
      pt.rows_inside |= (uint8_t)((y0 + k >= 0 && y0 + k < g.in_h) << k);
      pt.cols_inside |= (uint8_t)((x0 + k >= 0 && x0 + k < g.in_w) << k);
    }
  }
}

} // namespace manycl::native
