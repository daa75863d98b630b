// The device's external DDR: one contiguous address space reserved on the host and backed
// lazily (pages are committed on first touch), with a capacity-enforcing allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "manycl/result.h"

namespace manycl::device {

class Ddr {
public:
  static constexpr uint64_t kAlignment = 128; // = CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8
  // Freed bytes kept committed for the next allocations, at most: a process that frees and
  // allocates again (a buffer per call, a model's blocks per run) reuses the host pages instead
  // of taking a page fault and a kernel page clear for each of them again.
  static constexpr uint64_t kKeptFreedBytes = 256ull << 20;

  // What a new block must hold.
  enum class Contents {
    Zero,       // zeros
    Overwritten // anything: the caller writes every byte before anyone reads it
  };

  explicit Ddr(uint64_t capacity);
  ~Ddr();
  Ddr(const Ddr &) = delete;
  Ddr &operator=(const Ddr &) = delete;

  // Returns the offset of a block of `size` bytes holding `contents`, or an error when the DDR is
  // exhausted or could not be reserved. Size 0 is rejected.
  Result<uint64_t> allocate(uint64_t size, Contents contents = Contents::Zero);
  void free(uint64_t offset);

  std::byte *base() const { return base_; }
  std::byte *at(uint64_t offset) const { return base_ + offset; }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  // Freed bytes that still hold their old contents (committed host pages), at most
  // kKeptFreedBytes.
  uint64_t kept_freed() const;
  // True when [offset, offset + size) lies inside the DDR address space.
  bool contains(uint64_t offset, uint64_t size) const {
    return offset <= capacity_ && size <= capacity_ - offset;
  }

  // True when [offset, offset + size) lies inside one allocated block (blocks are rounded up
  // to kAlignment). Used by the RDMA engine so that a transfer never touches free DDR.
  bool is_allocated(uint64_t offset, uint64_t size) const;

private:
  // Removes [begin, end) from dirty_; the ranges it held go to `to_zero` when given.
  void take_dirty(uint64_t begin, uint64_t end,
                  std::vector<std::pair<uint64_t, uint64_t>> *to_zero);
  // Returns dirty ranges to zeros, highest offsets first (the allocator takes the lowest free
  // block that fits, so those are reused last), until at most kKeptFreedBytes are dirty.
  void trim_dirty();

  std::byte *base_ = nullptr;
  uint64_t capacity_ = 0;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> free_blocks_; // offset -> size, coalesced
  std::map<uint64_t, uint64_t> used_blocks_; // offset -> size
  uint64_t used_bytes_ = 0;
  // Free bytes that may not read as zero (freed, still committed): offset -> size, coalesced.
  // Every other free byte reads as zero (never touched, or given back to the host kernel).
  std::map<uint64_t, uint64_t> dirty_;
  uint64_t dirty_bytes_ = 0;
};

} // namespace manycl::device
