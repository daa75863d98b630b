// kbin writer, reader and validator. The reader parses the structure with explicit bounds
// checks, then hands the parsed program to validate_program(), which the writer also runs:
// one set of rules for both sides.
#include "kann/format.h"
#include "kann/crc32c.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include "manycl/native/custom.h"
#include "manycl/native/native.h"

namespace kann::format {
namespace {

using manycl::make_error;
using manycl::Result;

static_assert(sizeof(kbin_header) == 112, "kbin_header layout");
static_assert(sizeof(kbin_section) == 24, "kbin_section layout");
static_assert(sizeof(kbin_tensor_desc) == 96, "kbin_tensor_desc layout");
static_assert(sizeof(kbin_stream_entry) == 16, "kbin_stream_entry layout");
static_assert(sizeof(kbin_record_header) == 8, "kbin_record_header layout");
static_assert(sizeof(kbin_dma_args) == 104, "kbin_dma_args layout");
static_assert(sizeof(kbin_signal_args) == 16, "kbin_signal_args layout");
static_assert(sizeof(kbin_wait_signal_args) == 16, "kbin_wait_signal_args layout");

static_assert(offsetof(kbin_header, checksum) == 76, "kbin_header checksum field");

uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// Bytes from the first to one past the last byte a strided box touches, or false on overflow.
bool box_extent(uint64_t row_bytes, uint64_t rows, uint64_t planes, uint64_t row_stride,
                uint64_t plane_stride, uint64_t &extent) {
  uint64_t a = 0, b = 0, s = 0;
  if (__builtin_mul_overflow(planes - 1, plane_stride, &a) ||
      __builtin_mul_overflow(rows - 1, row_stride, &b) || __builtin_add_overflow(a, b, &s) ||
      __builtin_add_overflow(s, row_bytes, &extent))
    return false;
  return true;
}

bool range_inside(uint64_t offset, uint64_t extent, uint64_t limit) {
  return offset <= limit && extent <= limit - offset;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char *space_name(uint32_t space) {
  switch (space) {
  case KBIN_DDR_PARAMS:
    return "PARAMS";
  case KBIN_DDR_ARG:
    return "ARG";
  case KBIN_DDR_SCRATCH:
    return "SCRATCH";
  default:
    return "?";
  }
}

const char *control_name(uint32_t id) {
  switch (id) {
  case KBIN_FN_DMA:
    return "dma";
  case KBIN_FN_WAIT_DMA:
    return "wait_dma";
  case KBIN_FN_BARRIER:
    return "barrier";
  case KBIN_FN_SIGNAL:
    return "signal";
  case KBIN_FN_WAIT_SIGNAL:
    return "wait_signal";
  default:
    return nullptr;
  }
}

struct Checker {
  const Program &p;
  std::vector<uint64_t> arg_sizes; // per argument index
  std::vector<bool> arg_writable;
  uint64_t params_size = 0; // bytes of the PARAMS buffer (read without them: the header's)
};

Result<void> check_ddr(const Checker &c, const kbin_ddr_ref &ref, uint64_t extent, bool write,
                       const std::string &where) {
  uint64_t limit = 0;
  switch (ref.space) {
  case KBIN_DDR_PARAMS:
    if (write)
      return make_error(where + ": writes to the read-only PARAMS buffer");
    if (ref.arg_index != 0)
      return make_error(where + ": arg_index must be 0 outside ARG space");
    limit = c.params_size;
    break;
  case KBIN_DDR_SCRATCH:
    if (ref.arg_index != 0)
      return make_error(where + ": arg_index must be 0 outside ARG space");
    limit = c.p.scratch_size;
    break;
  case KBIN_DDR_ARG:
    if (ref.arg_index >= c.arg_sizes.size())
      return make_error(where + ": argument index " + std::to_string(ref.arg_index) +
                        " >= argument count " + std::to_string(c.arg_sizes.size()));
    if (write && !c.arg_writable[ref.arg_index])
      return make_error(where + ": writes to input argument " + std::to_string(ref.arg_index));
    limit = c.arg_sizes[ref.arg_index];
    break;
  default:
    return make_error(where + ": unknown DDR space " + std::to_string(ref.space));
  }
  if (!range_inside(ref.offset, extent, limit))
    return make_error(where + ": DDR range " + std::string(space_name(ref.space)) + "+" +
                      hex(ref.offset) + " (" + std::to_string(extent) +
                      " B) exceeds its buffer of " + std::to_string(limit) + " B");
  return {};
}

Result<void> check_spm(const Checker &c, uint64_t offset, uint64_t extent,
                       const std::string &where) {
  if (!range_inside(offset, extent, c.p.spm_required))
    return make_error(where + ": SPM range " + hex(offset) + " (" + std::to_string(extent) +
                      " B) exceeds the program's SPM size " + std::to_string(c.p.spm_required));
  return {};
}

struct SyncCounts {
  std::vector<uint64_t> barriers;                             // per cluster
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> posts;    // (cluster, signal) -> count
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> max_wait; // (cluster, signal) -> value
};

// The clusters of a multicast mask, all of them in the program.
Result<void> mask_destinations(const Checker &c, uint32_t mask, const std::string &what,
                               std::vector<uint32_t> &destinations) {
  if (c.p.cluster_count < 32 && (mask >> c.p.cluster_count) != 0)
    return make_error(what + " mask " + hex(mask) + " names clusters beyond " +
                      std::to_string(c.p.cluster_count));
  for (uint32_t i = 0; i < c.p.cluster_count; ++i)
    if (mask & (1u << i))
      destinations.push_back(i);
  return {};
}

Result<void> check_dma(const Checker &c, uint32_t cluster, const kbin_dma_args &d, SyncCounts &sync,
                       const std::string &where) {
  const kbin_dma_shape &s = d.shape;
  if (s.row_bytes == 0 || s.rows == 0 || s.planes == 0)
    return make_error(where + ": empty DMA shape");
  uint64_t src_extent = 0, dst_extent = 0;
  if (!box_extent(s.row_bytes, s.rows, s.planes, s.src_row_stride, s.src_plane_stride,
                  src_extent) ||
      !box_extent(s.row_bytes, s.rows, s.planes, s.dst_row_stride, s.dst_plane_stride, dst_extent))
    return make_error(where + ": DMA shape overflows");
  if (d.notify_signal != -1 &&
      (d.notify_signal < 0 || static_cast<uint32_t>(d.notify_signal) >= KBIN_MAX_SIGNALS))
    return make_error(where + ": notify signal " + std::to_string(d.notify_signal) +
                      " out of range");
  std::vector<uint32_t> destinations;
  switch (d.kind) {
  case KBIN_DMA_LOAD:
    if (d.cluster_mask != 0 || d.dst_cluster != 0 || d.spm_dst_offset != 0)
      return make_error(where + ": load with exchange/multicast fields set");
    if (auto r = check_ddr(c, d.ddr, src_extent, false, where); !r)
      return r;
    if (auto r = check_spm(c, d.spm_offset, dst_extent, where); !r)
      return r;
    destinations.push_back(cluster);
    break;
  case KBIN_DMA_STORE:
    if (d.cluster_mask != 0 || d.dst_cluster != 0 || d.spm_dst_offset != 0)
      return make_error(where + ": store with exchange/multicast fields set");
    if (d.notify_signal != -1)
      return make_error(where + ": a store cannot notify (no SPM destination)");
    if (auto r = check_spm(c, d.spm_offset, src_extent, where); !r)
      return r;
    if (auto r = check_ddr(c, d.ddr, dst_extent, true, where); !r)
      return r;
    break;
  case KBIN_DMA_MULTICAST:
    if (d.cluster_mask == 0)
      return make_error(where + ": multicast without destinations");
    if (auto r = mask_destinations(c, d.cluster_mask, where + ": multicast", destinations); !r)
      return r;
    if (d.dst_cluster != 0 || d.spm_dst_offset != 0)
      return make_error(where + ": multicast with exchange fields set");
    if (auto r = check_ddr(c, d.ddr, src_extent, false, where); !r)
      return r;
    if (auto r = check_spm(c, d.spm_offset, dst_extent, where); !r)
      return r;
    break;
  case KBIN_DMA_EXCHANGE:
    if (d.dst_cluster >= c.p.cluster_count)
      return make_error(where + ": exchange to cluster " + std::to_string(d.dst_cluster) + " of " +
                        std::to_string(c.p.cluster_count));
    if (d.cluster_mask != 0 || d.ddr.space != 0 || d.ddr.arg_index != 0 || d.ddr.offset != 0)
      return make_error(where + ": exchange with DDR/multicast fields set");
    if (auto r = check_spm(c, d.spm_offset, src_extent, where); !r)
      return r;
    if (auto r = check_spm(c, d.spm_dst_offset, dst_extent, where); !r)
      return r;
    destinations.push_back(d.dst_cluster);
    break;
  case KBIN_DMA_EXCHANGE_MULTICAST:
    if (std::popcount(d.cluster_mask) < 2)
      return make_error(where + ": exchange multicast to fewer than two clusters");
    if (d.cluster_mask >> cluster & 1u)
      return make_error(where + ": exchange multicast to its own cluster");
    if (auto r = mask_destinations(c, d.cluster_mask, where + ": exchange multicast", destinations);
        !r)
      return r;
    if (d.dst_cluster != 0 || d.ddr.space != 0 || d.ddr.arg_index != 0 || d.ddr.offset != 0)
      return make_error(where + ": exchange multicast with DDR/exchange fields set");
    if (auto r = check_spm(c, d.spm_offset, src_extent, where); !r)
      return r;
    if (auto r = check_spm(c, d.spm_dst_offset, dst_extent, where); !r)
      return r;
    break;
  default:
    return make_error(where + ": unknown DMA kind " + std::to_string(d.kind));
  }
  if (d.notify_signal >= 0 && static_cast<uint32_t>(d.notify_signal) >= KBIN_FIRST_PRIVATE_SIGNAL &&
      (destinations.size() != 1 || destinations[0] != cluster))
    return make_error(where + ": private signal " + std::to_string(d.notify_signal) +
                      " notified by a transfer into another cluster's SPM");
  if (d.notify_signal >= 0)
    for (uint32_t t : destinations)
      sync.posts[{t, static_cast<uint32_t>(d.notify_signal)}] += 1;
  return {};
}

Result<void> check_record(const Checker &c, uint32_t cluster, size_t index, const Record &rec,
                          SyncCounts &sync) {
  const std::string where =
      "cluster " + std::to_string(cluster) + " record " + std::to_string(index);
  if (rec.args.size() > std::numeric_limits<uint32_t>::max() - 16)
    return make_error(where + ": argument block too large");
  switch (rec.function_id) {
  case KBIN_FN_DMA: {
    kbin_dma_args d;
    if (rec.args.size() != sizeof d)
      return make_error(where + ": dma argument block of " + std::to_string(rec.args.size()) +
                        " bytes, expected " + std::to_string(sizeof d));
    rec.decode(d);
    return check_dma(c, cluster, d, sync, where);
  }
  case KBIN_FN_WAIT_DMA: {
    kbin_wait_dma_args w;
    if (rec.args.size() != sizeof w || (rec.decode(w), w.reserved0 != 0 || w.reserved1 != 0))
      return make_error(where + ": malformed wait_dma record");
    return {};
  }
  case KBIN_FN_BARRIER:
    if (!rec.args.empty())
      return make_error(where + ": barrier takes no arguments");
    sync.barriers[cluster] += 1;
    return {};
  case KBIN_FN_SIGNAL: {
    kbin_signal_args s;
    if (rec.args.size() != sizeof s)
      return make_error(where + ": malformed signal record");
    rec.decode(s);
    if (s.cluster >= c.p.cluster_count || s.signal >= KBIN_MAX_SIGNALS || s.count == 0 ||
        s.count > (1ull << 40))
      return make_error(where + ": signal to cluster " + std::to_string(s.cluster) + " signal " +
                        std::to_string(s.signal) + " out of range");
    if (s.signal >= KBIN_FIRST_PRIVATE_SIGNAL)
      return make_error(where + ": signal " + std::to_string(s.signal) +
                        " is private (notified by the cluster's own transfers only)");
    sync.posts[{s.cluster, s.signal}] += s.count;
    return {};
  }
  case KBIN_FN_WAIT_SIGNAL: {
    kbin_wait_signal_args w;
    if (rec.args.size() != sizeof w)
      return make_error(where + ": malformed wait_signal record");
    rec.decode(w);
    if (w.signal >= KBIN_MAX_SIGNALS || w.reserved != 0)
      return make_error(where + ": wait on signal " + std::to_string(w.signal) + " out of range");
    auto &m = sync.max_wait[{cluster, w.signal}];
    m = std::max(m, w.value);
    return {};
  }
  default:
    break;
  }
  if (rec.function_id == MCL_NATIVE_FN_INVALID || rec.function_id >= MCL_NATIVE_FN_COUNT_)
    return make_error(where + ": unknown function id " + std::to_string(rec.function_id));
  char msg[256] = {0};
  int status = mcl_native_validate(rec.function_id, rec.args.data(), rec.args.size(),
                                   c.p.spm_required, msg, sizeof msg);
  if (status != MCL_NATIVE_OK)
    return make_error(where + " (" + mcl_native_fn_name(rec.function_id) + "): " + msg);
  return {};
}

void put_bytes(std::vector<uint8_t> &out, uint64_t at, const void *src, size_t n) {
  std::memcpy(out.data() + at, src, n);
}

} // namespace

const char *dtype_name(uint32_t dtype) {
  return mcl_native_dtype_name(dtype);
}

namespace {

Result<void> validate_program_with_params(const Program &p, const DeviceLimits &limits,
                                          uint64_t params_size) {
  if (p.cluster_count == 0 || p.cluster_count > KBIN_MAX_CLUSTERS)
    return make_error("cluster count " + std::to_string(p.cluster_count) + " out of range 1.." +
                      std::to_string(KBIN_MAX_CLUSTERS));
  if (limits.cluster_count != 0 && limits.cluster_count != p.cluster_count)
    return make_error("program compiled for " + std::to_string(p.cluster_count) +
                      " clusters, device has " + std::to_string(limits.cluster_count) +
                      " (recompile with --clusters " + std::to_string(limits.cluster_count) +
                      " or use a sub-device of " + std::to_string(p.cluster_count) + ")");
  if (p.spm_required == 0 || p.spm_required > p.spm_bytes)
    return make_error("SPM requirement " + std::to_string(p.spm_required) +
                      " B inconsistent with the configuration's SPM of " +
                      std::to_string(p.spm_bytes) + " B");
  if (p.spm_required > (1ull << 32))
    return make_error("SPM requirement above 4 GiB");
  if (limits.spm_bytes != 0 && p.spm_required > limits.spm_bytes)
    return make_error("program needs " + std::to_string(p.spm_required) +
                      " B of SPM per cluster, device has " + std::to_string(limits.spm_bytes));
  if (p.streams.size() != p.cluster_count)
    return make_error("program has " + std::to_string(p.streams.size()) + " streams for " +
                      std::to_string(p.cluster_count) + " clusters");
  if (p.arg_count > 1024)
    return make_error("argument count " + std::to_string(p.arg_count) + " out of range");

  Checker c{p, std::vector<uint64_t>(p.arg_count, 0), std::vector<bool>(p.arg_count, false),
            params_size};
  std::vector<bool> seen(p.arg_count, false);
  for (const TensorDesc &t : p.tensors) {
    const std::string where = "tensor '" + t.name + "'";
    if (t.name.empty() || t.name.size() > 4096)
      return make_error("tensor with an empty or oversized name");
    if (t.role != KBIN_ROLE_INPUT && t.role != KBIN_ROLE_OUTPUT)
      return make_error(where + ": unknown role " + std::to_string(t.role));
    if (t.arg_index >= p.arg_count || seen[t.arg_index])
      return make_error(where + ": argument index " + std::to_string(t.arg_index) +
                        " out of range or used twice");
    seen[t.arg_index] = true;
    uint32_t esize = mcl_native_dtype_size(t.dtype);
    if (esize == 0 || t.dtype == MCL_DTYPE_S32)
      return make_error(where + ": unsupported element type " + std::to_string(t.dtype));
    if (t.layout != KBIN_LAYOUT_ONNX)
      return make_error(where + ": unknown layout " + std::to_string(t.layout));
    if (t.dims.empty() || t.dims.size() > KBIN_MAX_RANK)
      return make_error(where + ": rank " + std::to_string(t.dims.size()) + " out of range");
    uint64_t n = esize;
    for (uint64_t d : t.dims)
      if (d == 0 || __builtin_mul_overflow(n, d, &n) || n > (1ull << 40))
        return make_error(where + ": bad dimensions");
    if (n != t.byte_size)
      return make_error(where + ": byte size " + std::to_string(t.byte_size) +
                        " does not match its shape (" + std::to_string(n) + ")");
    if (!(t.scale > 0.0f) || t.scale != t.scale)
      return make_error(where + ": quantization scale must be positive");
    c.arg_sizes[t.arg_index] = t.byte_size;
    c.arg_writable[t.arg_index] = t.role == KBIN_ROLE_OUTPUT;
  }
  for (uint32_t i = 0; i < p.arg_count; ++i)
    if (!seen[i])
      return make_error("kernel argument " + std::to_string(i) + " has no tensor descriptor");

  SyncCounts sync;
  sync.barriers.assign(p.cluster_count, 0);
  for (uint32_t k = 0; k < p.cluster_count; ++k)
    for (size_t i = 0; i < p.streams[k].size(); ++i)
      if (auto r = check_record(c, k, i, p.streams[k][i], sync); !r)
        return r;
  for (uint32_t k = 1; k < p.cluster_count; ++k)
    if (sync.barriers[k] != sync.barriers[0])
      return make_error("cluster " + std::to_string(k) + " reaches " +
                        std::to_string(sync.barriers[k]) + " barriers, cluster 0 reaches " +
                        std::to_string(sync.barriers[0]) + " (would deadlock)");
  for (const auto &[key, value] : sync.max_wait) {
    auto it = sync.posts.find(key);
    uint64_t posted = it == sync.posts.end() ? 0 : it->second;
    if (value > posted)
      return make_error("cluster " + std::to_string(key.first) + " waits for signal " +
                        std::to_string(key.second) + " to reach " + std::to_string(value) +
                        " but only " + std::to_string(posted) + " increments are sent " +
                        "(would deadlock)");
  }
  return {};
}

} // namespace

Result<void> validate_program(const Program &p, const DeviceLimits &limits) {
  return validate_program_with_params(p, limits, p.params.size());
}

uint32_t kbin_checksum(const void *data, size_t size) {
  if (data == nullptr || size < sizeof(kbin_header))
    return 0;
  const auto *bytes = static_cast<const uint8_t *>(data);
  constexpr size_t at = offsetof(kbin_header, checksum);
  const uint8_t zero[sizeof(uint32_t)] = {};
  uint32_t crc = crc32c_update(0xFFFFFFFFu, bytes, at);
  crc = crc32c_update(crc, zero, sizeof zero);
  crc = crc32c_update(crc, bytes + at + sizeof zero, size - at - sizeof zero);
  return ~crc;
}

void reseal_kbin(void *data, size_t size) {
  if (data == nullptr || size < sizeof(kbin_header))
    return;
  const uint32_t crc = kbin_checksum(data, size);
  std::memcpy(static_cast<uint8_t *>(data) + offsetof(kbin_header, checksum), &crc, sizeof crc);
}

std::vector<uint8_t> serialize_stream(const std::vector<Record> &records) {
  std::vector<uint8_t> out;
  for (const Record &r : records) {
    kbin_record_header h;
    h.length = static_cast<uint32_t>(align_up(sizeof h + r.args.size(), KBIN_RECORD_ALIGN));
    h.function_id = r.function_id;
    size_t at = out.size();
    out.resize(at + h.length, 0);
    std::memcpy(out.data() + at, &h, sizeof h);
    if (!r.args.empty())
      std::memcpy(out.data() + at + sizeof h, r.args.data(), r.args.size());
  }
  return out;
}

Result<std::vector<uint8_t>> write_kbin(const Program &p) {
  if (auto r = validate_program(p); !r)
    return make_error("internal error, invalid program: " + r.error().message);

  std::string strings;
  std::vector<kbin_tensor_desc> descs;
  for (const TensorDesc &t : p.tensors) {
    kbin_tensor_desc d{};
    d.name_offset = static_cast<uint32_t>(strings.size());
    d.name_length = static_cast<uint32_t>(t.name.size());
    strings += t.name;
    d.role = t.role;
    d.arg_index = t.arg_index;
    d.dtype = t.dtype;
    d.layout = t.layout;
    d.rank = static_cast<uint32_t>(t.dims.size());
    for (size_t i = 0; i < t.dims.size(); ++i)
      d.dims[i] = t.dims[i];
    d.byte_size = t.byte_size;
    d.scale = t.scale;
    d.zero_point = t.zero_point;
    descs.push_back(d);
  }
  std::vector<uint8_t> streams(sizeof(kbin_stream_entry) * p.cluster_count);
  for (uint32_t k = 0; k < p.cluster_count; ++k) {
    std::vector<uint8_t> bytes = serialize_stream(p.streams[k]);
    kbin_stream_entry e{streams.size(), bytes.size()};
    std::memcpy(streams.data() + k * sizeof e, &e, sizeof e);
    streams.insert(streams.end(), bytes.begin(), bytes.end());
  }

  struct Part {
    uint32_t kind;
    const void *data;
    uint64_t size;
  };
  std::vector<Part> parts = {
      {KBIN_SECTION_STRINGS, strings.data(), strings.size()},
      {KBIN_SECTION_TENSORS, descs.data(), descs.size() * sizeof(kbin_tensor_desc)},
      {KBIN_SECTION_PARAMS, p.params.data(), p.params.size()},
      {KBIN_SECTION_STREAMS, streams.data(), streams.size()}};
  if (!p.report_json.empty())
    parts.push_back({KBIN_SECTION_REPORT, p.report_json.data(), p.report_json.size()});

  uint64_t at = align_up(sizeof(kbin_header) + parts.size() * sizeof(kbin_section), 64);
  std::vector<kbin_section> table;
  for (const Part &part : parts) {
    table.push_back({part.kind, 0, at, part.size});
    at = align_up(at + part.size, 64);
  }
  std::vector<uint8_t> out(at, 0);
  kbin_header h{};
  std::memcpy(h.magic, KBIN_MAGIC, 8);
  h.version_major = KBIN_VERSION_MAJOR;
  h.version_minor = p.version_minor;
  h.header_size = sizeof h;
  h.file_size = out.size();
  h.cluster_count = p.cluster_count;
  h.pes_per_cluster = p.pes_per_cluster;
  h.spm_bytes = p.spm_bytes;
  h.spm_required = p.spm_required;
  h.params_size = p.params.size();
  h.scratch_size = p.scratch_size;
  h.arg_count = p.arg_count;
  h.section_count = static_cast<uint32_t>(parts.size());
  std::strncpy(h.preset, p.preset.c_str(), sizeof h.preset - 1);
  put_bytes(out, 0, &h, sizeof h);
  put_bytes(out, sizeof h, table.data(), table.size() * sizeof(kbin_section));
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].size)
      put_bytes(out, table[i].offset, parts[i].data, parts[i].size);
  reseal_kbin(out.data(), out.size());
  return out;
}

Result<Program> read_kbin(const void *data, size_t size, const DeviceLimits &limits,
                          ReadParams with_params) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  if (data == nullptr || size < sizeof(kbin_header))
    return make_error("not a kann binary: " + std::to_string(size) + " bytes, header needs " +
                      std::to_string(sizeof(kbin_header)));
  kbin_header h;
  std::memcpy(&h, bytes, sizeof h);
  if (std::memcmp(h.magic, KBIN_MAGIC, 8) != 0)
    return make_error("not a kann binary: bad magic");
  if (h.version_major != KBIN_VERSION_MAJOR)
    return make_error("kann binary version " + std::to_string(h.version_major) + "." +
                      std::to_string(h.version_minor) + " not supported (this loader reads " +
                      std::to_string(KBIN_VERSION_MAJOR) +
                      ".x): compile the model again with this version's kann");
  if (h.header_size != sizeof h)
    return make_error("header size " + std::to_string(h.header_size) + ", expected " +
                      std::to_string(sizeof h));
  if (h.file_size != size)
    return make_error("binary is " + std::to_string(size) + " bytes, header says " +
                      std::to_string(h.file_size) + " (truncated or padded)");
  // Before any other field is believed: a flipped weight or record byte is otherwise a
  // valid, different network that runs and computes garbage.
  if (const uint32_t computed = kbin_checksum(bytes, size); computed != h.checksum)
    return make_error("checksum does not match: header says " + hex(h.checksum) +
                      ", the contents give " + hex(computed) +
                      " (the binary was changed or damaged after kann compile wrote it)");
  if (h.flags != 0)
    return make_error("unknown header flags " + hex(h.flags));
  if (h.preset[sizeof h.preset - 1] != 0)
    return make_error("preset name not terminated");
  if (h.section_count == 0 || h.section_count > 16)
    return make_error("section count " + std::to_string(h.section_count) + " out of range");
  const uint64_t table_end = sizeof h + uint64_t{h.section_count} * sizeof(kbin_section);
  if (table_end > size)
    return make_error("section table extends past the end of the binary");

  Program p;
  p.cluster_count = h.cluster_count;
  p.pes_per_cluster = h.pes_per_cluster;
  p.spm_bytes = h.spm_bytes;
  p.spm_required = h.spm_required;
  p.scratch_size = h.scratch_size;
  p.arg_count = h.arg_count;
  p.version_minor = h.version_minor;
  p.preset = h.preset;
  if (p.cluster_count == 0 || p.cluster_count > KBIN_MAX_CLUSTERS)
    return make_error("cluster count " + std::to_string(p.cluster_count) + " out of range");
  if (h.scratch_size > (1ull << 36))
    return make_error("scratch size " + std::to_string(h.scratch_size) + " out of range");

  const kbin_section *found[8] = {};
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint32_t i = 0; i < h.section_count; ++i) {
    kbin_section s;
    std::memcpy(&s, bytes + sizeof h + i * sizeof s, sizeof s);
    const std::string where = "section " + std::to_string(i);
    if (s.kind < KBIN_SECTION_STRINGS || s.kind > KBIN_SECTION_REPORT)
      return make_error(where + ": unknown kind " + std::to_string(s.kind));
    if (found[s.kind])
      return make_error(where + ": kind " + std::to_string(s.kind) + " appears twice");
    if (s.offset % 8 != 0 || s.offset < table_end || !range_inside(s.offset, s.size, size))
      return make_error(where + ": range " + hex(s.offset) + "+" + std::to_string(s.size) +
                        " outside the binary or misaligned");
    for (auto [o, n] : ranges)
      if (s.offset < o + n && o < s.offset + s.size)
        return make_error(where + ": overlaps another section");
    ranges.push_back({s.offset, s.size});
    found[s.kind] = reinterpret_cast<const kbin_section *>(bytes + sizeof h + i * sizeof s);
  }
  auto section = [&](uint32_t kind, kbin_section &s) {
    if (!found[kind])
      return false;
    std::memcpy(&s, found[kind], sizeof s);
    return true;
  };
  kbin_section strings, tensors, params, streams;
  if (!section(KBIN_SECTION_STRINGS, strings) || !section(KBIN_SECTION_TENSORS, tensors) ||
      !section(KBIN_SECTION_PARAMS, params) || !section(KBIN_SECTION_STREAMS, streams))
    return make_error("a required section (strings, tensors, params, streams) is missing");

  if (params.size != h.params_size)
    return make_error("params section is " + std::to_string(params.size) + " bytes, header says " +
                      std::to_string(h.params_size));
  if (with_params == ReadParams::Copy)
    p.params.assign(bytes + params.offset, bytes + params.offset + params.size);

  if (tensors.size % sizeof(kbin_tensor_desc) != 0)
    return make_error("tensor table size " + std::to_string(tensors.size) +
                      " is not a whole number of descriptors");
  for (uint64_t i = 0; i < tensors.size / sizeof(kbin_tensor_desc); ++i) {
    kbin_tensor_desc d;
    std::memcpy(&d, bytes + tensors.offset + i * sizeof d, sizeof d);
    if (!range_inside(d.name_offset, d.name_length, strings.size))
      return make_error("tensor " + std::to_string(i) + ": name outside the string table");
    if (d.rank == 0 || d.rank > KBIN_MAX_RANK || d.reserved != 0)
      return make_error("tensor " + std::to_string(i) + ": rank " + std::to_string(d.rank) +
                        " out of range");
    for (uint32_t r = d.rank; r < KBIN_MAX_RANK; ++r)
      if (d.dims[r] != 0)
        return make_error("tensor " + std::to_string(i) + ": dimensions beyond its rank");
    TensorDesc t;
    t.name.assign(reinterpret_cast<const char *>(bytes + strings.offset + d.name_offset),
                  d.name_length);
    t.role = d.role;
    t.arg_index = d.arg_index;
    t.dtype = d.dtype;
    t.layout = d.layout;
    t.dims.assign(d.dims, d.dims + d.rank);
    t.byte_size = d.byte_size;
    t.scale = d.scale;
    t.zero_point = d.zero_point;
    p.tensors.push_back(std::move(t));
  }

  const uint64_t entries = uint64_t{p.cluster_count} * sizeof(kbin_stream_entry);
  if (streams.size < entries)
    return make_error("stream table needs " + std::to_string(entries) + " bytes, section has " +
                      std::to_string(streams.size));
  const uint8_t *sbase = bytes + streams.offset;
  for (uint32_t k = 0; k < p.cluster_count; ++k) {
    kbin_stream_entry e;
    std::memcpy(&e, sbase + k * sizeof e, sizeof e);
    const std::string where = "cluster " + std::to_string(k) + " stream";
    if (e.offset < entries || e.offset % 8 != 0 || !range_inside(e.offset, e.size, streams.size))
      return make_error(where + ": range " + hex(e.offset) + "+" + std::to_string(e.size) +
                        " outside the streams section");
    std::vector<Record> records;
    uint64_t at = 0;
    while (at < e.size) {
      if (e.size - at < sizeof(kbin_record_header))
        return make_error(where + ": truncated record header at byte " + std::to_string(at));
      kbin_record_header rh;
      std::memcpy(&rh, sbase + e.offset + at, sizeof rh);
      if (rh.length < sizeof rh || rh.length % KBIN_RECORD_ALIGN != 0 || rh.length > e.size - at)
        return make_error(where + ": record " + std::to_string(records.size()) +
                          " has bad length " + std::to_string(rh.length));
      Record r;
      r.function_id = rh.function_id;
      // Argument blocks are padded to 8 bytes: give each check the exact block size it
      // expects when the padding can explain the difference, else the full padded size.
      uint64_t body = rh.length - sizeof rh;
      uint64_t expected = 0;
      if (rh.function_id == KBIN_FN_DMA)
        expected = sizeof(kbin_dma_args);
      else if (rh.function_id == KBIN_FN_WAIT_DMA)
        expected = sizeof(kbin_wait_dma_args);
      else if (rh.function_id == KBIN_FN_BARRIER)
        expected = 0;
      else if (rh.function_id == KBIN_FN_SIGNAL)
        expected = sizeof(kbin_signal_args);
      else if (rh.function_id == KBIN_FN_WAIT_SIGNAL)
        expected = sizeof(kbin_wait_signal_args);
      else
        expected = mcl_native_args_size(rh.function_id);
      uint64_t keep = (expected <= body && body - expected < KBIN_RECORD_ALIGN) ? expected : body;
      const uint8_t *rb = sbase + e.offset + at + sizeof rh;
      for (uint64_t i = keep; i < body; ++i)
        if (rb[i] != 0)
          return make_error(where + ": record " + std::to_string(records.size()) +
                            " has non-zero padding");
      r.args.assign(rb, rb + keep);
      records.push_back(std::move(r));
      at += rh.length;
      if (records.size() > (1u << 24))
        return make_error(where + ": too many records");
    }
    p.streams.push_back(std::move(records));
  }
  if (found[KBIN_SECTION_REPORT]) {
    kbin_section r;
    section(KBIN_SECTION_REPORT, r);
    p.report_json.assign(reinterpret_cast<const char *>(bytes + r.offset), r.size);
  }
  if (auto r = validate_program_with_params(p, limits, params.size); !r)
    return r.error();
  return p;
}

std::string describe_record(const Record &rec) {
  std::ostringstream o;
  if (const char *name = control_name(rec.function_id)) {
    o << name;
    if (rec.function_id == KBIN_FN_DMA) {
      kbin_dma_args d;
      if (!rec.decode(d))
        return o.str() + " (malformed)";
      const uint64_t bytes = d.shape.row_bytes * d.shape.rows * d.shape.planes;
      auto ddr = [&] {
        return std::string(space_name(d.ddr.space)) +
               (d.ddr.space == KBIN_DDR_ARG ? std::to_string(d.ddr.arg_index) : "") + "+" +
               hex(d.ddr.offset);
      };
      switch (d.kind) {
      case KBIN_DMA_LOAD:
        o << " load " << ddr() << " -> spm " << hex(d.spm_offset);
        break;
      case KBIN_DMA_STORE:
        o << " store spm " << hex(d.spm_offset) << " -> " << ddr();
        break;
      case KBIN_DMA_MULTICAST:
        o << " multicast " << ddr() << " -> spm " << hex(d.spm_offset) << " of clusters "
          << hex(d.cluster_mask);
        break;
      case KBIN_DMA_EXCHANGE:
        o << " exchange spm " << hex(d.spm_offset) << " -> cluster " << d.dst_cluster << " spm "
          << hex(d.spm_dst_offset);
        break;
      case KBIN_DMA_EXCHANGE_MULTICAST:
        o << " exchange spm " << hex(d.spm_offset) << " -> spm " << hex(d.spm_dst_offset)
          << " of clusters " << hex(d.cluster_mask);
        break;
      default:
        o << " kind " << d.kind;
      }
      o << " " << bytes << " B";
      if (d.shape.planes > 1 || d.shape.rows > 1)
        o << " [" << d.shape.planes << "x" << d.shape.rows << "x" << d.shape.row_bytes << "]";
      if (d.notify_signal >= 0)
        o << " notify " << d.notify_signal;
    } else if (rec.function_id == KBIN_FN_SIGNAL) {
      kbin_signal_args s;
      if (rec.decode(s))
        o << " cluster " << s.cluster << " signal " << s.signal << " +" << s.count;
    } else if (rec.function_id == KBIN_FN_WAIT_SIGNAL) {
      kbin_wait_signal_args w;
      if (rec.decode(w))
        o << " signal " << w.signal << " >= " << w.value;
    }
    return o.str();
  }
  o << mcl_native_fn_name(rec.function_id);
  auto tile = [&](const char *label, const mcl_tile &t) {
    o << " " << label << "=" << dtype_name(t.dtype) << "[" << t.h << "x" << t.w << "x" << t.c
      << "]@" << hex(t.offset);
  };
  switch (rec.function_id) {
  case MCL_NATIVE_FN_CONV2D:
  case MCL_NATIVE_FN_CONV_TRANSPOSE2D: {
    mcl_conv_args a;
    if (rec.decode(a)) {
      tile("in", a.input);
      tile("out", a.output);
      o << " k=" << a.kernel_h << "x" << a.kernel_w << " s=" << a.stride_h << " g=" << a.groups
        << " params@" << hex(a.params_offset) << " table@" << hex(a.table_offset);
      if (a.flags & MCL_CONV_RESIDUAL)
        tile("residual", a.residual);
    }
    break;
  }
  case MCL_NATIVE_FN_GEMM: {
    mcl_gemm_args a;
    if (rec.decode(a)) {
      tile("in", a.input);
      tile("out", a.output);
      o << " params@" << hex(a.params_offset);
    }
    break;
  }
  case MCL_NATIVE_FN_POOL2D: {
    mcl_pool_args a;
    if (rec.decode(a)) {
      o << (a.kind == MCL_POOL_MAX ? " max" : " avg");
      tile("in", a.input);
      tile("out", a.output);
      o << " k=" << a.kernel_h << "x" << a.kernel_w;
    }
    break;
  }
  case MCL_NATIVE_FN_ELTWISE: {
    mcl_eltwise_args a;
    if (rec.decode(a)) {
      o << " op=" << a.op;
      tile("a", a.a);
      tile("b", a.b);
      tile("out", a.output);
    }
    break;
  }
  case MCL_NATIVE_FN_SCALE_SHIFT: {
    mcl_scale_shift_args a;
    if (rec.decode(a)) {
      tile("in", a.input);
      tile("out", a.output);
    }
    break;
  }
  case MCL_NATIVE_FN_CUSTOM: {
    mcl_custom_args a;
    if (rec.decode(a)) {
      // The validator proved the name a NUL-terminated identifier; decode() did not.
      o << " " << std::string(a.function, strnlen(a.function, sizeof a.function));
      tile("in", a.input);
      tile("out", a.output);
      o << " params=" << a.param_count << " cycles=" << a.cycles;
    }
    break;
  }
  case MCL_NATIVE_FN_ACTIVATION:
  case MCL_NATIVE_FN_SOFTMAX:
  case MCL_NATIVE_FN_COPY: {
    mcl_unary_args a;
    if (rec.decode(a)) {
      tile("in", a.input);
      tile("out", a.output);
    }
    break;
  }
  default:
    o << " (" << rec.args.size() << " B args)";
  }
  return o.str();
}

} // namespace kann::format
