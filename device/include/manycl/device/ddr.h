// The device's external DDR: one contiguous address space reserved on the host and backed
// lazily (pages are committed on first touch), with a capacity-enforcing allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "manycl/result.h"

namespace manycl::device {

class Ddr {
public:
  static constexpr uint64_t kAlignment = 128; // = CL_DEVICE_MEM_BASE_ADDR_ALIGN / 8

  explicit Ddr(uint64_t capacity);
  ~Ddr();
  Ddr(const Ddr &) = delete;
  Ddr &operator=(const Ddr &) = delete;

  // Returns the offset of a zero-filled block of `size` bytes, or an error when the DDR is
  // exhausted or could not be reserved. Size 0 is rejected.
  Result<uint64_t> allocate(uint64_t size);
  void free(uint64_t offset);

  std::byte *base() const { return base_; }
  std::byte *at(uint64_t offset) const { return base_ + offset; }
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  // True when [offset, offset + size) lies inside the DDR address space.
  bool contains(uint64_t offset, uint64_t size) const {
    return offset <= capacity_ && size <= capacity_ - offset;
  }

  // True when [offset, offset + size) lies inside one allocated block (blocks are rounded up
  // to kAlignment). Used by the RDMA engine so that a transfer never touches free DDR.
  bool is_allocated(uint64_t offset, uint64_t size) const;

private:
  std::byte *base_ = nullptr;
  uint64_t capacity_ = 0;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> free_blocks_; // offset -> size, coalesced
  std::map<uint64_t, uint64_t> used_blocks_; // offset -> size
  uint64_t used_bytes_ = 0;
};

} // namespace manycl::device
