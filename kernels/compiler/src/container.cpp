// The ManyCL program binary container (see docs/compiler.md).
#include "internal.h"

#include <cstring>

namespace manycl::compiler::detail {

static const char kMagic[8] = {'M', 'A', 'N', 'Y', 'C', 'L', 'B', '\0'};
static const uint32_t kFormatVersion = 5;
static const size_t kHeaderSize = 32;

uint64_t fnv1a64(const void *data, size_t n, uint64_t h) {
  auto *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {
struct Writer {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i)
      b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i)
      b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

struct Reader {
  const uint8_t *p;
  size_t n, off = 0;
  bool bad = false;
  bool need(size_t k) {
    if (bad || k > n - off) {
      bad = true;
      return false;
    }
    return true;
  }
  uint8_t u8() {
    if (!need(1))
      return 0;
    return p[off++];
  }
  uint32_t u32() {
    if (!need(4))
      return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(p[off + i]) << (8 * i);
    off += 4;
    return v;
  }
  uint64_t u64() {
    if (!need(8))
      return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(p[off + i]) << (8 * i);
    off += 8;
    return v;
  }
  std::string str(size_t max = SIZE_MAX) {
    uint64_t len = u64();
    if (bad || len > max || !need(static_cast<size_t>(len))) {
      bad = true;
      return {};
    }
    std::string s(reinterpret_cast<const char *>(p + off), static_cast<size_t>(len));
    off += static_cast<size_t>(len);
    return s;
  }
};
} // namespace

std::vector<uint8_t> writeContainer(const Container &c) {
  Writer w;
  w.str(compilerVersion());
  w.str(c.options);
  w.str(c.log);
  w.str(c.device_key);
  w.u32(static_cast<uint32_t>(c.kernels.size()));
  for (const KernelInfo &k : c.kernels) {
    w.str(k.name);
    w.u32(static_cast<uint32_t>(k.args.size()));
    for (const KernelArgInfo &a : k.args) {
      w.u8(static_cast<uint8_t>(a.address));
      w.u8(static_cast<uint8_t>(a.access));
      w.u32(a.type_qual);
      w.u8(a.is_pointer ? 1 : 0);
      w.u32(a.size);
      w.u32(a.align);
      w.str(a.type_name);
      w.str(a.name);
    }
    for (int d = 0; d < 3; ++d)
      w.u32(k.reqd_work_group_size[d]);
    for (int d = 0; d < 3; ++d)
      w.u32(k.work_group_size_hint[d]);
    w.str(k.vec_type_hint);
    w.str(k.attributes);
    w.u64(k.static_local_size);
    w.u64(k.private_size);
    w.u8(k.uses_barriers ? 1 : 0);
    w.u8(k.uses_printf ? 1 : 0);
    w.u8(k.region_based ? 1 : 0);
    w.u64(k.frame_size);
    w.u64(k.uniform_frame_size);
    w.u8(static_cast<uint8_t>(k.cost));
    w.u8(k.loop_barriers ? 1 : 0);
    w.u32(k.source_barriers);
  }
  w.str(c.bitcode);

  Writer h;
  h.b.insert(h.b.end(), kMagic, kMagic + 8);
  h.u32(kFormatVersion);
  h.u32(static_cast<uint32_t>(c.kind));
  h.u64(w.b.size());
  h.u64(fnv1a64(w.b.data(), w.b.size()));
  h.b.insert(h.b.end(), w.b.begin(), w.b.end());
  return std::move(h.b);
}

Status readContainer(std::span<const uint8_t> bytes, Container &out) {
  auto bad = [](const std::string &why) {
    return Status::error(ErrorCode::InvalidBinary, "invalid ManyCL binary: " + why);
  };
  if (bytes.size() < kHeaderSize)
    return bad("too short");
  if (std::memcmp(bytes.data(), kMagic, 8) != 0)
    return bad("bad magic (not a ManyCL binary)");
  Reader hr{bytes.data(), kHeaderSize};
  hr.off = 8;
  uint32_t version = hr.u32();
  uint32_t kind = hr.u32();
  uint64_t size = hr.u64();
  uint64_t hash = hr.u64();
  if (version != kFormatVersion)
    return bad("unsupported format version " + std::to_string(version));
  if (kind < 1 || kind > 3)
    return bad("unknown binary kind");
  if (size != bytes.size() - kHeaderSize)
    return bad("payload size mismatch (truncated or padded)");
  const uint8_t *payload = bytes.data() + kHeaderSize;
  if (fnv1a64(payload, static_cast<size_t>(size)) != hash)
    return bad("checksum mismatch (corrupt)");

  Reader r{payload, static_cast<size_t>(size)};
  Container c;
  c.kind = static_cast<BinaryKind>(kind);
  std::string ver = r.str(4096);
  if (!r.bad && ver != compilerVersion())
    return bad("built by another compiler version (" + ver + ")");
  c.options = r.str(1 << 20);
  c.log = r.str(64 << 20);
  c.device_key = r.str(4096);
  uint32_t nk = r.u32();
  if (nk > 100000)
    return bad("too many kernels");
  for (uint32_t i = 0; i < nk && !r.bad; ++i) {
    KernelInfo k;
    k.name = r.str(4096);
    if (k.name.empty())
      return bad("empty kernel name");
    uint32_t na = r.u32();
    if (na > 4096)
      return bad("too many kernel arguments");
    for (uint32_t j = 0; j < na && !r.bad; ++j) {
      KernelArgInfo a;
      uint8_t as = r.u8(), acc = r.u8();
      if (as > 3 || acc > 3)
        return bad("bad argument qualifier");
      a.address = static_cast<AddressQual>(as);
      a.access = static_cast<AccessQual>(acc);
      a.type_qual = r.u32();
      a.is_pointer = r.u8() != 0;
      a.size = r.u32();
      a.align = r.u32();
      if (a.size > (1u << 20))
        return bad("argument too large");
      a.type_name = r.str(4096);
      a.name = r.str(4096);
      k.args.push_back(std::move(a));
    }
    for (int d = 0; d < 3; ++d)
      k.reqd_work_group_size[d] = r.u32();
    for (int d = 0; d < 3; ++d)
      k.work_group_size_hint[d] = r.u32();
    k.vec_type_hint = r.str(256);
    k.attributes = r.str(4096);
    k.static_local_size = r.u64();
    k.private_size = r.u64();
    k.uses_barriers = r.u8() != 0;
    k.uses_printf = r.u8() != 0;
    k.region_based = r.u8() != 0;
    k.frame_size = r.u64();
    k.uniform_frame_size = r.u64();
    if (k.frame_size > (1ull << 30) || k.uniform_frame_size > (1ull << 30))
      return bad("bad frame size");
    uint8_t cost = r.u8();
    if (cost > static_cast<uint8_t>(KernelInfo::Cost::Uniform))
      return bad("bad cost kind");
    k.cost = static_cast<KernelInfo::Cost>(cost);
    k.loop_barriers = r.u8() != 0;
    k.source_barriers = r.u32();
    if (k.static_local_size > (1ull << 40) || k.private_size > (1ull << 40))
      return bad("bad sizes");
    c.kernels.push_back(std::move(k));
  }
  c.bitcode = r.str();
  if (r.bad)
    return bad("truncated payload");
  if (r.off != r.n)
    return bad("trailing bytes in payload");
  if (c.kind == BinaryKind::Executable || c.kind == BinaryKind::Object ||
      c.kind == BinaryKind::Library) {
    if (c.bitcode.size() < 4 || c.bitcode.compare(0, 2, "BC") != 0)
      return bad("missing LLVM bitcode");
  }
  out = std::move(c);
  return Status::success();
}

} // namespace manycl::compiler::detail
