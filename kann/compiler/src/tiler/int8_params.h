// INT8 weight flags shared by the planner (parameter sizes), the packers and the calls: the
// native parameter block's size and contents depend on them, so all three must agree.
#pragma once

#include "tiler/tiler.h"

namespace kann::tiler {

// MCL_CONV_WEIGHT_ZERO_POINTS when an INT8 Conv / Gemm has weights with a nonzero zero point
// (QLinearConv's uint8 weights, asymmetric QDQ weights): the block then keeps the zero
// points, since w - w_zero_point may not fit in the stored byte. 0 otherwise.
uint16_t int8_weight_flags(const Graph &g, const Node &n);

} // namespace kann::tiler
