#pragma once
#include <llvm/ExecutionEngine/JITEventListener.h>

namespace manycl::compiler::detail {

/// With MANYCL_PERF_MAP=1, a JIT event listener that appends every function of each object the
/// JIT loads to /tmp/perf-<pid>.map, the file `perf report` reads to name JIT code (profiles
/// of OpenCL C kernels otherwise show raw addresses). nullptr when the variable is not set.
llvm::JITEventListener *perfMapListener();

} // namespace manycl::compiler::detail
