// Winograd F(4x4, 3x3) convolution: which calls qualify, and how a call is cut into tasks.
// The arithmetic is in winograd_impl.h (one copy per ISA).
#include "winograd.h"

#include "winograd_cache.h"

namespace manycl::native {

namespace {

// Tiles per task at most: a task transforms the weights of its panels itself (about 9 tiles'
// worth of GEMM work per channel and panel), so it multiplies them by tens of tiles.
constexpr uint32_t kTaskTiles = 48;
static_assert(kTaskTiles <= kWinogradMaxTaskTiles);
// Input channels per pass: the chunk's transformed inputs (48 tiles: 36 x 48 x 32 floats) and
// one panel's transformed weights (36 x 32 x 16) stay in L2 beside the products, which are
// reloaded once per chunk (a sixteenth of the GEMM's work).
constexpr uint32_t kChannelChunk = kWinogradMaxChunk;
// A task's products (36 x 64 bytes per tile and panel) stay in L2 too: tasks take at most
// this many tile-panels.
constexpr uint32_t kTaskTilePanels = 128;
constexpr uint32_t kMinRangePanels = 4;
// When a call uses the cache of transformed weights: only when its tasks would transform the
// same weights several times (one per tile block) and the transformed weights are small
// enough to stay in the caches between tile blocks. A transform costs about a twentieth of a
// tile block's products, but transformed weights are 4 times the bytes of the 3x3 ones (8
// times FP16's): a call that streams them from DRAM (YOLOv3-tiny's 13x13 512>32: 2.4 MB per
// call) runs 1.5-2x slower than one that reads the 3x3 weights and transforms them.
constexpr uint32_t kCachedMinTileBlocks = 3;
constexpr size_t kCachedMaxBytes = size_t(1) << 20;

// The call's transformed weights from the cache (computed and kept on a miss), or null: the
// weights are not in stable bytes, or there is no room (the tasks then transform their own).
WinogradWeightCache::Entry cached_weights(const mcl_native_exec &exec, const WinogradJob &w,
                                          const IsaKernels &isa) {
  const ConvJob &j = *w.conv;
  const uint64_t weight_bytes =
      (uint64_t)j.nblocks * j.taps * j.cin_g * kPanelWidth * dtype_size(j.in_dtype);
  const uintptr_t base = reinterpret_cast<uintptr_t>(exec.stable_base);
  const uintptr_t at = reinterpret_cast<uintptr_t>(j.weights);
  if (exec.stable_generation == 0 || !exec.stable_base || at < base ||
      at - base > exec.stable_size || weight_bytes > exec.stable_size - (at - base))
    return nullptr;
  WinogradWeightCache &cache = WinogradWeightCache::shared();
  const WinogradWeightsKey key{
      exec.stable_generation, (uint64_t)(at - base), &isa, j.in_dtype, j.cin_g, j.nblocks,
      w.channel_chunk};
  try {
    if (auto hit = cache.find(key))
      return hit;
    const size_t panel_floats = winograd_panel_weight_floats(w);
    if (!cache.admits(panel_floats * j.nblocks * sizeof(float)))
      return nullptr;
    auto built = std::make_shared<AlignedFloats>(panel_floats * j.nblocks);
    float *dst = built->data();
    parallel_for(exec, j.nblocks, [&](uint32_t panel) {
      isa.winograd_weights(w, panel, dst + panel * panel_floats);
    });
    return cache.insert(key, std::move(built));
  } catch (const std::bad_alloc &) {
    return nullptr; // out of host memory: computed without the cache
  }
}

} // namespace

bool winograd_applies(uint32_t fn, const mcl_conv_args &a) {
  return (a.input.dtype == MCL_DTYPE_F32 || a.input.dtype == MCL_DTYPE_F16) &&
         winograd_shape(fn, a);
}

Status run_winograd(const mcl_native_exec &exec, const mcl_conv_args &a, const ConvJob &j) {
  const IsaKernels &isa = active_kernels();
  WinogradJob w;
  w.conv = &j;
  w.set_geometry(a, kWinogradOut);
  w.channel_chunk = std::min<uint32_t>(kChannelChunk, (j.cin_g + 15) / 16 * 16);

  // Tasks of whole tile blocks and panel ranges: a range transforms its tiles' inputs once
  // for all its panels, and its products must stay in L2.
  const uint32_t tile_blocks = (w.tiles + kTaskTiles - 1) / kTaskTiles;
  const bool worth_caching =
      tile_blocks >= kCachedMinTileBlocks &&
      winograd_panel_weight_floats(w) * j.nblocks * sizeof(float) <= kCachedMaxBytes;
  const WinogradWeightCache::Entry transformed =
      worth_caching ? cached_weights(exec, w, isa) : nullptr;
  const uint32_t task_tiles = (w.tiles + tile_blocks - 1) / tile_blocks; // even blocks
  uint32_t range_panels =
      std::clamp<uint32_t>(kTaskTilePanels / std::max(task_tiles, 1u), 1, j.nblocks);
  // Two tasks at least when the PEs allow (the clusters running at the same time keep the
  // host threads busy): a call of one tile block spreads its panels over two ranges, if each
  // keeps kMinRangePanels (a range transforms the inputs again: about a third of a panel's
  // products).
  const uint32_t want_tasks = std::min<uint32_t>(2, std::max<uint32_t>(1, exec.pe_count));
  if (tile_blocks * ((j.nblocks + range_panels - 1) / range_panels) < want_tasks) {
    const uint32_t want_ranges = (want_tasks + tile_blocks - 1) / tile_blocks;
    range_panels = std::max<uint32_t>(std::min(kMinRangePanels, j.nblocks),
                                      (j.nblocks + want_ranges - 1) / want_ranges);
  }
  const uint32_t ranges = (j.nblocks + range_panels - 1) / range_panels;
  parallel_for(exec, tile_blocks * ranges, [&](uint32_t task) {
    const uint32_t tb = task % tile_blocks, pr = task / tile_blocks;
    WinogradRange r{tb * task_tiles,   std::min(w.tiles, (tb + 1) * task_tiles),
                    pr * range_panels, std::min(j.nblocks, (pr + 1) * range_panels),
                    nullptr,           transformed ? transformed->data() : nullptr};
    if (r.tile_begin >= r.tile_end || r.nb_begin >= r.nb_end)
      return;
    r.scratch = float_scratch_for_this_thread(
                    winograd_scratch_floats(w, r.tile_end - r.tile_begin, r.nb_end - r.nb_begin))
                    .data();
    isa.winograd(w, r);
  });
  return Status::Ok();
}

} // namespace manycl::native
