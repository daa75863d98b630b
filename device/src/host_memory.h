// Host memory that backs the simulated device's memories (DDR, SPMs): anonymous mappings,
// on transparent huge pages unless MANYCL_HUGE_PAGES=0. A simulated cluster walks its 4 MiB
// SPM and the DDR's parameters at random offsets, and with 4 KiB pages every few lines
// cost a TLB miss; with 2 MiB pages the TLB covers them.
#pragma once

#include <cstddef>

namespace manycl::device {

bool huge_pages_enabled();
// Zero-filled, 2 MiB-aligned memory of `bytes` (null when the host refuses); `reserve_only`
// maps without committing swap (MAP_NORESERVE), for the DDR's large range.
void *map_host_memory(size_t bytes, bool reserve_only = false);
void unmap_host_memory(void *p, size_t bytes);

} // namespace manycl::device
