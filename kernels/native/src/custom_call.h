// Custom-operator records (MCL_NATIVE_FN_CUSTOM, manycl/native/custom.h): a user function
// found by name through the exec context's resolver.
#pragma once

#include "cost_model.h"
#include "internal.h"
#include "manycl/native/custom.h"

namespace manycl::native {

// The modeled cost the compiler stored in the record, plus the call overhead.
cost::Cost custom_cost(const mcl_custom_args &a);
Status run_custom(const mcl_native_exec &exec, const mcl_custom_args &a);

} // namespace manycl::native
