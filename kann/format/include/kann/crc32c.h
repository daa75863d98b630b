// CRC-32C (Castagnoli), the checksum of kann binaries (docs/kbin-format.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kann::format {

// Continues a CRC-32C over `size` bytes; the caller pre- and post-inverts (start from
// 0xFFFFFFFF, finish with ~crc). Uses the CPU's CRC32 instruction where it has one (SSE 4.2),
// table lookups otherwise; both give the same value.
uint32_t crc32c_update(uint32_t crc, const void *data, size_t size);

// The table-driven implementation alone (tests compare it with the dispatched one).
uint32_t crc32c_update_portable(uint32_t crc, const void *data, size_t size);

// Whether crc32c_update uses a CPU instruction on this host.
bool crc32c_uses_cpu_instruction();

} // namespace kann::format
