// INT8 Winograd F(2x2, 3x3) on the host: which calls it computes exactly, which it computes
// faster, and how a call is cut into tasks. The arithmetic is in int8_winograd_impl.h.
#include "int8_winograd.h"

#include "int8_conv.h"

namespace manycl::native {

namespace {

// Tiles per task at most: a task transforms the weights of its panels itself (a sixteenth of
// a tile-panel's products per tile), so it spreads them over tens of tiles.
constexpr uint32_t kTaskTiles = 64;
static_assert(kTaskTiles <= kInt8WinogradMaxTaskTiles);
// Input channels per pass: a chunk's transformed inputs (64 tiles x 16 points x 64 INT16) and
// one panel's transformed weights (16 x 64 x 16 INT16) stay in L2 beside the products.
constexpr uint32_t kChannelChunk = 64;
// A task's products (16 x 64 bytes per tile and panel) stay in L2 too.
constexpr uint32_t kTaskTilePanels = 256;
// Calls of fewer 2x2 blocks run direct: per call and panel the weights' transform, per tile
// the inputs' transform cost more than the products saved (13x13 512>32, 49 blocks: 1.25x the
// direct time; 26x26 256>32, 169 blocks: 0.75x; manycl_native_conv_bench --net calls).
constexpr uint64_t kPaysTiles = 64;

} // namespace

bool int8_winograd_exact(uint32_t fn, const mcl_conv_args &a, bool weight_zero_points) {
  if (!is_int8(a.input.dtype) || !winograd_shape(fn, a))
    return false;
  // |4 y| < 2^31 with |x - x_zp| <= 255 and |w - w_zp| <= 128 (bytes) or 255 (zero points
  // kept in the block): 9 cin 255 |w - w_zp| < 2^29.
  const uint64_t w_max = weight_zero_points ? 255 : 128;
  return 9ull * a.input.c * 255 * w_max < (1ull << 29);
}

bool int8_winograd_pays(const mcl_conv_args &a) {
  // Per tile and channel the input transform costs about what a panel's 16 products do, and
  // the weights' transform is per task: a few channels, panels or tiles do not repay them.
  const uint64_t tiles = (uint64_t)((a.output.h + 1) / 2) * ((a.output.w + 1) / 2);
  return a.input.c >= 16 && a.output.c >= 16 && tiles >= kPaysTiles;
}

Status run_int8_winograd(const mcl_native_exec &exec, const mcl_conv_args &a, const ConvJob &j,
                         void (*kernel)(const Int8WinogradJob &, const Int8WinogradRange &)) {
  Int8WinogradJob w;
  w.conv = &j;
  w.set_geometry(a, 2);
  w.channel_chunk = std::min<uint32_t>(kChannelChunk, (j.cin_g + 15) / 16 * 16);
  w.zu = int8_unsigned_zero_point(a.input.dtype, a.input_zero_point);

  // Tasks of whole tile blocks and panel ranges (each transforms its panels' weights). Two
  // at least when the PEs allow and each keeps a whole block of tiles: the clusters running at
  // the same time keep the host threads busy, as for float Winograd.
  uint32_t tile_blocks = (w.tiles + kTaskTiles - 1) / kTaskTiles;
  const uint32_t range_panels = std::clamp<uint32_t>(
      kTaskTilePanels / ((w.tiles + tile_blocks - 1) / tile_blocks), 1, j.nblocks);
  const uint32_t ranges = (j.nblocks + range_panels - 1) / range_panels;
  if (tile_blocks * ranges < 2 && exec.pe_count >= 2 && w.tiles >= 2 * kTaskTiles)
    tile_blocks = 2;
  const uint32_t task_tiles = (w.tiles + tile_blocks - 1) / tile_blocks;
  tile_blocks = (w.tiles + task_tiles - 1) / task_tiles;
  parallel_for(exec, tile_blocks * ranges, [&](uint32_t task) {
    const uint32_t tb = task % tile_blocks, pr = task / tile_blocks;
    Int8WinogradRange r{tb * task_tiles, std::min(w.tiles, (tb + 1) * task_tiles),
                        pr * range_panels, std::min(j.nblocks, (pr + 1) * range_panels), nullptr};
    if (r.tile_begin >= r.tile_end || r.nb_begin >= r.nb_end)
      return;
    const size_t bytes =
        int8_winograd_scratch_bytes(w, r.tile_end - r.tile_begin, r.nb_end - r.nb_begin);
    r.scratch = reinterpret_cast<uint8_t *>(float_scratch_for_this_thread((bytes + 3) / 4).data());
    kernel(w, r);
  });
  return Status::Ok();
}

} // namespace manycl::native
