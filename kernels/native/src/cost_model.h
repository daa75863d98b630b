// The modeled micro-architecture of a cluster's processing elements, and the building blocks
// every native function's cost function is made of. Each function's cost lives next to its
// implementation (conv.cpp, ops.cpp); registry.cpp only dispatches. Where every constant
// comes from (a citation or "assumption") is in docs/device-model.md, "Native compute model".
#pragma once

#include "internal.h"

namespace manycl::native::cost {

// ---- cited: the MPPA3 tensor coprocessor (48 x 256-bit registers, operands of 4 rows,
// a 32-byte-per-cycle load/store path from the SMEM) ----
inline constexpr uint32_t kLsuBytes = 32;       // bytes per load/store cycle
inline constexpr uint32_t kBlockRows = 4;       // rows (pixels) and columns (channels) of a block
inline constexpr uint32_t kCoprocRegisters = 48; // 256-bit registers

// ---- assumptions (docs/device-model.md) ----
inline constexpr uint64_t kCallCycles = 60;      // argument decoding, loop nest set-up
inline constexpr uint64_t kFanOutPerPe = 4;      // PE wake-up and join through the SMEM
inline constexpr uint64_t kUnitCycles = 12;      // per work unit: pointers, loop bounds
inline constexpr uint64_t kTapCycles = 6;        // per tap of a unit: software-pipeline fill
inline constexpr uint64_t kChunkElements = 256;  // elements of one VLIW work unit
// Fitted (the one calibrated constant): the fraction of its issue slots the matrix engine
// (coprocessor, or the FPU for FP32) keeps busy in generated code. Fitted so that
// YOLOv3-416 FP16 on mppa3 models near the ~20 FPS KaNN reaches on the silicon.
inline constexpr uint32_t kMatrixEfficiencyPct = 55;

// VLIW element operations per cycle per PE (vector work: activations, conversions, adds).
uint32_t vliw_rate(uint32_t dtype);
// VLIW operations per element of an activation function (0 for none).
uint32_t activation_ops(const mcl_activation &act);

// The matrix engine for a convolution/GEMM of input type `dtype`.
struct MatrixEngine {
  uint32_t k_block;       // reduction depth of one 4x4 block operation
  uint32_t block_cycles;  // issue cycles of one block operation
  uint32_t in_bytes;      // activation element size
  uint32_t weight_bytes;  // weight element size as packed in the SPM
  uint32_t mr, nr;        // register tile, in 4x4 blocks (rows x columns)
  bool coprocessor;       // false: FP32 on the VLIW FPU
  uint32_t acc_move_cycles_per_block; // accumulators to general registers, per block
};
MatrixEngine matrix_engine(uint32_t dtype);

// Cycles and their split; what mcl_native_cost_breakdown reports.
struct Cost {
  uint64_t total = 0;
  uint64_t matrix = 0;     // per-PE matrix-engine issue cycles (efficiency applied)
  uint64_t load_store = 0; // per-PE load/store cycles
  uint64_t vliw = 0;       // per-PE VLIW vector cycles
  uint64_t overhead = 0;   // call, unit and tap overheads on the slowest PE
  uint64_t macs = 0;       // multiply-accumulates of the operation
  uint64_t padded_macs = 0; // what the matrix engine executes, partial blocks included
  uint32_t bound = 0;       // mcl_native_bound
};

// Cycles of one work unit per issue lane. The matrix engine, the load/store unit and the
// VLIW vector lanes run a software-pipelined loop in parallel (the slowest sets the pace);
// the epilogue (accumulators out, bias, activation, conversion) and the overheads follow it.
struct UnitCost {
  double matrix = 0, load_store = 0, vliw = 0, epilogue = 0, overhead = 0;
};

// Work split into `units` equal units over `pes` PEs (the slowest PE takes ceil(units/pes)).
// Fills the slowest PE's per-lane totals and the total, including the call overhead.
Cost finish(uint64_t units, uint32_t pes, const UnitCost &unit);

// Sets c.bound to the lane with the most cycles (matrix first on ties).
void set_bound(Cost &c);

// Two phases of one call run one after the other (each waits for the previous one on every
// PE): cycles, lanes and MACs add up.
Cost sequence(const Cost &a, const Cost &b);

// Streaming VLIW work: `elements` results, each loading/storing `bytes_per_element` and
// costing `ops_per_element` operations at vliw_rate(dtype).
Cost stream(uint64_t elements, double bytes_per_element, double ops_per_element,
            uint32_t dtype, uint32_t pes);

// Cost of one call of each native function (args already validated).
Cost conv_cost(uint32_t fn, const mcl_conv_args &a, uint32_t pes);
Cost matmul_cost(const mcl_matmul_args &a, uint32_t pes);
Cost pool_cost(const mcl_pool_args &a, uint32_t pes);
Cost eltwise_cost(const mcl_eltwise_args &a, uint32_t pes);
Cost scale_shift_cost(const mcl_scale_shift_args &a, uint32_t pes);
Cost unary_cost(uint32_t fn, const mcl_unary_args &a, uint32_t pes);
Cost resize_cost(const mcl_resize_args &a, uint32_t pes);
Cost pad_cost(const mcl_pad_args &a, uint32_t pes);

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }
inline uint64_t elements(const mcl_tile &t) { return (uint64_t)t.h * t.w * t.c; }

} // namespace manycl::native::cost
