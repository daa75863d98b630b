// kann program binaries ("kbin"): an in-memory model of a binary, the writer the compiler
// uses, and the validating reader the OpenCL runtime calls on untrusted bytes.
//
// read_kbin() never trusts its input: every length, id, offset, size and shape is checked
// (argument blocks of compute records through mcl_native_validate) and any failure is a
// Result error with a one-line explanation, suitable for a CL build log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kann/kbin.h"
#include "manycl/result.h"

namespace kann::format {

struct TensorDesc {
  std::string name;
  uint32_t role = KBIN_ROLE_INPUT; // kbin_tensor_role
  uint32_t arg_index = 0;          // kernel argument index of its DDR buffer
  uint32_t dtype = 1;              // mcl_dtype
  uint32_t layout = KBIN_LAYOUT_ONNX;
  std::vector<uint64_t> dims;
  uint64_t byte_size = 0;
  float scale = 1.0f;
  int32_t zero_point = 0;
};

// One record: a function id and its argument block (any size; the writer pads to 8 bytes).
struct Record {
  uint32_t function_id = 0;
  std::vector<uint8_t> args;

  template <class T> static Record make(uint32_t function_id, const T &block) {
    static_assert(std::is_trivially_copyable_v<T>);
    Record r;
    r.function_id = function_id;
    r.args.resize(sizeof(T));
    std::memcpy(r.args.data(), &block, sizeof(T));
    return r;
  }
  // Copies the argument block into a T when the sizes match (false otherwise).
  template <class T> bool decode(T &out) const {
    static_assert(std::is_trivially_copyable_v<T>);
    if (args.size() < sizeof(T))
      return false;
    std::memcpy(&out, args.data(), sizeof(T));
    return true;
  }
};

struct Program {
  uint32_t cluster_count = 1;
  uint32_t pes_per_cluster = 0;
  uint64_t spm_bytes = 0;    // SPM per cluster of the configuration compiled for
  uint64_t spm_required = 0; // highest SPM byte used + 1
  uint64_t scratch_size = 0;
  uint32_t arg_count = 0;
  uint16_t version_minor = KBIN_VERSION_MINOR;
  std::string preset;
  std::vector<TensorDesc> tensors;
  std::vector<uint8_t> params;
  std::vector<std::vector<Record>> streams; // one per cluster
  std::string report_json;                  // optional
};

// What the loading device offers. 0 = do not check.
struct DeviceLimits {
  uint32_t cluster_count = 0; // must equal the program's cluster count
  uint64_t spm_bytes = 0;     // must be >= the program's spm_required
};

// Semantic checks of a program (also run by read_kbin and write_kbin).
manycl::Result<void> validate_program(const Program &program, const DeviceLimits &limits = {});

// Serializes a program; fails when it does not validate (a compiler bug, never silent).
manycl::Result<std::vector<uint8_t>> write_kbin(const Program &program);

// Whether read_kbin copies the parameter blob into Program::params. A reader that needs only
// the descriptors (the host side of a session, `kann inspect`) skips the copy of what can be
// hundreds of megabytes; everything is still validated against the blob's size.
enum class ReadParams { Copy, Skip };

// Parses and validates untrusted bytes.
manycl::Result<Program> read_kbin(const void *data, size_t size, const DeviceLimits &limits = {},
                                  ReadParams with_params = ReadParams::Copy);

// The header's checksum of a whole binary: CRC-32C (Castagnoli) over `size` bytes with the
// 4 bytes of kbin_header::checksum read as zero. Bytes shorter than a header have none (0).
uint32_t kbin_checksum(const void *data, size_t size);

// Stores kbin_checksum() in the header of bytes changed on purpose (tests that corrupt a
// field to reach a later check, the fuzz target), so that the reader judges what they hold.
void reseal_kbin(void *data, size_t size);

// Serialized bytes of one cluster's record stream (length/function id headers included): the
// exact bytes the device interpreter walks.
std::vector<uint8_t> serialize_stream(const std::vector<Record> &records);

// One line describing a record ("dma load PARAMS+0x40 -> spm 0x100 1024 B", "conv2d ...").
std::string describe_record(const Record &record);
const char *dtype_name(uint32_t dtype);

} // namespace kann::format
