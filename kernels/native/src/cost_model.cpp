// Building blocks of the native functions' cost model (see cost_model.h).
#include "cost_model.h"

#include <cmath>

namespace manycl::native::cost {

uint32_t vliw_rate(uint32_t dtype) {
  switch (dtype) {
  case MCL_DTYPE_F16:
    return 16; // FP16 SIMD on the FPU lanes
  case MCL_DTYPE_S8:
  case MCL_DTYPE_U8:
    return 16; // widened to 16 bits for arithmetic
  default:
    return 8; // FP32 / INT32: 4 ALU lanes x 2 x 32 bits
  }
}

uint32_t activation_ops(const mcl_activation &act) {
  switch (act.kind) {
  case MCL_ACT_NONE:
    return 0;
  case MCL_ACT_RELU:
    return 1; // max
  case MCL_ACT_CLIP:
  case MCL_ACT_LEAKY_RELU:
    return 2; // min+max, mul+select
  case MCL_ACT_HARD_SIGMOID:
    return 3; // fma, min, max
  case MCL_ACT_HARD_SWISH:
    return 4;
  case MCL_ACT_SIGMOID:
  case MCL_ACT_TANH:
    return 12; // exp by range reduction + polynomial, then a reciprocal
  case MCL_ACT_SILU:
    return 13;
  case MCL_ACT_MISH:
    return 26; // exp, log1p, tanh
  default:
    return 12;
  }
}

MatrixEngine matrix_engine(uint32_t dtype) {
  MatrixEngine e{};
  switch (dtype) {
  case MCL_DTYPE_S8:
  case MCL_DTYPE_U8:
    // INT8.32: 4x8 . 8x4 -> 4x4 INT32 in one cycle; the packed parameters hold INT8 weights
    // as bytes, the operand layout of the engine (docs/native.md).
    e = {8, 1, 1, 1, 2, 4, true, 2};
    break;
  case MCL_DTYPE_F16:
    // FP16.32: 4x4 . 4x4 -> 4x4 FP32 as four successive operations (16 FMA/cycle).
    e = {4, 4, 2, 2, 2, 4, true, 2};
    break;
  default:
    // FP32 has no coprocessor path: the FPU does 8 FMA/cycle, i.e. a 4x4 block of
    // rank-1 updates in 2 cycles; a 4-pixel x 16-channel tile lives in general registers.
    e = {1, 2, 4, 4, 1, 4, false, 0};
    break;
  }
  return e;
}

Cost finish(uint64_t units, uint32_t pes, const UnitCost &u) {
  Cost c;
  pes = std::max<uint32_t>(1, pes);
  const double per_pe = (double)ceil_div(units, pes);
  const double unit = u.overhead + std::max({u.matrix, u.load_store, u.vliw}) + u.epilogue;
  const uint64_t call = kCallCycles + kFanOutPerPe * pes;
  c.matrix = (uint64_t)std::ceil(u.matrix * per_pe);
  c.load_store = (uint64_t)std::ceil(u.load_store * per_pe);
  c.vliw = (uint64_t)std::ceil((u.vliw + u.epilogue) * per_pe);
  c.overhead = call + (uint64_t)std::ceil(u.overhead * per_pe);
  c.total = call + (uint64_t)std::ceil(unit * per_pe);
  set_bound(c);
  return c;
}

void set_bound(Cost &c) {
  const uint64_t lanes[] = {c.matrix, c.load_store, c.vliw, c.overhead};
  c.bound = MCL_NATIVE_BOUND_MATRIX;
  uint64_t best = c.matrix;
  for (uint32_t i = 1; i < 4; ++i)
    if (lanes[i] > best) {
      best = lanes[i];
      c.bound = MCL_NATIVE_BOUND_MATRIX + i;
    }
}

Cost sequence(const Cost &a, const Cost &b) {
  Cost c;
  c.total = a.total + b.total;
  c.matrix = a.matrix + b.matrix;
  c.load_store = a.load_store + b.load_store;
  c.vliw = a.vliw + b.vliw;
  c.overhead = a.overhead + b.overhead;
  c.macs = a.macs + b.macs;
  c.padded_macs = a.padded_macs + b.padded_macs;
  set_bound(c);
  return c;
}

Cost stream(uint64_t elements, double bytes_per_element, double ops_per_element, uint32_t dtype,
            uint32_t pes) {
  const uint64_t units = std::max<uint64_t>(1, ceil_div(elements, kChunkElements));
  const double per_unit = (double)elements / (double)units;
  UnitCost u;
  u.load_store = per_unit * bytes_per_element / kLsuBytes;
  u.vliw = per_unit * ops_per_element / vliw_rate(dtype);
  u.overhead = (double)kUnitCycles;
  return finish(units, pes, u);
}

} // namespace manycl::native::cost
