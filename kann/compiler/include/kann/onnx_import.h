// ONNX import: a ModelProto (file or bytes) -> kann::ir::Graph with every shape known.
// Opset 11 onward, static shapes (a symbolic first dimension is the batch, read as 1);
// initializers become constants. Unsupported operators and dynamic shapes are a one-line
// error naming the node and the reason.
#pragma once

#include <string>

#include "kann/ir.h"
#include "manycl/result.h"

namespace kann {

manycl::Result<ir::Graph> import_onnx_file(const std::string &path);
manycl::Result<ir::Graph> import_onnx_bytes(const std::string &bytes);

// Shape inference with constant folding of shape arithmetic (Shape, Gather, Unsqueeze,
// Squeeze, Concat, Cast, Reshape / arithmetic on constants): run by the importer, and
// again by passes that create nodes.
manycl::Result<void> infer_shapes(ir::Graph &graph);

} // namespace kann
