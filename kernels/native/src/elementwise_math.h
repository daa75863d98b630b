// Element-wise math functions (MCL_NATIVE_FN_MATH): ONNX's unary operators that are no
// fusible activation (Abs, Exp, Sin, Softplus, Elu, ...), and reductions
// (MCL_NATIVE_FN_REDUCE: ONNX's Reduce* over any axes), on float tensors.
#pragma once

#include "cost_model.h"
#include "internal.h"

namespace manycl::native {

// The function of one element (what run_math applies; also used by tests).
float math_function(const mcl_math_args &a, float x);
Status run_math(const mcl_native_exec &exec, const mcl_math_args &a);
// Reductions (MCL_NATIVE_FN_REDUCE) over a tile's rows and pixels.
Status run_reduce(const mcl_native_exec &exec, const mcl_reduce_args &a);

namespace cost {
Cost math_cost(const mcl_math_args &a, uint32_t pes);
Cost reduce_cost(const mcl_reduce_args &a, uint32_t pes);
} // namespace cost

} // namespace manycl::native
