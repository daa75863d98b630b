// Graph rewrites run between import and tiling, in this order by optimize():
//   remove_identities      Identity / Dropout / float Cast disappear
//   fold_batchnorm         BatchNormalization and per-channel constant Mul/Add folded into the
//                          preceding Conv (or Gemm), else turned into one ScaleShift node
//   fuse_gated_activations x * HardSigmoid(x) (HardSwish's constants) as one HardSwish,
//                          x * Sigmoid(x) as one Silu
//   fuse_activations       Relu / Clip / LeakyRelu / Sigmoid / ... fused into their producer
// Each returns the number of rewrites it made (tests check them on small graphs).
#pragma once

#include <set>
#include <string>

#include "kann/ir.h"
#include "manycl/result.h"

namespace kann::passes {

int remove_identities(ir::Graph &g);
int fold_batchnorm(ir::Graph &g);
// Zero padding (Pad) folded into the consuming Conv / AveragePool, or removed when empty.
int fold_pads(ir::Graph &g);
// Softmax over another axis than the last of a tensor or the channels of an image: a
// Transpose moving the axis there (an image's height or width to its channels, any other
// axis last), the Softmax, a Transpose back (strided whole-tensor copies).
int softmax_axes_to_last(ir::Graph &g);
// Reshape-Transpose-Reshape channel shuffles fused into ChannelShuffle nodes.
int fuse_channel_shuffles(ir::Graph &g);
// x * HardSigmoid(x) with HardSwish's constants (alpha 1/6, beta 1/2: PyTorch's hardswish
// before opset 14) becomes one HardSwish node, x * Sigmoid(x) one Silu node (kann's own:
// PyTorch's SiLU / Swish), which fuse_activations then fuses into their producer (FP16: the
// gate is no longer rounded to binary16 on its own; one operator fewer).
int fuse_gated_activations(ir::Graph &g);
int fuse_activations(ir::Graph &g);
// A float Conv (no activation of its own) whose output only an Add reads, with another
// non-constant operand of the same shape and type (no broadcast), becomes one Conv with a
// residual input (inputs [X, W, B or -1, residual]) and the Add's activation: the native
// epilogue adds the residual before the activation (MCL_CONV_RESIDUAL). INT8 is left
// unfused (the Add requantizes the convolution's INT8 output, docs/kann.md). Run by
// compile_graph() after the precision conversion (not by optimize(): the reference
// evaluators, calibration and mixed precision see the unfused graph).
int fuse_residual_adds(ir::Graph &g);

// Maps an ONNX activation node to the native activation descriptor; false if not one.
bool activation_of(const ir::Graph &g, const ir::Node &n, mcl_activation &act);

manycl::Result<void> optimize(ir::Graph &g);

// QDQ models: a Conv / Gemm (transB) / pooling whose input is DequantizeLinear(q) and whose
// only reader is QuantizeLinear reads q and writes the quantized tensor directly: an INT8
// kernel (INT32 accumulation, requantization with the folded weights' integer values and
// scales). Global pooling likewise; an Add of two dequantized tensors and a channel Concat of
// dequantized tensors become requantizing INT8 operators (each input with its own scale and
// zero point); a Flatten / Reshape between DequantizeLinear and QuantizeLinear of the same
// quantization views the INT8 tensor. Marks those nodes with ints["int8"]. Run by optimize().
int lower_qdq_to_int8(ir::Graph &g);

// --precision fp16: every activation becomes F16 (weights are packed as binary16 by the
// tiler), network inputs and outputs stay F32 in DDR; "Convert" nodes are inserted after
// each input and before each output. The operators named in fp32_nodes compute in float32
// (float32 weights and outputs; mixed precision, kann/mixed_precision.h): a tensor crossing
// between the two kinds is converted once, before its first reader of the other type; views
// keep their source's type. Returns the number of Convert nodes.
int convert_to_fp16(ir::Graph &g, const std::set<std::string> &fp32_nodes = {});

// IEEE binary16 from float, round to nearest even (compile-time weight conversion).
uint16_t float_to_half(float value);

} // namespace kann::passes
