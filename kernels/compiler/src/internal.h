// Internal definitions shared by the compiler pieces (not installed).
#pragma once

#include "manycl/compiler/compiler.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llvm {
class Function;
class Module;
class LLVMContext;
class ObjectCache;
class MemoryBuffer;
} // namespace llvm

namespace manycl::compiler::detail {

// Layout of the per-PE work-item context (all slots are 64-bit). JIT code
// reads it through `ptr %wctx` with fixed slot indices; each 3-D array has a
// 4th slot holding the value for dimension indices >= 3.
enum CtxSlot : unsigned {
  SlotWorkDim = 0,
  SlotGlobalOffset = 1,  // [4]
  SlotGlobalSize = 5,    // [4]
  SlotLocalSize = 9,     // [4] actual size of this group
  SlotGroupId = 13,      // [4]
  SlotNumGroups = 17,    // [4]
  SlotEnqLocalSize = 21, // [4]
  SlotLocalStatic = 25,  // char* base of kernel-scope __local variables
  SlotSched = 26,        // fiber scheduler of this PE (barrier kernels)
  SlotAsyncHook = 27,    // AsyncCopyHook
  SlotAsyncUser = 28,
  SlotFrame = 29,  // per-work-item context arrays (region kernels)
  SlotCycles = 30, // modeled cost of the PE's work-items, in ticks (cost_model.h)
  // Of SlotCycles, the part spent in per-row blocks (in the row loop, outside the work-item
  // loops) and in per-item blocks (inside the work-item loops): KernelInfo::Cost::Uniform.
  SlotCyclesRow = 31,
  SlotCyclesItem = 32,
  // Barrier interval of a region call, counted from 0 (region kernels): its parity selects
  // which copy of the work-group uniform slots the region reads (the other one it writes).
  SlotParity = 33,
  // Of SlotCyclesItem, the part spent in divergent blocks (run by some items only).
  SlotCyclesDivergent = 34,
  // Region kernels with a power-of-two group size (runRegionsCosted): the slowest PE's shares
  // of the row and item ticks (times the group's items; the row share is 0 for other groups),
  // log2 of the group's items, the group's items - 1, and the group's cycles so far, which each
  // region call adds its interval's to (cost_instrument.cpp).
  SlotShareRow = 35,
  SlotShareItem = 36,
  SlotShareShift = 37,
  SlotIntervalCycles = 38,
  SlotShareRound = 39,
  // The group's first global id: group id x enqueued local size + global offset, so that the
  // global id is one no-wrap add of it and the local id (globalId in wgfunc.cpp).
  SlotGroupBase = 40, // [4]
  SlotCount = 44,
};

struct WiCtx {
  uint64_t slot[SlotCount];
};

/// Parsed build/compile/link options.
struct ParsedOptions {
  std::vector<std::string> clang_args; // passed to cc1
  std::string cl_std = "CL1.2";
  bool opt_disable = false;
  bool kernel_arg_info = false;
  bool create_library = false;
  bool fast_math = false;
  std::string error; // non-empty: invalid option
};
enum class OptionsKind { Build, Compile, Link };
ParsedOptions parseOptions(std::string_view options, OptionsKind kind);

// Binary container.
struct Container {
  BinaryKind kind = BinaryKind::None;
  std::string options;
  std::string log;
  std::string device_key;
  std::vector<KernelInfo> kernels;
  std::string bitcode;
};
std::vector<uint8_t> writeContainer(const Container &c);
Status readContainer(std::span<const uint8_t> bytes, Container &out);

/// The JIT's object cache: one file per module, named by the module's identifier.
std::unique_ptr<llvm::ObjectCache> makeObjectCache();
/// The cached object code of the module named `moduleName`; null when there is none (or the
/// cache is off, or the file is corrupt: then it is removed).
std::unique_ptr<llvm::MemoryBuffer> readCachedObject(const std::string &moduleName);

// Makes every integer division and remainder of the module safe from hardware traps
// (safe_division.cpp).
void guardIntegerDivision(llvm::Module &M);

// Adds the modeled cost counter updates to the kernels' entry points and sets each kernel's
// KernelInfo::cost: Uniform where the work-group builder found that all work-items take the same
// path, else PerCall (cost_instrument.cpp).
void instrumentCost(llvm::Module &M, std::vector<KernelInfo> &kernels);
// Stops guarded loops at the first trip their guard fails, where that guard can only fail from
// there on (`if (x < s)` in a work-item loop), and marks them kNarrowedLoopMd
// (narrow_loops.cpp). True when it changed `F`.
bool narrowGuardedLoops(llvm::Function &F);
/// Loop-ID property of the loops narrowGuardedLoops narrowed.
inline constexpr const char *kNarrowedLoopMd = "manycl.narrowed";
// False when MANYCL_COST=0 (kernels built without cost instrumentation).
bool costInstrumentation();
// True when MANYCL_COST=per-trip: every loop trip adds its ticks at run time, none is
// multiplied by a trip count computed before the loop (the same modeled cycles, more host
// time: for checking the trip counts).
bool costPerTrip();

// Host-side symbols the JIT may resolve (the fixed, explicit set).
void *lookupHostSymbol(std::string_view name);

// Cache.
std::string cacheKey(std::string_view preprocessed, std::string_view options,
                     const DeviceDesc &dev);
bool cacheLoad(const std::string &key, Container &out);
void cacheStore(const std::string &key, const std::vector<uint8_t> &bytes);
bool cacheReadRaw(const std::string &file, std::string &out);
void cacheWriteRaw(const std::string &file, std::string_view bytes);
void cacheRemoveRaw(const std::string &file);

uint64_t fnv1a64(const void *data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

// Names of generated entry points.
inline std::string wgName(const std::string &k) {
  return "__manycl_wg_" + k;
}
inline std::string fiberName(const std::string &k) {
  return "__manycl_fiber_" + k;
}
inline std::string regionName(const std::string &k) {
  return "__manycl_region_" + k;
}
constexpr int kRegionExit = -1;
// Alias-scope domain of the context arrays of loop-barrier kernels (wgfunc.cpp): accesses in
// it are host bookkeeping, not modeled PE work (cost_instrument.cpp).
inline constexpr const char *kLoopFrameDomain = "manycl.loop-frame";
/// Alias-scope domain of the per-item context arrays of kernels with barriers of their own.
inline constexpr const char *kFrameDomain = "manycl.frame";

using WgFn = void (*)(void **args, WiCtx *ctx, uint64_t x0, uint64_t x1, uint64_t r0, uint64_t r1);
using RegionFn = int32_t (*)(void **args, WiCtx *ctx, int32_t region, uint64_t x0, uint64_t x1,
                             uint64_t r0, uint64_t r1);
using FiberFn = void (*)(void **args, WiCtx *ctx, uint64_t x, uint64_t y, uint64_t z);

// Fiber scheduler (executor.cpp); called by JIT code at barriers.
extern "C" void __manycl_barrier(WiCtx *ctx);

} // namespace manycl::compiler::detail
