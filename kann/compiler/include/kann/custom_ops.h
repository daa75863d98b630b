// Custom operators: ONNX nodes of a user's own domain mapped to native functions of a user's
// shared library (manycl/native/custom.h; docs/kann.md, "Custom operators").
//
// `kann compile --custom-ops LIB.so` (or kann::custom::load_library) reads the library's
// mcl_custom_operators() table into a process-wide registry; the importer turns a node whose
// (domain, op_type) is registered into an ir::Op::Custom node, and the tile compiler emits
// one MCL_NATIVE_FN_CUSTOM record per output tile naming the user function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kann/ir.h"
#include "manycl/native/custom.h"
#include "manycl/result.h"

namespace kann::custom {

struct Operator {
  std::string domain, op_type, function;
  uint32_t kind = MCL_CUSTOM_ELEMENTWISE;
  uint32_t dtypes = 0; // bit (1 << mcl_dtype) per accepted element type
  std::vector<std::string> attributes;
  std::vector<float> defaults;
  double cycles_per_element = 0;
  uint64_t (*cost)(const mcl_custom_call *call) = nullptr;
  int (*output_shape)(const mcl_custom_shape *inputs, uint32_t input_count, const float *params,
                      uint32_t param_count, mcl_custom_shape *output) = nullptr; // WHOLE
};

// Loads a library (kept loaded) and registers its operators; returns how many. A library
// that cannot be loaded, lacks mcl_custom_operators or declares an invalid operator is an
// error naming the library.
manycl::Result<size_t> load_library(const std::string &path);

// Registers a table like the one mcl_custom_operators() returns (load_library does, a host
// program or a test may directly); `source` names it in errors. Nothing is registered when
// an entry is invalid.
manycl::Result<size_t> register_operators(const mcl_custom_op *table, uint32_t count,
                                          const std::string &source);

// The address of `name` in the loaded libraries (dlsym), or nullptr: the resolver of
// manycl::interp::run_kbin (calibration, `kann simulate`) once a library is loaded.
void *resolve_function(const char *name);

// The registered operator for a node's domain and op_type, or nullptr.
const Operator *find(const std::string &domain, const std::string &op_type);

// Importer hook: makes `n` the custom operator (domain, op_type), or says why not.
manycl::Result<void> import_node(const std::string &domain, const std::string &op_type,
                                 ir::Node &n);

// The operator of an Op::Custom node (nullptr if its library is no longer registered).
const Operator *of(const ir::Node &n);

// The record of one call: input and output tiles (SPM offsets; an MCL_CUSTOM_WHOLE operator
// has one per input), the node's attributes, the modeled cycles from the operator's cost.
mcl_custom_args make_args(const Operator &op, const ir::Node &n,
                          const std::vector<mcl_tile> &inputs, const mcl_tile &output,
                          uint32_t pes_per_cluster);
inline mcl_custom_args make_args(const Operator &op, const ir::Node &n, const mcl_tile &input,
                                 const mcl_tile &output, uint32_t pes_per_cluster) {
  return make_args(op, n, std::vector<mcl_tile>{input}, output, pes_per_cluster);
}

// The node's float attributes as the function's params (the descriptor's defaults where the
// node sets none).
std::vector<float> params_of(const Operator &op, const ir::Node &n);

// The output shape of an MCL_CUSTOM_WHOLE node from its inputs' shapes (its output_shape
// callback, or the first input's shape).
manycl::Result<std::vector<int64_t>>
output_shape(const Operator &op, const ir::Node &n,
             const std::vector<std::vector<int64_t>> &input_shapes);

} // namespace kann::custom
