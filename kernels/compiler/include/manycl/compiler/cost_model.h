// The modeled cost of OpenCL C code on a PE of the accelerator (a 6-issue VLIW core): the
// per-operation table the kernel compiler's instrumentation uses (cost_instrument.cpp) and the
// constants the executor adds per work-group. docs/device-model.md "OpenCL C kernels" gives
// every value with its source; change them together with that table.
#pragma once
#include <cstdint>

namespace manycl::compiler::cost {

// Costs are kept in ticks, 1/384 cycle: an issue slot (1/6 cycle) and the cache-miss share of
// one byte (miss / 64-byte line) are then whole numbers, so fractional costs of blocks add up
// without rounding; a PE's ticks become cycles once per work-group slice (ceil).
inline constexpr uint64_t kTicksPerCycle = 384;
inline constexpr uint64_t kIssueWidth = 6;
inline constexpr uint64_t kSlot = kTicksPerCycle / kIssueWidth; // one operation's issue slot

// Stall cycles (beyond the issue slot) of long-latency operations, per element.
inline constexpr uint64_t kIntDivCycles = 32;   // integer divide / remainder (software)
inline constexpr uint64_t kFp32DivCycles = 16;  // FP32 divide
inline constexpr uint64_t kFp64DivCycles = 32;  // FP64 divide
inline constexpr uint64_t kFp32SqrtCycles = 16; // FP32 square root
inline constexpr uint64_t kFp64SqrtCycles = 32; // FP64 square root
inline constexpr uint64_t kFp32MathCycles = 40; // transcendental builtin (exp, log, sin, pow...)
inline constexpr uint64_t kFp64MathCycles = 80;
inline constexpr uint64_t kFp64Slots = 2; // FP64 add/mul/fma issue at half the FP32 rate

// Memory. __local and private data are in the SPM: one slot per element, latency pipelined.
// __global data is in DDR behind the cluster's data cache: one slot per element plus the
// miss cost of a 64-byte line shared by the bytes of a streaming access (every byte accessed
// pays kMissCycles / kLineBytes; reuse is not modeled).
inline constexpr uint64_t kLineBytes = 64;
inline constexpr uint64_t kMissCycles = 120;
inline constexpr uint64_t kGlobalAtomicCycles = 120; // atomics on DDR bypass the cache
inline constexpr uint64_t kLocalAtomicCycles = 8;    // atomics on the SPM

// SPMD: the PEs of a cluster meet at every work-group barrier; leaving it costs this many
// cycles after the slowest PE arrived. LWI runs a group on one PE: a barrier is free.
inline constexpr uint64_t kPeBarrierCycles = 20;

// The per-PE counter slot of the work-item context (internal.h's WiCtx), in ticks.
inline constexpr unsigned kCounterSlot = 30;

inline constexpr uint64_t ticksToCycles(uint64_t ticks) {
  return (ticks + kTicksPerCycle - 1) / kTicksPerCycle;
}

} // namespace manycl::compiler::cost
