#include "winograd_cache.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace manycl::native {

AlignedFloats::AlignedFloats(size_t count)
    : bytes_((count * sizeof(float) + 63) / 64 * 64),
      data_(static_cast<float *>(std::aligned_alloc(64, bytes_ ? bytes_ : 64))) {
  if (!data_)
    throw std::bad_alloc();
}

void AlignedFloats::Free::operator()(float *p) const {
  std::free(p);
}

WinogradWeightCache &WinogradWeightCache::shared() {
  // Never destroyed: programs released by other static destructors at exit still forget
  // their generations here (the process frees the memory).
  static WinogradWeightCache *cache = [] {
    uint64_t megabytes = kDefaultMegabytes;
    if (const char *env = std::getenv("MANYCL_WINOGRAD_CACHE_MB"); env && *env) {
      char *end = nullptr;
      const unsigned long long value = std::strtoull(env, &end, 10);
      if (end && *end == 0)
        megabytes = value;
    }
    return new WinogradWeightCache(megabytes << 20, kDefaultProtectSeconds);
  }();
  return *cache;
}

WinogradWeightCache::Entry WinogradWeightCache::find(const WinogradWeightsKey &key) {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++counts_.misses;
    return nullptr;
  }
  ++counts_.hits;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  it->second.last_use = Clock::now();
  return it->second.entry;
}

uint64_t WinogradWeightCache::evictable_locked(uint64_t needed, Clock::time_point now) const {
  uint64_t freed = 0;
  for (auto it = lru_.rbegin(); it != lru_.rend() && freed < needed; ++it) {
    const Node &node = entries_.find(*it)->second;
    if (std::chrono::duration<double>(now - node.last_use).count() < protect_)
      break; // the rest were used more recently still
    freed += node.entry->bytes();
  }
  return freed;
}

bool WinogradWeightCache::admits(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  const uint64_t free_bytes = capacity_ - bytes_;
  const bool fits = bytes <= capacity_ &&
                    (bytes <= free_bytes ||
                     evictable_locked(bytes - free_bytes, Clock::now()) >= bytes - free_bytes);
  if (!fits)
    ++counts_.refused;
  return fits;
}

void WinogradWeightCache::erase_locked(std::map<WinogradWeightsKey, Node>::iterator it) {
  bytes_ -= it->second.entry->bytes();
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

WinogradWeightCache::Entry WinogradWeightCache::insert(const WinogradWeightsKey &key, Entry entry) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end())
    return it->second.entry; // built by a concurrent call: the same values
  const uint64_t bytes = entry->bytes();
  const auto now = Clock::now();
  if (bytes > capacity_ ||
      (bytes > capacity_ - bytes_ &&
       evictable_locked(bytes - (capacity_ - bytes_), now) < bytes - (capacity_ - bytes_))) {
    ++counts_.refused;
    return entry;
  }
  while (bytes > capacity_ - bytes_) {
    erase_locked(entries_.find(lru_.back()));
    ++counts_.evictions;
  }
  lru_.push_front(key);
  entries_.emplace(key, Node{entry, lru_.begin(), now});
  bytes_ += bytes;
  return entry;
}

void WinogradWeightCache::forget(uint64_t generation) {
  std::lock_guard lock(mutex_);
  auto it = entries_.lower_bound(WinogradWeightsKey{generation});
  while (it != entries_.end() && it->first.generation == generation)
    erase_locked(it++);
}

void WinogradWeightCache::configure(uint64_t capacity_bytes, double protect_seconds) {
  std::lock_guard lock(mutex_);
  entries_.clear();
  lru_.clear();
  bytes_ = 0;
  capacity_ = capacity_bytes;
  protect_ = protect_seconds;
  counts_ = {};
}

mcl_native_cache_stats WinogradWeightCache::stats() {
  std::lock_guard lock(mutex_);
  mcl_native_cache_stats s = counts_;
  s.entries = entries_.size();
  s.bytes = bytes_;
  s.capacity = capacity_;
  return s;
}

} // namespace manycl::native

extern "C" uint64_t mcl_native_new_generation(void) {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

extern "C" void mcl_native_forget_generation(uint64_t generation) {
  manycl::native::WinogradWeightCache::shared().forget(generation);
}

extern "C" void mcl_native_winograd_cache_stats(mcl_native_cache_stats *out) {
  if (out)
    *out = manycl::native::WinogradWeightCache::shared().stats();
}

extern "C" void mcl_native_winograd_cache_configure(uint64_t capacity_bytes,
                                                    double protect_seconds) {
  manycl::native::WinogradWeightCache::shared().configure(capacity_bytes, protect_seconds);
}
