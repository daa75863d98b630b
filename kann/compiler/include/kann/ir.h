// kann's graph IR: a small typed dataflow graph imported from ONNX and rewritten by the
// passes in passes.h before the tile compiler lowers it to records.
//
// Tensors keep ONNX shapes (NCHW for images, batch 1). Constants carry their values (float
// data, or int64 data for shape arithmetic). Nodes keep their operator (an entry of kann/ops.h's
// table) plus the few attributes the compiler uses, and an activation fused into them by
// fuse_activations().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kann/ops.h"
#include "manycl/native/args.h"

namespace kann::ir {

enum class DType { F32, F16, S8, U8, I64 };
const char *dtype_name(DType t);
uint32_t dtype_size(DType t);

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  bool is_const = false;
  std::vector<float> data;    // float constants (weights)
  std::vector<int64_t> idata; // int64 constants (shapes, axes)
  float scale = 1.0f;         // INT8 quantization
  int32_t zero_point = 0;
  int producer = -1; // node index, -1 for inputs and constants
  // A float constant folded from DequantizeLinear keeps its integer form for INT8 kernels.
  std::vector<int32_t> qvalues;
  std::vector<float> qscales; // 1 (per tensor) or one per channel of axis 0
  std::vector<int32_t> qzeros;

  int64_t elements() const;
};

struct Node {
  std::string name;
  // The operator (kann/ops.h). A node built without one copies its input.
  Op op = Op::Identity;
  std::vector<int> inputs; // tensor indices (-1: optional input absent)
  std::vector<int> outputs;
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, float> floats;
  std::map<std::string, std::string> strings;
  mcl_activation act{MCL_ACT_NONE, 0.0f, 0.0f}; // fused activation
  bool dead = false;

  int64_t attr(const std::string &key, int64_t fallback) const;
  std::vector<int64_t> attrs(const std::string &key, std::vector<int64_t> fallback = {}) const;
  float attrf(const std::string &key, float fallback) const;
};

struct Graph {
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  std::vector<int> inputs;  // network inputs (tensor indices)
  std::vector<int> outputs; // network outputs
  // Images per inference (the inputs' static batch; 1 when symbolic): the graph is compiled
  // for one image (batch dimensions read as 1) and the program runs every image
  // (CompileOptions::batch may set the count; tiler/batch.cpp lays the images out).
  int64_t batch = 1;
  // No batch axis: the inputs' first dimensions are their own (a model whose first
  // dimensions differ, or that computes along axis 0); tensors keep every dimension and
  // images cannot be batched (--batch).
  bool whole_tensors = false;
  int64_t opset = 0; // the model's ai.onnx opset (semantics that changed between versions)

  int add_tensor(Tensor t);
  int find(const std::string &name) const; // -1 when absent
  // Nodes (alive) that read tensor t.
  std::vector<int> consumers(int t) const;
  bool is_output(int t) const;
  // Drops dead nodes and renumbers producers (tensor indices are stable).
  void compact();
  // One line per node, for tests and `kann compile --dump-ir`.
  std::string dump() const;
};

} // namespace kann::ir
