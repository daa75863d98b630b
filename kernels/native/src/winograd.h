// Winograd F(4x4, 3x3) convolution (MCL_CONV_WINOGRAD): the job shared by the planner in
// winograd.cpp and the per-ISA kernels of winograd_impl.h.
#pragma once

#include "winograd_geometry.h"

namespace manycl::native {

inline constexpr uint32_t kWinogradOut = 4;     // output block edge
inline constexpr uint32_t kWinogradPoints = 36; // (4 + 3 - 1)^2 transformed points

// A convolution call seen as a grid of 4x4 output blocks ("tiles"); tile t covers output rows
// 4*(t / tiles_x) + [0, 4) and columns 4*(t % tiles_x) + [0, 4) of the call's output.
struct WinogradJob : WinogradGeometry {
  const ConvJob *conv = nullptr; // pointers, strides, epilogue (no address table)
  uint32_t channel_chunk = 0;    // input channels per pass: a multiple of 16
};

// Input channels per pass at most (winograd.cpp picks the chunk).
inline constexpr uint32_t kWinogradMaxChunk = 32;

// Tiles of one task at most (winograd_impl.h keeps their patch origins on the stack).
inline constexpr uint32_t kWinogradMaxTaskTiles = 64;

// Half-open work range of a task, and its scratch (winograd_scratch_floats floats).
// `transformed`: the call's transformed weights (winograd_weight_floats, panel after panel,
// as the per-ISA `winograd_weights` writes them), or null: the task transforms its panels'
// weights itself, chunk by chunk, into its scratch.
struct WinogradRange {
  uint32_t tile_begin, tile_end, nb_begin, nb_end;
  float *scratch;
  const float *transformed;
};

// Stride in floats between the transformed points of one chunk of a panel's weights,
// [point][channel of the chunk][16]: padded by one cache line so that the 36 points are not
// 4 KiB apart (stores and loads at such distances alias in L1).
inline size_t winograd_weight_point_floats(const WinogradJob &w) {
  return ((size_t)w.channel_chunk + 1) * kPanelWidth;
}
// Floats of one panel's transformed weights: its chunks one after the other.
inline size_t winograd_panel_weight_floats(const WinogradJob &w) {
  const size_t chunks = (w.conv->cin_g + w.channel_chunk - 1) / w.channel_chunk;
  return chunks * kWinogradPoints * winograd_weight_point_floats(w);
}

// Floats of scratch a task of `tiles` tiles and `panels` panels needs (winograd_impl.h), for
// rows rounded up to whole register blocks (the widest ISA's rows at most).
inline size_t winograd_scratch_floats(const WinogradJob &w, uint32_t tiles, uint32_t panels) {
  const size_t rows = (size_t)tiles + kMaxRows;
  return kWinogradPoints *
         (rows * (size_t)w.channel_chunk + ((size_t)w.channel_chunk + 1) * kPanelWidth +
          (size_t)panels * rows * kPanelWidth);
}

// Whether a convolution call may run as Winograd F(4x4, 3x3) (validation and the compiler).
bool winograd_applies(uint32_t fn, const mcl_conv_args &a);

Status run_winograd(const mcl_native_exec &exec, const mcl_conv_args &a, const ConvJob &j);

} // namespace manycl::native
