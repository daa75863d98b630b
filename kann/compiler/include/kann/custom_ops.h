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

// The record of one call: input and output tiles (SPM offsets), the node's attributes, the
// modeled cycles from the operator's cost.
mcl_custom_args make_args(const Operator &op, const ir::Node &n, const mcl_tile &input,
                          const mcl_tile &output, uint32_t pes_per_cluster);

} // namespace kann::custom
