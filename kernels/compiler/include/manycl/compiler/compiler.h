// ManyCL OpenCL C compiler: public API.
//
// Self-contained: no LLVM/Clang type appears here. Everything that touches
// LLVM lives inside the static library manycl_compiler (hidden visibility).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace manycl::compiler {

/// How the work-items of one work-group are executed.
enum class ExecMode : uint8_t {
  LWI = 0,  ///< one host thread loops over all work-items of the group
  SPMD = 1, ///< work-items spread over the PEs of a cluster (PeTeam)
};

/// Description of the target device (part of the cache key).
struct DeviceDesc {
  unsigned address_bits = 64;
  uint64_t local_mem_size = 4u << 20; ///< SPM bytes usable as __local memory
  ExecMode mode = ExecMode::LWI;
  unsigned pes_per_cluster = 16;
  bool fp64 = true;
  bool fp16 = false;
  /// Canonical text form (used for hashing and stored in binaries).
  std::string key() const;
};

enum class ErrorCode : uint8_t {
  Ok = 0,
  InvalidOptions,    ///< CL_INVALID_BUILD_OPTIONS / CL_INVALID_COMPILER_OPTIONS /
                     ///< CL_INVALID_LINKER_OPTIONS
  BuildFailure,      ///< CL_BUILD_PROGRAM_FAILURE / CL_COMPILE_PROGRAM_FAILURE
  LinkFailure,       ///< CL_LINK_PROGRAM_FAILURE
  InvalidBinary,     ///< CL_INVALID_BINARY
  InvalidKernelName, ///< CL_INVALID_KERNEL_NAME
  InvalidArgs,       ///< CL_INVALID_KERNEL_ARGS / CL_INVALID_ARG_SIZE
  InvalidWorkGroup,  ///< CL_INVALID_WORK_GROUP_SIZE
  OutOfResources,    ///< CL_OUT_OF_RESOURCES (e.g. __local memory does not fit)
  Internal,
};

/// Small status type: no exception ever escapes this API.
struct Status {
  ErrorCode code = ErrorCode::Ok;
  std::string message;
  bool ok() const { return code == ErrorCode::Ok; }
  explicit operator bool() const { return ok(); }
  static Status success() { return {}; }
  static Status error(ErrorCode c, std::string m) { return {c, std::move(m)}; }
};

template <class T> class Result {
public:
  Result(T v) : value_(std::move(v)) {}
  Result(Status s) : status_(std::move(s)) {}
  bool ok() const { return status_.ok() && value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return status_; }
  T &value() { return *value_; }
  const T &value() const { return *value_; }
  T &operator*() { return *value_; }
  T *operator->() { return &*value_; }

private:
  Status status_;
  std::optional<T> value_;
};

/// Address qualifier values are the OpenCL SPIR numbering.
enum class AddressQual : uint8_t { Private = 0, Global = 1, Constant = 2, Local = 3 };
enum class AccessQual : uint8_t { None = 0, ReadOnly, WriteOnly, ReadWrite };
enum TypeQual : uint32_t {
  TypeQualNone = 0,
  TypeQualConst = 1,
  TypeQualRestrict = 2,
  TypeQualVolatile = 4,
  TypeQualPipe = 8
};

struct KernelArgInfo {
  AddressQual address = AddressQual::Private;
  AccessQual access = AccessQual::None;
  std::string type_name; ///< e.g. "float*", "int4", "struct S"
  uint32_t type_qual = TypeQualNone;
  std::string name;        ///< only with -cl-kernel-arg-info (else empty)
  bool is_pointer = false; ///< global/constant/local pointer (set with a buffer / local size)
  uint32_t size = 0;       ///< by-value args: sizeof(type); pointers: 8
  uint32_t align = 0;      ///< by-value args: alignment of type
};

struct KernelInfo {
  std::string name;
  std::vector<KernelArgInfo> args;
  uint32_t reqd_work_group_size[3] = {0, 0, 0}; ///< all 0 when absent
  uint32_t work_group_size_hint[3] = {0, 0, 0};
  std::string vec_type_hint;
  std::string attributes;         ///< CL_KERNEL_ATTRIBUTES text
  uint64_t static_local_size = 0; ///< kernel-scope __local variables (bytes)
  uint64_t private_size = 0;      ///< estimate of per-work-item private memory
  bool uses_barriers = false;
  bool uses_printf = false;
  // Internal (how the work-group function was generated):
  bool region_based = false; ///< barrier kernel compiled to barrier-free regions
  uint64_t frame_size = 0;   ///< per-work-item bytes of values live across barriers
  /// Bytes of work-group uniform values live across barriers (one slot per group, two copies).
  uint64_t uniform_frame_size = 0;
  /// How the entry point reports its modeled cost (cost_instrument.cpp): not at all
  /// (MANYCL_COST=0), or per call, per row and per item of a call over the whole group, which
  /// the executor apportions to the modeled PEs (docs/device-model.md). Uniform: every
  /// work-item takes the same path. Divergent: some do not; the cost of the divergent blocks
  /// that ran (not turned into masked operations) is charged to the slowest PE.
  enum class Cost : uint8_t { None = 0, Divergent = 1, Uniform = 2 };
  Cost cost = Cost::None;
  /// The source has no barrier: the regions come from the compiler's barriers at the end of
  /// the trips of uniform loops (so that work-item loops vectorize); they synchronize nothing
  /// on the modeled device (no PE barrier cycles) and need no PE team.
  bool loop_barriers = false;
  /// Region kernels: how many barriers come from the source. Region ids 1 to this one follow
  /// a source barrier (a PE barrier on the modeled device); higher ids start a trip of a loop
  /// that the compiler gave a barrier (loop_barriers, also in kernels with barriers of their
  /// own), which synchronizes nothing on the modeled device.
  uint32_t source_barriers = 0;
};

enum class BinaryKind : uint8_t { None = 0, Executable = 1, Object = 2, Library = 3 };

/// Result of build / compile / link.
struct BuildResult {
  Status status;
  std::string log;             ///< Clang's diagnostics and our own messages
  std::vector<uint8_t> binary; ///< self-contained program binary (CL_PROGRAM_BINARIES)
  BinaryKind kind = BinaryKind::None;
  std::vector<KernelInfo> kernels; ///< only for executables
  bool from_cache = false;
  bool ok() const { return status.ok(); }
};

/// An embedded header for clCompileProgram (name as used by #include).
struct HeaderSource {
  std::string name;
  std::string source;
};

/// clBuildProgram: source -> executable binary (uses the on-disk cache).
BuildResult build(std::string_view source, std::string_view options, const DeviceDesc &dev);
/// clCompileProgram: source -> compiled object binary.
BuildResult compile(std::string_view source, std::string_view options, const DeviceDesc &dev,
                    std::span<const HeaderSource> headers = {});
/// clLinkProgram: objects / libraries -> executable (or library with
/// -create-library).
BuildResult link(std::span<const std::span<const uint8_t>> inputs, std::string_view options,
                 const DeviceDesc &dev);

/// What a binary holds, without JIT compiling it (never trusts the bytes).
struct BinaryInfo {
  BinaryKind kind = BinaryKind::None;
  std::string options;
  std::string log;
  std::string device_key;
  std::vector<KernelInfo> kernels;
};
Result<BinaryInfo> inspectBinary(std::span<const uint8_t> binary);

// ---- native (mppa_native) functions ------------------------------------
/// A symbol provider: returns the address of a native function or nullptr.
using NativeResolver = std::function<void *(std::string_view name)>;
/// Registers a provider (process-wide). Returns an id for removal.
int addNativeResolver(NativeResolver r);
void removeNativeResolver(int id);
/// dlopen()s a shared library and registers it as a provider.
Status addNativeLibrary(const std::string &path);
/// Resolves through all registered providers (nullptr if none knows it).
void *resolveNative(std::string_view name);

// ---- loaded programs ---------------------------------------------------
class Program;
class Kernel;

/// Validates and JIT-loads an executable binary.
Result<std::shared_ptr<Program>> load(std::span<const uint8_t> binary);

class Program {
public:
  virtual ~Program() = default;
  virtual const std::vector<KernelInfo> &kernels() const = 0;
  /// nullptr if no kernel of that name.
  virtual const Kernel *kernel(std::string_view name) const = 0;
  /// Waits for the specializations being compiled in the background (Launch::Specialize::
  /// IfUseful); launches prepared afterwards run them. For tests and benchmarks: nothing else
  /// needs to wait.
  virtual void waitForSpecializations() const {}
};

class Kernel {
public:
  virtual ~Kernel() = default;
  virtual const KernelInfo &info() const = 0;
};

// ---- execution ---------------------------------------------------------
/// One kernel argument as set by clSetKernelArg.
struct ArgValue {
  enum class Kind : uint8_t { Unset, Pointer, Bytes, Local };
  Kind kind = Kind::Unset;
  void *ptr = nullptr;        ///< Pointer: host address of the buffer (may be null)
  std::vector<uint8_t> bytes; ///< Bytes: by-value argument contents
  size_t local_size = 0;      ///< Local: bytes of __local memory
  static ArgValue pointer(void *p) {
    ArgValue a;
    a.kind = Kind::Pointer;
    a.ptr = p;
    return a;
  }
  static ArgValue value(const void *p, size_t n) {
    ArgValue a;
    a.kind = Kind::Bytes;
    a.bytes.assign(static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
    return a;
  }
  template <class T> static ArgValue of(const T &v) { return value(&v, sizeof(T)); }
  static ArgValue local(size_t n) {
    ArgValue a;
    a.kind = Kind::Local;
    a.local_size = n;
    return a;
  }
};

struct NDRange {
  uint32_t work_dim = 1;
  uint64_t offset[3] = {0, 0, 0};
  uint64_t global[3] = {1, 1, 1};
  uint64_t local[3] = {1, 1, 1}; ///< enqueued local size
  uint64_t numGroups(int d) const { return (global[d] + local[d] - 1) / local[d]; }
};

/// Host memory that an executor of work-groups reuses from one group to the next: the heap
/// frame of barrier-free kernels with large private arrays and the stacks of work-item
/// fibers. A thread that runs each of its groups to completion before the next uses one of its
/// own (kept per thread); a team member that may leave a group half-run while its host thread
/// runs another group (a fiber yielding at a barrier) must be given one (PeTeam::scratch).
class GroupScratch {
public:
  GroupScratch();
  ~GroupScratch();
  GroupScratch(const GroupScratch &) = delete;
  GroupScratch &operator=(const GroupScratch &) = delete;

  struct Impl;
  Impl &impl() { return *impl_; }

private:
  std::unique_ptr<Impl> impl_;
};

/// The PEs of one cluster, supplied by the caller for SPMD execution.
class PeTeam {
public:
  virtual ~PeTeam() = default;
  virtual unsigned size() const = 0;
  /// Runs fn(pe) for every pe in [0, size()) so that all can wait for each other at
  /// arriveAndWait() (threads, or fibers whose waits yield their host thread) and returns
  /// when all have returned.
  virtual void run(const std::function<void(unsigned pe)> &fn) = 0;
  /// The work-group barrier of the members of the current run(): waits until every member
  /// still in it has arrived. Each member leaves it once, with arriveAndDrop(), when it has
  /// no more barriers to meet (at its end, or at once when it has no work-items).
  virtual void arriveAndWait() = 0;
  virtual void arriveAndDrop() = 0;
  /// The scratch of member `pe` during run(); null: its host thread's own, which is only
  /// right when no two members share a host thread.
  virtual GroupScratch *scratch(unsigned pe) {
    (void)pe;
    return nullptr;
  }
};

/// Hook behind async_work_group_copy / async_work_group_strided_copy: copies
/// num elements of elem_size bytes; element i is read at src + i*src_stride
/// and written at dst + i*dst_stride (strides in elements). Called once per
/// work-group (by the work-item with local linear id 0); wait_group_events
/// is a work-group barrier. Default: plain memcpy loops.
using AsyncCopyHook = void (*)(void *user, void *dst, const void *src, size_t elem_size, size_t num,
                               size_t src_stride, size_t dst_stride);

/// The modeled cost of one work-group (docs/device-model.md, "OpenCL C kernels"): the
/// work-items are split over `pes` modeled PEs as SPMD splits them (by rows, else by x); the
/// group runs in one call per barrier interval on the calling thread (a team is not used),
/// whose cost is apportioned to the PEs (KernelInfo::Cost), and the group takes, per barrier
/// interval, the slowest PE's cycles plus cost::kPeBarrierCycles per barrier when pes > 1.
/// Independent of the host threads that run it.
struct GroupCost {
  unsigned pes = 1;    ///< in: modeled PEs the group is spread over (SPMD); 1 for LWI
  uint64_t cycles = 0; ///< out
};

/// A kernel + arguments + NDRange, prepared once per enqueue; runGroup() may
/// then be called concurrently from several threads (one per cluster/PE).
class Launch {
public:
  /// Whether the groups of the enqueued local size run the kernel's code specialized for that
  /// size (docs/compiler.md, "Specialization by local size"): once the size has run enough
  /// groups (IfUseful: compiled in the background meanwhile, so no launch waits for it), from
  /// this launch on (Now), or not (Never; MANYCL_SPECIALIZE=0 makes every launch Never).
  /// Results and modeled cycles are the same either way.
  enum class Specialize : uint8_t { IfUseful, Now, Never };
  static Result<Launch> prepare(const Kernel &k, std::span<const ArgValue> args,
                                const NDRange &range, Specialize specialize = Specialize::IfUseful);
  /// True when the groups of the enqueued local size run a specialized entry point.
  bool specialized() const;
  /// Bytes of __local arena needed per work-group: __local args + kernel
  /// scope __local variables, each 64-byte aligned. Check against the SPM.
  uint64_t localMemSize() const;
  /// Runs work-group `group_id`. `arena` (64-byte aligned, >= localMemSize()
  /// bytes) is the cluster's SPM slice. SPMD needs a team (else LWI is used).
  /// With `cost`, also models the group's cycles.
  Status runGroup(const uint64_t group_id[3], void *arena, size_t arena_size, ExecMode mode,
                  PeTeam *team = nullptr, GroupCost *cost = nullptr) const;
  void setAsyncCopyHook(AsyncCopyHook hook, void *user);

  Launch();
  ~Launch();
  Launch(Launch &&) noexcept;
  Launch &operator=(Launch &&) noexcept;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

/// A simple std::thread-backed PeTeam (tests, host fallback).
std::unique_ptr<PeTeam> makeThreadPeTeam(unsigned n);

// ---- cache / misc ------------------------------------------------------
/// Version string of compiler + builtins (part of the cache key).
std::string compilerVersion();
/// Directory of the kernel cache ("" when disabled by MANYCL_CACHE=0).
std::string cacheDirectory();
/// Bytes of the widest vector register the JIT-compiled kernels use on this host (64 with
/// AVX-512, 32 with AVX, else 16): the device's preferred / native vector widths follow it.
unsigned hostVectorBytes();

} // namespace manycl::compiler
