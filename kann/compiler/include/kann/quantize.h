// Post-training INT8 quantization of float models (`kann compile --precision int8
// --calibration inputs.npy`):
//   calibrate       runs the optimized float graph on the calibration samples (compiled with
//                   every intermediate tensor as an output, executed on the simulated device
//                   in-process) and records each activation's range
//   quantize_int8   chooses per-tensor asymmetric uint8 activation quantization from the
//                   ranges and per-output-channel symmetric int8 weights, and rewrites the
//                   graph into the QDQ form ONNX Runtime's quantize_static writes;
//                   passes::lower_qdq_to_int8 then turns it into INT8 kernels exactly as for
//                   a QDQ model (int32 biases are made by the tiler at x_scale * w_scale)
#pragma once

#include <string>
#include <vector>

#include "kann/compile.h"
#include "kann/ir.h"
#include "manycl/result.h"

namespace kann::quantize {

struct Range {
  float min = 0.0f, max = 0.0f;
  bool seen = false;
};

struct CalibrationOptions {
  // Range of a tensor: min/max over all samples (100), or the given percentile of its
  // values' magnitudes on each side (e.g. 99.99), which ignores rare outliers.
  double percentile = 100.0;
};

// INT8 convolutions and GEMMs clamp (ReLU / Clip) but compute no other activation: a
// LeakyReLU, Sigmoid, Tanh, HardSigmoid or HardSwish fused into a Conv / Gemm / MatMul becomes
// its own node again (then an INT8 activation on the quantized product). Run before
// calibrate() so the tensor between them is measured. Returns the number of nodes split.
int split_activations(ir::Graph &g);

// One source of calibration data: N samples of one network input stacked on the batch axis.
struct CalibrationSource {
  std::string input;         // the graph input's name; empty: the model's only input
  std::string origin;        // where the values come from (a file name), for errors
  std::vector<float> values; // N * the input's elements
};

// The samples of calibrate() from per-input sources: each input's sources in order (several
// add up), split into samples. Every input needs sources giving the same number of samples.
manycl::Result<std::vector<std::vector<std::vector<float>>>>
calibration_samples(const ir::Graph &g, const std::vector<CalibrationSource> &sources);

// samples[i] = the network inputs of sample i (one float vector per graph input, NCHW).
// Returns one Range per tensor of g (indexed like g.tensors; seen = false when the tensor is
// not a float activation).
manycl::Result<std::vector<Range>>
calibrate(const ir::Graph &g, const CompileOptions &options,
          const std::vector<std::vector<std::vector<float>>> &samples,
          const CalibrationOptions &calibration = {});

// Rewrites an optimized float graph into QDQ form and lowers it to INT8 kernels
// (passes::lower_qdq_to_int8). Returns the number of INT8 operators.
manycl::Result<int> quantize_int8(ir::Graph &g, const std::vector<Range> &ranges);

} // namespace kann::quantize
