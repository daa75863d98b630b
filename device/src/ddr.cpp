#include "manycl/device/ddr.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace manycl::device {

namespace {
constexpr uint64_t kPage = 4096;
} // namespace

Ddr::Ddr(uint64_t capacity) : capacity_(capacity) {
  void *p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    capacity_ = 0;
    return;
  }
  base_ = static_cast<std::byte *>(p);
  free_blocks_.emplace(0, capacity);
}

Ddr::~Ddr() {
  if (base_)
    munmap(base_, capacity_);
}

uint64_t Ddr::used() const {
  std::lock_guard lock(mutex_);
  return used_bytes_;
}

uint64_t Ddr::kept_freed() const {
  std::lock_guard lock(mutex_);
  return dirty_bytes_;
}

Result<uint64_t> Ddr::allocate(uint64_t size, Contents contents) {
  if (size == 0)
    return make_error("DDR allocation of 0 bytes");
  if (!base_)
    return make_error("DDR could not be reserved on the host");
  if (size > capacity_)
    return make_error("DDR allocation larger than the DDR");
  uint64_t rounded = (size + kAlignment - 1) & ~(kAlignment - 1);
  std::vector<std::pair<uint64_t, uint64_t>> to_zero;
  uint64_t offset = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(free_blocks_.begin(), free_blocks_.end(),
                           [&](const auto &block) { return block.second >= rounded; });
    if (it == free_blocks_.end())
      return make_error("DDR exhausted: " + std::to_string(size) + " bytes requested, " +
                        std::to_string(capacity_ - used_bytes_) + " free (fragmented)");
    offset = it->first;
    uint64_t remaining = it->second - rounded;
    free_blocks_.erase(it);
    if (remaining)
      free_blocks_.emplace(offset + rounded, remaining);
    used_blocks_.emplace(offset, rounded);
    used_bytes_ += rounded;
    // Only the bytes the caller asked for are overwritten; the rounding tail stays zero.
    const uint64_t written = contents == Contents::Overwritten ? size : 0;
    take_dirty(offset, offset + written, nullptr);
    take_dirty(offset + written, offset + rounded, &to_zero);
  }
  // The block is the caller's alone now: no need to hold the lock while clearing it.
  for (auto [from, to] : to_zero)
    std::memset(base_ + from, 0, to - from);
  return offset;
}

bool Ddr::is_allocated(uint64_t offset, uint64_t size) const {
  if (!contains(offset, size))
    return false;
  std::lock_guard lock(mutex_);
  auto it = used_blocks_.upper_bound(offset);
  if (it == used_blocks_.begin())
    return false;
  --it;
  return offset - it->first <= it->second && size <= it->second - (offset - it->first);
}

void Ddr::free(uint64_t offset) {
  std::lock_guard lock(mutex_);
  auto it = used_blocks_.find(offset);
  if (it == used_blocks_.end())
    return;
  uint64_t size = it->second;
  used_blocks_.erase(it);
  used_bytes_ -= size;

  // The block keeps its pages (and contents) for the next allocations, up to kKeptFreedBytes.
  auto [dirty, added] = dirty_.emplace(offset, size);
  (void)added; // a used block is never dirty
  dirty_bytes_ += size;
  if (auto next = std::next(dirty); next != dirty_.end() && offset + size == next->first) {
    dirty->second += next->second;
    dirty_.erase(next);
  }
  if (dirty != dirty_.begin()) {
    if (auto prev = std::prev(dirty); prev->first + prev->second == offset) {
      prev->second += dirty->second;
      dirty_.erase(dirty);
    }
  }
  trim_dirty();

  auto [pos, inserted] = free_blocks_.emplace(offset, size);
  (void)inserted;
  auto next = std::next(pos);
  if (next != free_blocks_.end() && pos->first + pos->second == next->first) {
    pos->second += next->second;
    free_blocks_.erase(next);
  }
  if (pos != free_blocks_.begin()) {
    auto prev = std::prev(pos);
    if (prev->first + prev->second == pos->first) {
      prev->second += pos->second;
      free_blocks_.erase(pos);
    }
  }
}

void Ddr::take_dirty(uint64_t begin, uint64_t end,
                     std::vector<std::pair<uint64_t, uint64_t>> *to_zero) {
  if (begin >= end)
    return;
  auto it = dirty_.upper_bound(begin);
  if (it != dirty_.begin() && std::prev(it)->first + std::prev(it)->second > begin)
    --it;
  while (it != dirty_.end() && it->first < end) {
    const uint64_t from = it->first, to = it->first + it->second;
    const uint64_t cut_from = std::max(from, begin), cut_to = std::min(to, end);
    if (to_zero)
      to_zero->emplace_back(cut_from, cut_to);
    dirty_bytes_ -= cut_to - cut_from;
    it = dirty_.erase(it);
    if (from < cut_from)
      dirty_.emplace(from, cut_from - from);
    if (cut_to < to)
      it = dirty_.emplace(cut_to, to - cut_to).first;
  }
}

void Ddr::trim_dirty() {
  while (dirty_bytes_ > kKeptFreedBytes) {
    auto last = std::prev(dirty_.end());
    const uint64_t excess = dirty_bytes_ - kKeptFreedBytes;
    const uint64_t end = last->first + last->second;
    const uint64_t begin = last->second > excess ? end - excess : last->first;
    // Whole pages go back to the host kernel (they read as zeros when touched again); the
    // partial pages at either end are zeroed by hand.
    const uint64_t first = std::min(end, (begin + kPage - 1) & ~(kPage - 1));
    const uint64_t last_page = std::max(first, end & ~(kPage - 1));
    if (last_page > first)
      madvise(base_ + first, last_page - first, MADV_DONTNEED);
    std::memset(base_ + begin, 0, first - begin);
    std::memset(base_ + last_page, 0, end - last_page);
    dirty_bytes_ -= end - begin;
    if (begin > last->first)
      last->second = begin - last->first;
    else
      dirty_.erase(last);
  }
}

} // namespace manycl::device
