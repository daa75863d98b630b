#include "kann/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace kann::format {
namespace {

// Slice-by-8 tables of the reflected Castagnoli polynomial.
struct Crc32cTables {
  uint32_t t[8][256];
  constexpr Crc32cTables() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s)
        t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
constexpr Crc32cTables kCrc32c;

#if defined(__x86_64__)
// SSE 4.2's crc32 computes exactly CRC-32C: 8 bytes an instruction instead of 8 table
// lookups (a 100 MB ResNet-50 binary is checksummed at every load, on both sides of the ICD).
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                        size_t size) {
  uint64_t c = crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size--)
    c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

} // namespace

uint32_t crc32c_update_portable(uint32_t crc, const void *data, size_t size) {
  const auto *p = static_cast<const uint8_t *>(data);
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8); // the file is little-endian, like every host this runs on
    word ^= crc;
    crc = kCrc32c.t[7][word & 0xFF] ^ kCrc32c.t[6][(word >> 8) & 0xFF] ^
          kCrc32c.t[5][(word >> 16) & 0xFF] ^ kCrc32c.t[4][(word >> 24) & 0xFF] ^
          kCrc32c.t[3][(word >> 32) & 0xFF] ^ kCrc32c.t[2][(word >> 40) & 0xFF] ^
          kCrc32c.t[1][(word >> 48) & 0xFF] ^ kCrc32c.t[0][word >> 56];
    p += 8;
    size -= 8;
  }
  while (size--)
    crc = (crc >> 8) ^ kCrc32c.t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

bool crc32c_uses_cpu_instruction() {
#if defined(__x86_64__)
  return cpu_has_sse42();
#else
  return false;
#endif
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t size) {
#if defined(__x86_64__)
  if (cpu_has_sse42())
    return crc32c_sse42(crc, static_cast<const uint8_t *>(data), size);
#endif
  return crc32c_update_portable(crc, data, size);
}

} // namespace kann::format
