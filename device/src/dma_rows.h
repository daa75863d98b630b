// The host side of a strided RDMA transfer: rows of a DmaShape moved by the host.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "manycl/device/dma.h"

namespace manycl::device {

namespace dma_rows_detail {

// Calls move(to, from) for rows [first, end) of `s`, counted over all planes.
template <class Move>
void for_each_row(std::byte *dst, const std::byte *src, const DmaShape &s, uint64_t first,
                  uint64_t end, Move &&move) {
  uint64_t p = first / s.rows, row = first % s.rows;
  for (uint64_t i = first; i < end;) {
    const uint64_t run = std::min(end - i, s.rows - row);
    const std::byte *from = src + p * s.src_plane_stride + row * s.src_row_stride;
    std::byte *to = dst + p * s.dst_plane_stride + row * s.dst_row_stride;
    for (uint64_t k = 0; k < run; ++k) {
      move(to, from);
      from += s.src_row_stride;
      to += s.dst_row_stride;
    }
    i += run;
    row = 0;
    ++p;
  }
}

// Rows of exactly N bytes, each loaded whole before it is stored (so a row that overlaps its
// own destination moves as memmove would move it).
template <size_t N>
void copy_fixed(std::byte *dst, const std::byte *src, const DmaShape &s, uint64_t first,
                uint64_t end) {
  for_each_row(dst, src, s, first, end, [](std::byte *to, const std::byte *from) {
    unsigned char bytes[N];
    std::memcpy(bytes, from, N);
    std::memcpy(to, bytes, N);
  });
}

} // namespace dma_rows_detail

// Copies rows [first, end) of `s`, counted over all planes, from `src` to `dst`. Layout
// changes move one element per row (NCHW to NHWC: rows of 1 to 8 bytes, hundreds of
// thousands per network input): those rows are a fixed-size load and store each, not a
// memmove call each.
inline void copy_dma_rows(std::byte *dst, const std::byte *src, const DmaShape &s, uint64_t first,
                          uint64_t end) {
  switch (s.row_bytes) {
  case 1:
    return dma_rows_detail::copy_fixed<1>(dst, src, s, first, end);
  case 2:
    return dma_rows_detail::copy_fixed<2>(dst, src, s, first, end);
  case 4:
    return dma_rows_detail::copy_fixed<4>(dst, src, s, first, end);
  case 8:
    return dma_rows_detail::copy_fixed<8>(dst, src, s, first, end);
  case 12:
    return dma_rows_detail::copy_fixed<12>(dst, src, s, first, end);
  case 16:
    return dma_rows_detail::copy_fixed<16>(dst, src, s, first, end);
  default:
    dma_rows_detail::for_each_row(
        dst, src, s, first, end,
        [&](std::byte *to, const std::byte *from) { std::memmove(to, from, s.row_bytes); });
  }
}

} // namespace manycl::device
