// The DDR allocator: freed blocks keep their host pages for the next allocations (no page fault
// per page again), up to Ddr::kKeptFreedBytes; blocks asked for as zeros read as zeros whatever
// was freed there before; blocks the caller overwrites are not cleared; what is given back never
// touches a neighbouring block.
#include "manycl/device/ddr.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

using manycl::device::Ddr;

namespace {

long minor_faults() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return r.ru_minflt;
}

// Host pages of [p, p + bytes) that are committed.
size_t resident_pages(const std::byte *p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<std::byte *>(p), bytes, in.data()), 0);
  return static_cast<size_t>(
      std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
}

bool all_bytes(const std::byte *p, size_t n, std::byte v) {
  return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

TEST(Ddr, FreedBlockIsReusedWithoutPageFaults) {
  Ddr ddr(1ull << 30);
  const uint64_t size = 16ull << 20;
  auto a = ddr.allocate(size);
  ASSERT_TRUE(a.ok());
  std::memset(ddr.at(*a), 0x5a, size);
  ddr.free(*a);
  EXPECT_EQ(ddr.kept_freed(), size);
  EXPECT_EQ(resident_pages(ddr.at(*a), size), size / 4096);

  const long before = minor_faults();
  auto b = ddr.allocate(size, Ddr::Contents::Overwritten);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a); // the lowest free block that fits
  std::memset(ddr.at(*b), 0x33, size);
  EXPECT_LT(minor_faults() - before, 64) << "a page fault per page (4,096) means the pages went";
  EXPECT_EQ(ddr.kept_freed(), 0u);
}

TEST(Ddr, ZeroBlocksReadZeroAfterReuse) {
  Ddr ddr(64ull << 20);
  for (uint64_t size : {1ull, 100ull, 4096ull, 5000ull, 3ull << 20}) {
    SCOPED_TRACE(size);
    auto a = ddr.allocate(size);
    ASSERT_TRUE(a.ok());
    std::memset(ddr.at(*a), 0xab, size);
    ddr.free(*a);
    auto b = ddr.allocate(size); // Contents::Zero
    ASSERT_TRUE(b.ok());
    const uint64_t rounded = (size + Ddr::kAlignment - 1) & ~(Ddr::kAlignment - 1);
    EXPECT_TRUE(all_bytes(ddr.at(*b), rounded, std::byte{0}));
    ddr.free(*b);
  }
}

TEST(Ddr, OverwrittenBlocksAreNotClearedButTheirTailIs) {
  Ddr ddr(64ull << 20);
  auto a = ddr.allocate(8192);
  ASSERT_TRUE(a.ok());
  std::memset(ddr.at(*a), 0xcd, 8192);
  ddr.free(*a);
  auto b = ddr.allocate(1000, Ddr::Contents::Overwritten);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(*b, *a);
  EXPECT_TRUE(all_bytes(ddr.at(*b), 1000, std::byte{0xcd})); // no clearing: the caller writes
  EXPECT_TRUE(all_bytes(ddr.at(*b) + 1000, 1024 - 1000, std::byte{0})); // the rounding tail
  // The rest of the freed block is still free and dirty: cleared when taken as zeros.
  auto c = ddr.allocate(8192 - 1024);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *a + 1024);
  EXPECT_TRUE(all_bytes(ddr.at(*c), 8192 - 1024, std::byte{0}));
}

TEST(Ddr, KeptFreedBytesAreBoundedAndTheRestGoesBack) {
  Ddr ddr(2ull << 30);
  const uint64_t size = Ddr::kKeptFreedBytes; // two of them: twice the bound
  auto a = ddr.allocate(size), b = ddr.allocate(size);
  ASSERT_TRUE(a.ok() && b.ok());
  std::memset(ddr.at(*a), 0x11, size);
  std::memset(ddr.at(*b), 0x22, size);
  ddr.free(*a);
  ddr.free(*b);
  EXPECT_EQ(ddr.kept_freed(), Ddr::kKeptFreedBytes);
  // The higher block went back to the host kernel (reused last by a lowest-first allocator).
  EXPECT_EQ(resident_pages(ddr.at(*b), size), 0u);
  EXPECT_EQ(resident_pages(ddr.at(*a), size), size / 4096);
  auto c = ddr.allocate(2 * size);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *a);
  EXPECT_TRUE(all_bytes(ddr.at(*c), 2 * size, std::byte{0}));
  EXPECT_EQ(ddr.kept_freed(), 0u);
}

TEST(Ddr, GivingPagesBackNeverTouchesNeighbours) {
  Ddr ddr(2ull << 30);
  // Blocks that share host pages with their neighbours: 128-byte aligned, not page aligned.
  std::vector<uint64_t> blocks;
  for (uint64_t size : {100ull, 5000ull, 300ull, 9000ull, 128ull})
    blocks.push_back(*ddr.allocate(size));
  const uint64_t big_size = Ddr::kKeptFreedBytes + (1ull << 20);
  auto big = ddr.allocate(big_size);
  ASSERT_TRUE(big.ok());
  auto after = ddr.allocate(200);
  ASSERT_TRUE(after.ok());
  for (size_t i = 0; i < blocks.size(); ++i)
    std::memset(ddr.at(blocks[i]), 0x40 + int(i), 100);
  std::memset(ddr.at(*after), 0x7e, 200);
  std::memset(ddr.at(*big), 0x99, big_size);
  ddr.free(blocks[1]);
  ddr.free(blocks[3]);
  ddr.free(*big); // over the bound: most of it goes back, down to partial pages
  EXPECT_LE(ddr.kept_freed(), Ddr::kKeptFreedBytes);
  for (size_t i : {0, 2, 4})
    EXPECT_TRUE(all_bytes(ddr.at(blocks[i]), 100, std::byte(0x40 + int(i)))) << i;
  EXPECT_TRUE(all_bytes(ddr.at(*after), 200, std::byte{0x7e}));
  // Everything free reads as zeros when taken as zeros, in pieces of any size.
  for (uint64_t size : {5000ull, 9000ull, 64ull << 20, big_size - (64ull << 20)}) {
    auto z = ddr.allocate(size);
    ASSERT_TRUE(z.ok()) << size;
    EXPECT_TRUE(all_bytes(ddr.at(*z), size, std::byte{0})) << size;
  }
  EXPECT_EQ(ddr.kept_freed(), 0u);
}

} // namespace
