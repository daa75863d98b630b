// Winograd-transformed weights kept across calls (docs/native.md, "Winograd"). A network calls
// the same convolution on many bands, clusters and inferences; its weights' transform
// (G g G^T: 36 floats per 3x3 kernel) is computed once per key and reused.
//
// The key names the weights' bytes by a generation the caller guarantees (the parameters of a
// loaded program: mcl_native_exec::stable_generation, never reused for other bytes) and their
// place in those bytes, plus everything the transformed layout depends on. Bounded (LRU by
// bytes); entries are shared, so one evicted or forgotten while calls use it lives until they
// end.
#pragma once

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "manycl/native/native.h"

namespace manycl::native {

struct WinogradWeightsKey {
  uint64_t generation = 0;   // mcl_native_exec::stable_generation
  uint64_t offset = 0;       // of the weights, in bytes from mcl_native_exec::stable_base
  const void *isa = nullptr; // the transform's rounding is the ISA's (FMA or not)
  uint32_t dtype = 0, cin = 0, panels = 0, chunk = 0;
  auto operator<=>(const WinogradWeightsKey &) const = default;
};

// 64-byte aligned floats (whole cache lines per panel row of 16 floats).
class AlignedFloats {
public:
  explicit AlignedFloats(size_t count);
  float *data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }

private:
  struct Free {
    void operator()(float *p) const;
  };
  size_t bytes_;
  std::unique_ptr<float, Free> data_;
};

class WinogradWeightCache {
public:
  using Entry = std::shared_ptr<const AlignedFloats>;
  using Clock = std::chrono::steady_clock;

  // The process's cache: MANYCL_WINOGRAD_CACHE_MB (default kDefaultMegabytes; 0: off).
  static WinogradWeightCache &shared();
  static constexpr uint64_t kDefaultMegabytes = 1024;
  // An entry used less than this long ago is not evicted for a newcomer (which then runs
  // uncached): a working set larger than the bound keeps the part that fits instead of
  // evicting every entry before its next use (LRU's behaviour on a cyclic pattern).
  static constexpr double kDefaultProtectSeconds = 10.0;

  WinogradWeightCache(uint64_t capacity_bytes, double protect_seconds)
      : capacity_(capacity_bytes), protect_(protect_seconds) {}

  // The entry under `key` (now the most recently used), or null (a miss).
  Entry find(const WinogradWeightsKey &key);
  // Whether an entry of `bytes` would be kept now (room, or entries old enough to evict).
  bool admits(uint64_t bytes);
  // Keeps `entry` under `key` unless another call stored one first (then returns that one)
  // or it no longer fits (then it is returned, not kept: the caller uses it for its call).
  Entry insert(const WinogradWeightsKey &key, Entry entry);
  void forget(uint64_t generation);
  void configure(uint64_t capacity_bytes, double protect_seconds);
  mcl_native_cache_stats stats();

private:
  struct Node {
    Entry entry;
    std::list<WinogradWeightsKey>::iterator lru;
    Clock::time_point last_use;
  };
  // Bytes that evicting entries older than the protection would free, up to `needed`.
  uint64_t evictable_locked(uint64_t needed, Clock::time_point now) const;
  void erase_locked(std::map<WinogradWeightsKey, Node>::iterator it);

  std::mutex mutex_;
  std::map<WinogradWeightsKey, Node> entries_;
  std::list<WinogradWeightsKey> lru_; // front: most recently used
  uint64_t capacity_, bytes_ = 0;
  double protect_;
  mcl_native_cache_stats counts_{};
};

} // namespace manycl::native
