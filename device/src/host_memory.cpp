#include "host_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace manycl::device {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
} // namespace

bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char *v = std::getenv("MANYCL_HUGE_PAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

void *map_host_memory(size_t bytes, bool reserve_only) {
  if (bytes == 0)
    return nullptr;
  // One huge page more than asked, so that the range can start on a huge-page boundary
  // (the kernel backs only aligned 2 MiB ranges with huge pages); the slack is unmapped.
  const size_t mapped = bytes + kHugePage;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve_only ? MAP_NORESERVE : 0);
  void *p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED)
    return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t)(kHugePage - 1);
  if (aligned > start)
    munmap(p, aligned - start);
  const uintptr_t end = start + mapped, used_end = aligned + bytes;
  if (end > used_end)
    munmap(reinterpret_cast<void *>(used_end), end - used_end);
  void *q = reinterpret_cast<void *>(aligned);
  if (huge_pages_enabled())
    madvise(q, bytes, MADV_HUGEPAGE); // advice only: without THP the pages stay small
  return q;
}

void unmap_host_memory(void *p, size_t bytes) {
  if (p)
    munmap(p, bytes);
}

} // namespace manycl::device
