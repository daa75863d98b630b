#include "manycl/device/ddr.h"

#include <sys/mman.h>

#include <algorithm>

namespace manycl::device {

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

Result<uint64_t> Ddr::allocate(uint64_t size) {
  if (size == 0)
    return make_error("DDR allocation of 0 bytes");
  if (!base_)
    return make_error("DDR could not be reserved on the host");
  if (size > capacity_)
    return make_error("DDR allocation larger than the DDR");
  uint64_t rounded = (size + kAlignment - 1) & ~(kAlignment - 1);
  std::lock_guard lock(mutex_);
  for (auto it = free_blocks_.begin(); it != free_blocks_.end(); ++it) {
    if (it->second < rounded)
      continue;
    uint64_t offset = it->first;
    uint64_t remaining = it->second - rounded;
    free_blocks_.erase(it);
    if (remaining)
      free_blocks_.emplace(offset + rounded, remaining);
    used_blocks_.emplace(offset, rounded);
    used_bytes_ += rounded;
    return offset;
  }
  return make_error("DDR exhausted: " + std::to_string(size) + " bytes requested, " +
                    std::to_string(capacity_ - used_bytes_) + " free (fragmented)");
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
  // Give the pages back so a long-running process does not keep freed DDR resident; the
  // next allocation of this range reads zeros again.
  uint64_t page = 4096;
  uint64_t first = (offset + page - 1) & ~(page - 1);
  uint64_t last = (offset + size) & ~(page - 1);
  if (last > first)
    madvise(base_ + first, last - first, MADV_DONTNEED);
  // Zero the partial pages at either end, which madvise left untouched.
  if (first > offset || last < offset + size) {
    uint64_t head_end = std::min(first, offset + size);
    std::fill(base_ + offset, base_ + head_end, std::byte{0});
    if (last >= first && last < offset + size)
      std::fill(base_ + last, base_ + offset + size, std::byte{0});
  }

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

} // namespace manycl::device
