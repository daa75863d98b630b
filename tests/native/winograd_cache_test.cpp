// The cache of Winograd-transformed weights (docs/native.md, "Winograd"): a call whose weights
// lie in stable bytes (mcl_native_exec::stable_*) transforms them once per key; results are
// bit-identical to the uncached path; a new generation (the bytes were rewritten) misses; the
// bound evicts; concurrent clusters share entries.
#include "native_test_util.h"

#include <thread>

using namespace native_test;

namespace {

// One Winograd call (two channel chunks, three panels with a tail, padded borders) whose
// packed parameters are read from host "DDR" slots through the operand hook, as the kbin
// interpreter reads a deferred copy's source; the SPM copy of the block holds NaNs. The
// default 40x40 output is 100 tiles of 4x4, three tile blocks: a call that uses the cache
// (winograd.cpp, kCachedMinTileBlocks); 16x16 is one tile block, which transforms its own.
class WinogradCall {
public:
  static constexpr uint32_t kCin = 40, kCout = 40, kSlots = 2;

  explicit WinogradCall(uint32_t dtype = MCL_DTYPE_F32, uint32_t threads = 2, uint32_t size = 40)
      : kSize(size), spm_(4u << 20, threads), dtype_(dtype) {
    a_.input = place_tile(spm_, kSize, kSize, kCin, dtype, 1, 0, 0);
    a_.output = place_tile(spm_, kSize, kSize, kCout, dtype, 0, 0, 0xee);
    std::mt19937 rng(77);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (uint32_t y = 0; y < kSize; ++y)
      for (uint32_t x = 0; x < kSize; ++x)
        for (uint32_t c = 0; c < kCin; ++c)
          store(tile_elem(spm_, a_.input, y, x, c), uni(rng));
    a_.groups = 1;
    a_.kernel_h = a_.kernel_w = 3;
    a_.stride_h = a_.stride_w = a_.dilation_h = a_.dilation_w = 1;
    a_.origin_y = a_.origin_x = -1; // padding 1 on every border
    a_.flags = MCL_CONV_IMPLICIT_TABLE | MCL_CONV_WINOGRAD;
    a_.act = {MCL_ACT_RELU, 0, 0};
    a_.pad_row_offset = spm_.alloc((uint64_t)kCin * esize(dtype));
    block_bytes_ = mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &a_);
    a_.params_offset = spm_.alloc(block_bytes_);
    std::memset(spm_.base() + a_.params_offset, 0xff, block_bytes_);
    slot_stride_ = (block_bytes_ + 63) / 64 * 64;
    ddr_.assign(slot_stride_ * kSlots, 0);
    exec().operand = view_params;
    exec().operand_user = this;
  }

  // Packs random weights (from `seed`) into a DDR slot: what a host upload would write.
  void write_weights(uint32_t slot, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const size_t count = (size_t)kCout * kCin * 9;
    std::vector<float> wf(count), bias(kCout);
    std::vector<uint16_t> wh(count);
    for (size_t i = 0; i < count; ++i)
      wh[i] = f2h(wf[i] = uni(rng));
    for (auto &b : bias)
      b = uni(rng);
    const void *weights = dtype_ == MCL_DTYPE_F16 ? (const void *)wh.data() : wf.data();
    ASSERT_EQ(mcl_native_pack_conv(MCL_NATIVE_FN_CONV2D, &a_, weights, bias.data(), nullptr,
                                   ddr_.data() + slot * slot_stride_, block_bytes_),
              MCL_NATIVE_OK);
  }

  // Runs with the parameters of `slot`, the DDR stable under `generation` (0: not stable, no
  // cache), and returns the output bytes.
  std::vector<uint8_t> run(uint32_t slot, uint64_t generation) {
    slot_ = slot;
    exec().stable_base = generation ? ddr_.data() : nullptr;
    exec().stable_size = generation ? ddr_.size() : 0;
    exec().stable_generation = generation;
    std::memset(spm_.base() + a_.output.offset, 0xee, output_bytes());
    spm_.run(MCL_NATIVE_FN_CONV2D, a_);
    const uint8_t *out = spm_.base() + a_.output.offset;
    return {out, out + output_bytes()};
  }

  mcl_native_exec &exec() { return spm_.exec(); }

private:
  static const uint8_t *view_params(void *user, uint64_t offset, uint64_t, uint32_t kind) {
    auto *self = static_cast<WinogradCall *>(user);
    if (kind != MCL_NATIVE_OPERAND_PARAMS || offset != self->a_.params_offset)
      return nullptr;
    return self->ddr_.data() + self->slot_ * self->slot_stride_;
  }
  void store(uint8_t *p, float v) {
    if (dtype_ == MCL_DTYPE_F16) {
      const uint16_t h = f2h(v);
      std::memcpy(p, &h, 2);
    } else {
      std::memcpy(p, &v, 4);
    }
  }
  size_t output_bytes() const { return (size_t)kSize * kSize * kCout * esize(dtype_); }

  const uint32_t kSize;
  Spm spm_;
  uint32_t dtype_;
  mcl_conv_args a_{};
  size_t block_bytes_ = 0, slot_stride_ = 0;
  std::vector<uint8_t> ddr_;
  uint32_t slot_ = 0;
};

mcl_native_cache_stats stats() {
  mcl_native_cache_stats s;
  mcl_native_winograd_cache_stats(&s);
  return s;
}

class WinogradCache : public ::testing::Test {
protected:
  void SetUp() override {
    default_capacity_ = stats().capacity;
    mcl_native_winograd_cache_configure(64u << 20, 0.0);
  }
  void TearDown() override { mcl_native_winograd_cache_configure(default_capacity_, 10.0); }
  uint64_t default_capacity_ = 0;
};

TEST_F(WinogradCache, HitIsBitIdenticalToTheUncachedPath) {
  for (uint32_t dtype : {MCL_DTYPE_F32, MCL_DTYPE_F16}) {
    SCOPED_TRACE(dtype == MCL_DTYPE_F16 ? "F16" : "F32");
    mcl_native_winograd_cache_configure(64u << 20, 0.0);
    WinogradCall call(dtype);
    call.write_weights(0, 1);
    const auto uncached = call.run(0, 0);
    EXPECT_EQ(stats().misses, 0u) << "no stable generation: no lookup";
    const auto first = call.run(0, 5);
    mcl_native_cache_stats s = stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.hits, 0u);
    EXPECT_EQ(s.entries, 1u);
    // 3 panels x 2 chunks x 36 points x 33 x 16 floats.
    EXPECT_EQ(s.bytes, 3u * 2 * 36 * 33 * 16 * 4);
    const auto second = call.run(0, 5);
    s = stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(first, uncached);
    EXPECT_EQ(second, uncached);
  }
}

TEST_F(WinogradCache, CallsOfOneTileBlockTransformTheirOwnWeights) {
  // Each weight is then used by one task's tiles only: reading the 3x3 weights and
  // transforming them beats streaming 4x the bytes from the cache.
  WinogradCall call(MCL_DTYPE_F32, 2, 16);
  call.write_weights(0, 1);
  const auto uncached = call.run(0, 0);
  EXPECT_EQ(call.run(0, 5), uncached);
  EXPECT_EQ(call.run(0, 5), uncached);
  const mcl_native_cache_stats s = stats();
  EXPECT_EQ(s.misses + s.hits, 0u);
  EXPECT_EQ(s.entries, 0u);
}

TEST_F(WinogradCache, NewGenerationMissesAndFollowsTheNewWeights) {
  WinogradCall call;
  call.write_weights(0, 1);
  const auto old_result = call.run(0, 7);
  EXPECT_EQ(call.run(0, 7), old_result);
  // The host rewrites the same bytes (a new upload at the same place): a new generation.
  call.write_weights(0, 2);
  const auto expected = call.run(0, 0);
  ASSERT_NE(expected, old_result) << "the new weights must change the result";
  EXPECT_EQ(call.run(0, 8), expected);
  mcl_native_cache_stats s = stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.hits, 1u);
  // Another block of the same bytes (another layer): its own entry.
  call.write_weights(1, 3);
  const auto other = call.run(1, 0);
  EXPECT_EQ(call.run(1, 8), other);
  EXPECT_EQ(call.run(0, 8), expected);
  s = stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.hits, 2u);
  // A retired generation's entries go.
  mcl_native_forget_generation(8);
  EXPECT_EQ(stats().entries, 1u);
  mcl_native_forget_generation(7);
  EXPECT_EQ(stats().entries, 0u);
  EXPECT_EQ(stats().bytes, 0u);
}

TEST_F(WinogradCache, EvictsTheLeastRecentlyUsedAndRefusesWhatItCannotHold) {
  WinogradCall call;
  call.write_weights(0, 1);
  call.write_weights(1, 2);
  const auto expected0 = call.run(0, 0), expected1 = call.run(1, 0);
  const uint64_t entry = 3u * 2 * 36 * 33 * 16 * 4;
  // Room for one entry: the second evicts the first (no protection).
  mcl_native_winograd_cache_configure(entry + entry / 2, 0.0);
  EXPECT_EQ(call.run(0, 1), expected0);
  EXPECT_EQ(call.run(1, 1), expected1);
  mcl_native_cache_stats s = stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_LE(s.bytes, s.capacity);
  EXPECT_EQ(call.run(0, 1), expected0); // evicted: a miss again
  s = stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 0u);
  // Recently used entries protected: the newcomer runs uncached, the old entry stays.
  mcl_native_winograd_cache_configure(entry + entry / 2, 3600.0);
  EXPECT_EQ(call.run(0, 1), expected0);
  EXPECT_EQ(call.run(1, 1), expected1);
  EXPECT_EQ(call.run(0, 1), expected0);
  s = stats();
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.hits, 1u);
  // An entry larger than the bound is never kept; 0 MB turns the cache off.
  mcl_native_winograd_cache_configure(entry - 1, 0.0);
  EXPECT_EQ(call.run(0, 1), expected0);
  mcl_native_winograd_cache_configure(0, 0.0);
  EXPECT_EQ(call.run(1, 1), expected1);
  s = stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.refused, 1u);
}

TEST_F(WinogradCache, ConcurrentClustersShareEntries) {
  // Four clusters (each its own SPM and PEs) run the same two layers at once, as clusters of
  // one command or sub-devices do, each many times: every result is the uncached one.
  constexpr int kClusters = 4, kRuns = 12;
  std::vector<std::vector<uint8_t>> expected(2);
  {
    WinogradCall call;
    call.write_weights(0, 1);
    call.write_weights(1, 2);
    expected[0] = call.run(0, 0);
    expected[1] = call.run(1, 0);
  }
  std::vector<int> mismatches(kClusters, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kClusters; ++t)
    threads.emplace_back([&, t] {
      WinogradCall call;
      call.write_weights(0, 1);
      call.write_weights(1, 2);
      for (int i = 0; i < kRuns; ++i) {
        const uint32_t slot = (uint32_t)(i + t) % 2;
        // Each cluster's DDR copy is its own bytes: its own generation (as two programs).
        if (call.run(slot, 100 + t) != expected[slot])
          ++mismatches[t];
      }
    });
  for (auto &t : threads)
    t.join();
  for (int t = 0; t < kClusters; ++t)
    EXPECT_EQ(mismatches[t], 0) << "cluster " << t;
  const mcl_native_cache_stats s = stats();
  EXPECT_EQ(s.hits + s.misses, (uint64_t)kClusters * kRuns);
  EXPECT_EQ(s.entries, (uint64_t)kClusters * 2);
  EXPECT_EQ(s.hits, (uint64_t)kClusters * (kRuns - 2));
}

TEST_F(WinogradCache, ConcurrentMissesOfOneKeyKeepOneEntry) {
  // Clusters reading the same stable bytes (one multicast weight block): one key; misses at
  // the same moment each compute it, one entry is kept.
  constexpr int kClusters = 4;
  WinogradCall reference;
  reference.write_weights(0, 1);
  const auto expected = reference.run(0, 0);
  // One shared DDR: the clusters' hooks all read reference's slot 0 bytes.
  std::vector<int> mismatches(kClusters, 0);
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<WinogradCall>> calls;
  for (int t = 0; t < kClusters; ++t) {
    calls.push_back(std::make_unique<WinogradCall>());
    calls.back()->write_weights(0, 1);
  }
  for (int t = 0; t < kClusters; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i)
        if (calls[t]->run(0, 42) != expected)
          ++mismatches[t];
    });
  for (auto &t : threads)
    t.join();
  for (int t = 0; t < kClusters; ++t)
    EXPECT_EQ(mismatches[t], 0) << "cluster " << t;
  // Their DDR copies differ in address but not in (generation, offset): one entry.
  EXPECT_EQ(stats().entries, 1u);
}

} // namespace
