// kbin writer/reader: round trip, and rejection of corrupted binaries with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>

#include "handmade_program.h"
#include "kann/crc32c.h"

namespace {

using namespace kann;

std::vector<uint8_t> written() {
  auto bytes = format::write_kbin(test::make_handmade().program);
  EXPECT_TRUE(bytes.ok()) << bytes.error().message;
  return bytes.value();
}

std::string rejection(const std::vector<uint8_t> &bytes, format::DeviceLimits limits = {}) {
  auto r = format::read_kbin(bytes.data(), bytes.size(), limits);
  return r.ok() ? "" : r.error().message;
}

TEST(Format, RoundTripPreservesEverything) {
  auto m = test::make_handmade();
  m.program.report_json = "{\"ops\":[]}";
  auto bytes = format::write_kbin(m.program);
  ASSERT_TRUE(bytes.ok());
  auto p = format::read_kbin(bytes.value().data(), bytes.value().size());
  ASSERT_TRUE(p.ok()) << p.error().message;
  const auto &q = p.value();
  EXPECT_EQ(q.cluster_count, 2u);
  EXPECT_EQ(q.spm_required, m.program.spm_required);
  EXPECT_EQ(q.preset, "small");
  EXPECT_EQ(q.params, m.program.params);
  EXPECT_EQ(q.report_json, m.program.report_json);
  ASSERT_EQ(q.tensors.size(), 2u);
  EXPECT_EQ(q.tensors[1].name, "features");
  EXPECT_EQ(q.tensors[1].dims, (std::vector<uint64_t>{1, 8, 6, 3}));
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(q.streams[k].size(), m.program.streams[k].size());
    for (size_t i = 0; i < q.streams[k].size(); ++i) {
      EXPECT_EQ(q.streams[k][i].function_id, m.program.streams[k][i].function_id);
      EXPECT_EQ(q.streams[k][i].args, m.program.streams[k][i].args);
      EXPECT_FALSE(format::describe_record(q.streams[k][i]).empty());
    }
  }
  // Writing what was read gives the same bytes.
  auto again = format::write_kbin(q);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), bytes.value());
}

TEST(Format, DeviceMismatchIsExplained) {
  auto bytes = written();
  EXPECT_NE(rejection(bytes, {5, 0}).find("compiled for 2 clusters"), std::string::npos);
  EXPECT_NE(rejection(bytes, {2, 1024}).find("SPM"), std::string::npos);
  EXPECT_EQ(rejection(bytes, {2, 256 << 10}), "");
}

TEST(Format, EveryTruncationIsRejected) {
  auto bytes = written();
  for (size_t n = 0; n < bytes.size(); n += (n < 512 ? 1 : 61)) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_NE(rejection(cut), "") << "accepted a binary truncated to " << n << " bytes";
  }
}

// A bitwise CRC-32C, the definition the table-driven kbin_checksum must agree with.
uint32_t reference_crc32c(const std::vector<uint8_t> &bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Format, ChecksumIsCrc32cOfTheFileWithItsFieldZeroed) {
  auto bytes = written();
  ASSERT_GE(bytes.size(), sizeof(kbin_header));
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + offsetof(kbin_header, checksum), 4);
  // The same bytes with the checksum field read as zero.
  const size_t field = offsetof(kbin_header, checksum);
  std::vector<uint8_t> zeroed(bytes.begin(), bytes.begin() + field);
  zeroed.insert(zeroed.end(), 4, uint8_t{0});
  zeroed.insert(zeroed.end(), bytes.begin() + field + 4, bytes.end());
  EXPECT_EQ(stored, reference_crc32c(zeroed));
  EXPECT_EQ(format::kbin_checksum(bytes.data(), bytes.size()), stored);
  // The standard check value of CRC-32C ("123456789" -> 0xE3069283) pins the polynomial.
  const std::string check = "123456789";
  EXPECT_EQ(reference_crc32c({check.begin(), check.end()}), 0xE3069283u);
}

// The CPU-instruction path (SSE 4.2 where the host has it) and the table path agree on every
// length, alignment and starting value, and both give CRC-32C's check value.
TEST(Format, Crc32cCpuInstructionAndTablesAgree) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(4096 + 16);
  for (auto &b : data)
    b = static_cast<uint8_t>(rng());
  const std::string check = "123456789";
  for (auto update : {format::crc32c_update, format::crc32c_update_portable})
    EXPECT_EQ(~update(0xFFFFFFFFu, check.data(), check.size()), 0xE3069283u);
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t size : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(63),
                        size_t(1000), size_t(4096)}) {
      const uint32_t start = static_cast<uint32_t>(rng());
      EXPECT_EQ(format::crc32c_update(start, data.data() + offset, size),
                format::crc32c_update_portable(start, data.data() + offset, size))
          << "offset " << offset << ", " << size << " bytes";
    }
  std::printf("crc32c: %s\n",
              format::crc32c_uses_cpu_instruction() ? "CPU instruction (SSE 4.2)" : "tables");
}

// Every single-bit flip anywhere is refused by the checksum (CRC-32C detects all of them);
// a tampered binary must also carry a recomputed checksum to reach the other checks.
TEST(Format, EveryBitFlipIsRejectedByTheChecksum) {
  auto bytes = written();
  for (size_t at = 0; at < bytes.size(); at += (at < 256 ? 1 : 7)) {
    auto copy = bytes;
    copy[at] ^= uint8_t(1u << (at % 8));
    std::string msg = rejection(copy);
    // Flips in magic, version, header size and file size are reported as what they break.
    if (at >= 24)
      EXPECT_NE(msg.find("checksum does not match"), std::string::npos)
          << "byte " << at << ": " << msg;
    else
      EXPECT_NE(msg, "") << "byte " << at;
  }
}

TEST(Format, ResealedBitFlipsNeverCrashAndHeaderFlipsAreRejected) {
  auto bytes = written();
  std::mt19937 rng(42);
  size_t rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    auto copy = bytes;
    size_t at = rng() % copy.size();
    copy[at] ^= uint8_t(1u << (rng() % 8));
    format::reseal_kbin(copy.data(), copy.size());
    std::string msg = rejection(copy);
    if (!msg.empty())
      ++rejected;
    // Header fields that must match the rest of the file exactly (not the minor version,
    // the informational PE count, SPM sizes and scratch size that may grow, the checksum
    // that was just recomputed, the preset name).
    const bool strict = at < 10 || (at >= 12 && at < 28) || (at >= 64 && at < 76);
    if (strict) {
      EXPECT_NE(msg, "") << "header byte " << at;
    }
  }
  EXPECT_GT(rejected, 100u);
}

format::Program handmade() {
  return test::make_handmade().program;
}

// Cluster 0's first transfer (a parameter multicast) turned into an SPM -> SPMs exchange to
// the clusters of `mask`.
format::Record exchange_multicast(const format::Program &p, uint32_t mask) {
  kbin_dma_args d;
  p.streams[0][0].decode(d);
  d.kind = KBIN_DMA_EXCHANGE_MULTICAST;
  d.ddr = {};
  d.cluster_mask = mask;
  d.spm_dst_offset = d.spm_offset;
  return format::Record::make(KBIN_FN_DMA, d);
}

TEST(Format, SemanticCorruptionsAreRejectedWithReasons) {
  struct Case {
    const char *expect;
    void (*mutate)(format::Program &);
  };
  const Case cases[] = {
      {"unknown function id", [](format::Program &p) { p.streams[0][1].function_id = 77; }},
      {"exceeds its buffer",
       [](format::Program &p) {
         kbin_dma_args d;
         p.streams[1][1].decode(d);
         d.ddr.offset = 1u << 20;
         p.streams[1][1] = format::Record::make(KBIN_FN_DMA, d);
       }},
      {"SPM range",
       [](format::Program &p) {
         kbin_dma_args d;
         p.streams[0][2].decode(d);
         d.spm_offset = p.spm_required - 4;
         p.streams[0][2] = format::Record::make(KBIN_FN_DMA, d);
       }},
      {"writes to input",
       [](format::Program &p) {
         kbin_dma_args d;
         p.streams[0][6].decode(d);
         d.ddr.arg_index = 0;
         p.streams[0][6] = format::Record::make(KBIN_FN_DMA, d);
       }},
      {"beyond",
       [](format::Program &p) {
         kbin_dma_args d;
         p.streams[0][0].decode(d);
         d.cluster_mask = 0x7;
         p.streams[0][0] = format::Record::make(KBIN_FN_DMA, d);
       }},
      {"exchange multicast to fewer than two clusters",
       [](format::Program &p) { p.streams[0][0] = exchange_multicast(p, 0x2); }},
      {"exchange multicast to its own cluster",
       [](format::Program &p) { p.streams[0][0] = exchange_multicast(p, 0x3); }},
      {"names clusters beyond",
       [](format::Program &p) { p.streams[0][0] = exchange_multicast(p, 0x6); }},
      {"deadlock",
       [](format::Program &p) {
         p.streams[1].pop_back(), p.streams[1].erase(p.streams[1].begin() + 3);
       }},
      {"deadlock",
       [](format::Program &p) {
         p.streams[0].push_back(
             format::Record::make(KBIN_FN_WAIT_SIGNAL, kbin_wait_signal_args{3, 0, 1}));
       }},
      {"conv2d",
       [](format::Program &p) {
         mcl_conv_args a;
         p.streams[1][5].decode(a);
         a.output.offset = p.spm_required; // output past the SPM
         p.streams[1][5] = format::Record::make(MCL_NATIVE_FN_CONV2D, a);
       }},
      {"bytes, expected", [](format::Program &p) { p.streams[0][1].args.resize(40); }},
      {"argument index", [](format::Program &p) { p.tensors[1].arg_index = 0; }},
      {"does not match its shape", [](format::Program &p) { p.tensors[0].byte_size += 4; }},
  };
  for (const Case &c : cases) {
    auto p = handmade();
    c.mutate(p);
    auto r = format::validate_program(p);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
        << "expected '" << c.expect << "' in: " << r.error().message;
    // The writer refuses invalid programs as well.
    EXPECT_FALSE(format::write_kbin(p).ok());
  }
}

TEST(Format, BadMagicAndVersion) {
  auto bytes = written();
  auto copy = bytes;
  copy[0] = 'X';
  EXPECT_NE(rejection(copy).find("magic"), std::string::npos);
  copy = bytes;
  copy[10] = 0; // the older versions had minor version 0
  copy[8] = 1;  // major version 1: before checksums
  format::reseal_kbin(copy.data(), copy.size());
  EXPECT_NE(rejection(copy).find("version 1.0 not supported"), std::string::npos)
      << rejection(copy);
  EXPECT_NE(rejection(copy).find("compile the model again"), std::string::npos);
  copy = bytes;
  copy[10] = 0; // the older versions had minor version 0
  copy[8] = 2;  // major version 2: INT8 weights as INT16 pairs
  format::reseal_kbin(copy.data(), copy.size());
  EXPECT_NE(rejection(copy).find("version 2.0 not supported"), std::string::npos)
      << rejection(copy);
  copy = bytes;
  copy[10] = 0; // the older versions had minor version 0
  copy[8] = 3;  // major version 3: convolution blocks without the residual tile
  format::reseal_kbin(copy.data(), copy.size());
  EXPECT_NE(rejection(copy).find("version 3.0 not supported"), std::string::npos)
      << rejection(copy);
  copy = bytes;
  copy[10] = 7; // minor versions are accepted (with a checksum that matches them)
  EXPECT_NE(rejection(copy).find("checksum"), std::string::npos);
  format::reseal_kbin(copy.data(), copy.size());
  EXPECT_EQ(rejection(copy), "");
}

} // namespace
