// Graph rewrites run between import and tiling, in this order by optimize():
//   remove_identities      Identity / Dropout / float Cast disappear
//   fold_batchnorm         BatchNormalization and per-channel constant Mul/Add folded into the
//                          preceding Conv (or Gemm), else turned into one ScaleShift node
//   fuse_activations       Relu / Clip / LeakyRelu / Sigmoid / ... fused into their producer
// Each returns the number of rewrites it made (tests check them on small graphs).
#pragma once

#include "kann/ir.h"
#include "manycl/result.h"

namespace kann::passes {

int remove_identities(ir::Graph &g);
int fold_batchnorm(ir::Graph &g);
int fuse_activations(ir::Graph &g);

// Maps an ONNX activation node to the native activation descriptor; false if not one.
bool activation_of(const ir::Graph &g, const ir::Node &n, mcl_activation &act);

manycl::Result<void> optimize(ir::Graph &g);

} // namespace kann::passes
