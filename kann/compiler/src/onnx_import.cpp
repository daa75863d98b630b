#include "kann/onnx_import.h"
#include "kann/custom_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>

namespace kann {

using ir::DType;
using ir::Graph;
using ir::Node;
using ir::Op;
using ir::ShapeRule;
using ir::Tensor;
using manycl::make_error;
using manycl::Result;

namespace {

std::string where(const Node &n) {
  return "node '" + n.name + "' (" + ir::op_name(n.op) + ")";
}

Result<Tensor> convert_initializer(const onnx::TensorProto &t) {
  Tensor out;
  out.name = t.name();
  out.is_const = true;
  for (int64_t d : t.dims())
    out.shape.push_back(d);
  int64_t n = 1;
  for (int64_t d : out.shape) {
    if (d < 0 || d > (1ll << 31))
      return make_error("initializer '" + t.name() + "': bad dimension");
    n *= d;
    if (n > (1ll << 31))
      return make_error("initializer '" + t.name() + "': too large");
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return make_error("initializer '" + t.name() + "': external data is not supported");
  const std::string &raw = t.raw_data();
  auto take = [&](auto &vec, auto elem, auto field_size, auto field) -> Result<void> {
    using E = decltype(elem);
    if (!raw.empty()) {
      if (raw.size() != size_t(n) * sizeof(E))
        return make_error("initializer '" + t.name() + "': raw data size mismatch");
      for (int64_t i = 0; i < n; ++i) {
        E v;
        std::memcpy(&v, raw.data() + i * sizeof(E), sizeof(E));
        vec.push_back(static_cast<std::remove_reference_t<decltype(vec[0])>>(v));
      }
    } else {
      if (field_size != n)
        return make_error("initializer '" + t.name() + "': data size mismatch");
      for (int64_t i = 0; i < n; ++i)
        vec.push_back(static_cast<std::remove_reference_t<decltype(vec[0])>>(field(i)));
    }
    return {};
  };
  Result<void> r;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    out.dtype = DType::F32;
    r = take(out.data, float{}, t.float_data_size(), [&](int i) { return t.float_data(i); });
    break;
  case onnx::TensorProto::INT64:
    out.dtype = DType::I64;
    r = take(out.idata, int64_t{}, t.int64_data_size(), [&](int i) { return t.int64_data(i); });
    break;
  case onnx::TensorProto::INT32:
    out.dtype = DType::I64;
    r = take(out.idata, int32_t{}, t.int32_data_size(), [&](int i) { return t.int32_data(i); });
    break;
  case onnx::TensorProto::INT8:
    out.dtype = DType::S8;
    r = take(out.data, int8_t{}, t.int32_data_size(), [&](int i) { return t.int32_data(i); });
    break;
  case onnx::TensorProto::UINT8:
    out.dtype = DType::U8;
    r = take(out.data, uint8_t{}, t.int32_data_size(), [&](int i) { return t.int32_data(i); });
    break;
  default:
    return make_error("initializer '" + t.name() + "': element type " +
                      std::to_string(t.data_type()) + " is not supported");
  }
  if (!r)
    return r.error();
  return out;
}

// QLinearConv / QLinearMatMul (ONNX opset 10+) become the QDQ form ONNX Runtime's quantizer
// writes: DequantizeLinear(x) -> Conv / Gemm(transB) with weights and bias folded from
// DequantizeLinear of their integer constants -> QuantizeLinear. lower_qdq_to_int8 then
// makes them the same INT8 kernels as quantize_static models (INT32 accumulation, one FP32
// requantization), so both spellings of a quantized network take one path.
// ONNX Runtime's contrib operators of QOperator exports (domain com.microsoft), imported as
// DequantizeLinear -> the float operator -> QuantizeLinear.
bool ms_qlinear_op(Op op) {
  return op == Op::QLinearAdd || op == Op::QLinearMul || op == Op::QLinearConcat ||
         op == Op::QLinearSigmoid || op == Op::QLinearLeakyRelu ||
         op == Op::QLinearGlobalAveragePool || op == Op::QLinearAveragePool;
}

class QLinearExpander {
public:
  QLinearExpander(Graph &graph, const Node &node) : g_(graph), n_(node) {}

  Result<void> expand(const std::string &output) {
    const bool conv = n_.op == Op::QLinearConv;
    if (n_.inputs.size() < 8 || n_.inputs.size() > (conv ? 9u : 8u))
      return make_error(where(n_) + (conv ? ": needs 8 or 9 inputs" : ": needs 8 inputs") +
                        " (x, w and y with their scales and zero points" +
                        (conv ? ", bias)" : ")"));
    for (size_t i = 0; i < n_.inputs.size(); ++i) {
      if (i == 0)
        continue;
      const int t = n_.inputs[i];
      if (t < 0 && i != 8)
        return make_error(where(n_) + ": input " + std::to_string(i) + " is required");
      if (t >= 0 && !g_.tensors[t].is_const)
        return make_error(where(n_) + ": input '" + g_.tensors[t].name +
                          "' must be a constant (initializer)");
    }
    if (n_.inputs[0] < 0)
      return make_error(where(n_) + ": missing input");
    const Tensor &w = g_.tensors[n_.inputs[3]];
    const Tensor &w_scale = g_.tensors[n_.inputs[4]];
    const Tensor &w_zero = g_.tensors[n_.inputs[5]];
    if (w.dtype != DType::S8 && w.dtype != DType::U8)
      return make_error(where(n_) + ": weights must be int8 or uint8");
    if (w_scale.dtype != DType::F32 || w_scale.elements() < 1 ||
        (w_zero.dtype != DType::S8 && w_zero.dtype != DType::U8))
      return make_error(where(n_) + ": weight scale must be float, zero point int8 or uint8");
    if (conv ? w.shape.size() != 4 : w.shape.size() != 2)
      return make_error(where(n_) + (conv ? ": weights must be [M, C/group, kH, kW]"
                                          : ": the second operand must be a [K, N] matrix"));
    const int64_t channels = conv ? w.shape[0] : w.shape[1];
    const int64_t scales = w_scale.elements();
    if ((scales != 1 && scales != channels) ||
        (w_zero.elements() != 1 && w_zero.elements() != scales))
      return make_error(where(n_) + ": weight scales must be per tensor or per output channel");

    // Weights: [M,...] for Conv, B^T [N,K] for the Gemm; uint8 weights are shifted by -128
    // (values and zero point) so the packers' int8 range holds them, w - w_zp unchanged.
    const bool shift = w.dtype == DType::U8;
    Tensor wq;
    wq.name = n_.name + ".weights";
    wq.is_const = true;
    wq.dtype = DType::S8;
    if (conv) {
      wq.shape = w.shape;
      wq.data = w.data;
    } else {
      const int64_t k = w.shape[0], n = w.shape[1];
      wq.shape = {n, k};
      wq.data.resize(w.data.size());
      for (int64_t r = 0; r < k; ++r)
        for (int64_t c = 0; c < n; ++c)
          wq.data[size_t(c * k + r)] = w.data[size_t(r * n + c)];
    }
    Tensor zq;
    zq.name = n_.name + ".weight_zero_point";
    zq.is_const = true;
    zq.dtype = DType::S8;
    zq.shape = {scales};
    for (int64_t c = 0; c < scales; ++c)
      zq.data.push_back(w_zero.data[w_zero.elements() == 1 ? 0 : size_t(c)]);
    if (shift) {
      for (float &v : wq.data)
        v -= 128.0f;
      for (float &v : zq.data)
        v -= 128.0f;
    }
    Tensor sq;
    sq.name = n_.name + ".weight_scale";
    sq.is_const = true;
    sq.shape = {scales};
    sq.data = w_scale.data;
    const std::vector<float> weight_scales = w_scale.data; // tensors may move below
    const int wq_t = g_.add_tensor(std::move(wq));
    const int zq_t = g_.add_tensor(std::move(zq));
    const int sq_t = g_.add_tensor(std::move(sq));

    Node dq_w = part(Op::DequantizeLinear, "weights_float", {wq_t, sq_t, zq_t});
    if (scales > 1)
      dq_w.ints["axis"] = {0};
    const int w_float = emit(std::move(dq_w), n_.name + ".weights_float");

    int b_float = -1;
    if (conv && n_.inputs.size() > 8 && n_.inputs[8] >= 0) {
      // Bias: int32 in units of x_scale * w_scale[c] (zero point 0).
      const Tensor &x_scale = g_.tensors[n_.inputs[1]]; // no tensor added while in use
      if (x_scale.dtype != DType::F32 || x_scale.elements() != 1)
        return make_error(where(n_) + ": x_scale must be a float scalar");
      if (g_.tensors[n_.inputs[8]].dtype != DType::I64 ||
          g_.tensors[n_.inputs[8]].elements() != channels)
        return make_error(where(n_) + ": bias must be int32, one value per output channel");
      Tensor bs;
      bs.name = n_.name + ".bias_scale";
      bs.is_const = true;
      bs.shape = {scales};
      for (int64_t c = 0; c < scales; ++c)
        bs.data.push_back(x_scale.data[0] * weight_scales[size_t(c)]);
      const int bs_t = g_.add_tensor(std::move(bs));
      Node dq_b = part(Op::DequantizeLinear, "bias_float", {n_.inputs[8], bs_t});
      if (scales > 1)
        dq_b.ints["axis"] = {0};
      b_float = emit(std::move(dq_b), n_.name + ".bias_float");
    }

    const int x_float =
        emit(part(Op::DequantizeLinear, "input_float", {n_.inputs[0], n_.inputs[1], n_.inputs[2]}),
             n_.name + ".input_float");
    Node op = part(conv ? Op::Conv : Op::Gemm, "", {x_float, w_float});
    op.name = n_.name;
    if (conv) {
      op.ints = n_.ints;
      op.strings = n_.strings;
      if (b_float >= 0)
        op.inputs.push_back(b_float);
    } else {
      op.ints["transB"] = {1};
    }
    const int y_float = emit(std::move(op), n_.name + ".output_float");
    emit(part(Op::QuantizeLinear, "output", {y_float, n_.inputs[6], n_.inputs[7]}), output);
    return {};
  }

  // com.microsoft QLinearAdd (A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale,
  // C_zero_point): DequantizeLinear of both operands, Add, QuantizeLinear; the INT8 add of
  // lower_qdq_to_int8 (per-operand scale and zero point, requantized output).
  Result<void> expand_add(const std::string &output, Op op = Op::Add) {
    if (n_.inputs.size() < 7 || n_.inputs.size() > 8 || n_.inputs[0] < 0 || n_.inputs[3] < 0)
      return make_error(where(n_) + ": needs A, B and the scales (7 or 8 inputs)");
    auto a = dequantized(n_.inputs[0], n_.inputs[1], n_.inputs[2], "a_float");
    if (!a)
      return a.error();
    auto b = dequantized(n_.inputs[3], n_.inputs[4], n_.inputs[5], "b_float");
    if (!b)
      return b.error();
    Node add = part(op, "", {a.value(), b.value()});
    add.name = n_.name;
    const int sum = emit(std::move(add), n_.name + ".output_float");
    return quantized(sum, n_.inputs[6], n_.inputs.size() > 7 ? n_.inputs[7] : -1, output);
  }

  // com.microsoft QLinearConcat (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per
  // operand; attribute axis): DequantizeLinear of each, Concat, QuantizeLinear; lowered to
  // requantizing copies, or none where an operand has the output's quantization.
  Result<void> expand_concat(const std::string &output) {
    if (n_.inputs.size() < 5 || (n_.inputs.size() - 2) % 3 != 0)
      return make_error(where(n_) + ": needs Y_scale, Y_zero_point and (X, X_scale, "
                                    "X_zero_point) per operand");
    if (!n_.ints.count("axis"))
      return make_error(where(n_) + ": the axis attribute is required");
    std::vector<int> parts;
    for (size_t i = 2; i < n_.inputs.size(); i += 3) {
      if (n_.inputs[i] < 0)
        return make_error(where(n_) + ": operand " + std::to_string((i - 2) / 3) + " is missing");
      auto x = dequantized(n_.inputs[i], n_.inputs[i + 1], n_.inputs[i + 2],
                           "input" + std::to_string((i - 2) / 3) + "_float");
      if (!x)
        return x.error();
      parts.push_back(x.value());
    }
    Node concat = part(Op::Concat, "", parts);
    concat.name = n_.name;
    concat.ints["axis"] = n_.ints.at("axis");
    const int joined = emit(std::move(concat), n_.name + ".output_float");
    return quantized(joined, n_.inputs[0], n_.inputs[1], output);
  }

  // com.microsoft QLinearSigmoid / QLinearLeakyRelu (alpha) / QLinearGlobalAveragePool /
  // QLinearAveragePool (the pooling attributes) with X, X_scale, X_zero_point, Y_scale,
  // Y_zero_point: DequantizeLinear, the float operator with the node's attributes,
  // QuantizeLinear (INT8 activation / pooling kernels where lower_qdq_to_int8 has them).
  Result<void> expand_unary(const std::string &output, Op op) {
    if (n_.inputs.size() < 4 || n_.inputs.size() > 5 || n_.inputs[0] < 0)
      return make_error(where(n_) + ": needs X, X_scale, X_zero_point, Y_scale (and "
                                    "Y_zero_point)");
    if (n_.attr("channels_last", 0) != 0)
      return make_error(where(n_) + ": channels_last = 1 is not supported");
    auto x = dequantized(n_.inputs[0], n_.inputs[1], n_.inputs[2], "input_float");
    if (!x)
      return x.error();
    Node f = part(op, "", {x.value()});
    f.name = n_.name;
    f.ints = n_.ints;
    f.ints.erase("channels_last");
    f.floats = n_.floats;
    f.strings = n_.strings;
    const int y = emit(std::move(f), n_.name + ".output_float");
    return quantized(y, n_.inputs[3], n_.inputs.size() > 4 ? n_.inputs[4] : -1, output);
  }

private:
  // A zero point: the given constant, or 0 of the operands' quantized type (that of the
  // first zero point given; uint8, ONNX's default, when there is none).
  Result<int> zero_point(int zp, const std::string &what) {
    if (zp >= 0) {
      const Tensor &z = g_.tensors[zp];
      if (!z.is_const || (z.dtype != DType::S8 && z.dtype != DType::U8))
        return make_error(where(n_) + ": zero point '" + z.name +
                          "' must be an int8 or uint8 constant");
      return zp;
    }
    DType type = DType::U8;
    for (int i : n_.inputs)
      if (i >= 0 && g_.tensors[i].is_const &&
          (g_.tensors[i].dtype == DType::S8 || g_.tensors[i].dtype == DType::U8) &&
          g_.tensors[i].elements() == 1) {
        type = g_.tensors[i].dtype;
        break;
      }
    Tensor z;
    z.name = n_.name + "." + what + "_zero_point";
    z.is_const = true;
    z.dtype = type;
    z.data = {0.0f};
    return g_.add_tensor(std::move(z));
  }
  Result<int> dequantized(int x, int scale, int zp, const std::string &name) {
    if (scale < 0)
      return make_error(where(n_) + ": a scale is missing");
    auto z = zero_point(zp, name);
    if (!z)
      return z.error();
    return emit(part(Op::DequantizeLinear, name, {x, scale, z.value()}), n_.name + "." + name);
  }
  Result<void> quantized(int x, int scale, int zp, const std::string &output) {
    if (scale < 0)
      return make_error(where(n_) + ": the output scale is missing");
    auto z = zero_point(zp, "output");
    if (!z)
      return z.error();
    emit(part(Op::QuantizeLinear, "output", {x, scale, z.value()}), output);
    return {};
  }

  Node part(Op op, const std::string &suffix, std::vector<int> inputs) const {
    Node p;
    p.op = op;
    p.name = n_.name + (suffix.empty() ? "" : "." + suffix);
    p.inputs = std::move(inputs);
    return p;
  }
  int emit(Node node, const std::string &output) {
    Tensor t;
    t.name = output;
    t.producer = static_cast<int>(g_.nodes.size());
    node.outputs.push_back(g_.add_tensor(std::move(t)));
    const int out = node.outputs.back();
    g_.nodes.push_back(std::move(node));
    return out;
  }

  Graph &g_;
  const Node &n_;
};

// The first opset whose definition of `op` kann implements: older versions had other
// attributes or semantics (legacy broadcasting before 7, Clip's attribute bounds before 11,
// Resize's opset-10 coordinates, Slice's attributes before 10, Cast's string type before 6).
int64_t first_opset(Op op) {
  switch (op) {
  case Op::Conv:
  case Op::ConvTranspose:
  case Op::MaxPool:
  case Op::GlobalAveragePool:
  case Op::GlobalMaxPool:
  case Op::MatMul:
  case Op::Flatten:
  case Op::Squeeze:
  case Op::Unsqueeze:
  case Op::Identity:
  case Op::Transpose:
  case Op::Shape:
  case Op::Gather:
  case Op::Constant:
  case Op::ReduceMean:
  case Op::ReduceMax:
  case Op::ReduceMin:
  case Op::ReduceSum:
  case Op::ReduceProd:
  case Op::ReduceL1:
  case Op::ReduceL2:
  case Op::ReduceSumSquare:
  case Op::ReduceLogSum:
  case Op::ReduceLogSumExp:
  case Op::Softmax: // the coerced-2-D definition before 13 is handled (infer_node)
  case Op::LogSoftmax:
  case Op::DepthToSpace: // mode (CRD) from 11: DCR, the default, before
  case Op::SpaceToDepth:
  case Op::Tile:   // repeats as an input from 6
  case Op::Expand: // from 8
  case Op::Softplus:
  case Op::Softsign:
  case Op::Dropout: // an identity in inference, whatever the version's attributes
    return 1;
  case Op::Pad: // pads as an attribute (opset 2) or an input (11)
    return 2;
  case Op::Concat:
    return 4;
  case Op::Reshape:
    return 5;
  case Op::Relu: // opset 1 had consumed_inputs
  case Op::Sigmoid:
  case Op::Tanh:
  case Op::LeakyRelu:
  case Op::PRelu: // a one-value slope: the same in every version from 6
  case Op::HardSigmoid:
  case Op::Elu:
  case Op::Selu:
  case Op::Abs:
  case Op::Neg:
  case Op::Exp:
  case Op::Log:
  case Op::Sqrt:
  case Op::Reciprocal:
  case Op::Floor:
  case Op::Ceil:
  case Op::Cast:
    return 6;
  case Op::Sum: // NumPy broadcasting from 8
  case Op::Max:
  case Op::Min:
  case Op::Mean:
    return 8;
  case Op::Add: // NumPy broadcasting from 7
  case Op::Sub:
  case Op::Mul:
  case Op::Div:
  case Op::Gemm:
  case Op::AveragePool:
  case Op::BatchNormalization:
  case Op::Sin:
  case Op::Cos:
  case Op::Tan:
  case Op::Asin:
  case Op::Acos:
  case Op::Atan:
    return 7;
  case Op::Sinh:
  case Op::Cosh:
  case Op::Asinh:
  case Op::Acosh:
  case Op::Atanh:
  case Op::Erf:
  case Op::Sign:
  case Op::Shrink:
    return 9;
  case Op::ThresholdedRelu: // experimental before 10
  case Op::QuantizeLinear:
  case Op::DequantizeLinear:
  case Op::QLinearConv:
  case Op::QLinearMatMul:
  case Op::QLinearAdd: // com.microsoft, next to ai.onnx 10 and later
  case Op::QLinearConcat:
  case Op::QLinearMul:
  case Op::QLinearSigmoid:
  case Op::QLinearLeakyRelu:
  case Op::QLinearGlobalAveragePool:
  case Op::QLinearAveragePool:
  case Op::Slice:
    return 10;
  case Op::Celu:
    return 12;
  case Op::HardSwish:
    return 14;
  default: // Clip, Resize, Round and the rest: as first checked
    return 11;
  }
}

// `split_batch`: a first input dimension other than 1 is a batch of images (compiled for one
// image, ir::Graph::batch); otherwise every dimension is the tensor's own (whole tensors).
// Appends `part` to the graph with one new output tensor named `out` (a node an importer
// rule adds in place of an ONNX one); returns the tensor.
int append_node(Graph &graph, Node part, const std::string &out) {
  Tensor t;
  t.name = out;
  t.producer = static_cast<int>(graph.nodes.size());
  part.outputs = {graph.add_tensor(std::move(t))};
  graph.nodes.push_back(std::move(part));
  return graph.nodes.back().outputs[0];
}

Result<Graph> convert(const onnx::ModelProto &model, bool split_batch) {
  int64_t opset = 0;
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset == 0 && model.opset_import_size() == 0)
    return make_error("model has no opset import");
  if (opset < 1)
    return make_error("model uses opset " + std::to_string(opset) +
                      "; kann needs opset 1 or later (per operator: docs/kann.md)");
  const onnx::GraphProto &g = model.graph();
  Graph graph;
  graph.whole_tensors = !split_batch;
  graph.opset = opset;
  for (const auto &init : g.initializer()) {
    auto t = convert_initializer(init);
    if (!t)
      return t.error();
    graph.add_tensor(std::move(t.value()));
  }
  for (const auto &in : g.input()) {
    if (graph.find(in.name()) >= 0)
      continue; // an initializer listed as input (old exporters)
    Tensor t;
    t.name = in.name();
    if (!in.type().has_tensor_type())
      return make_error("input '" + in.name() + "': not a tensor");
    const auto &tt = in.type().tensor_type();
    if (tt.elem_type() != onnx::TensorProto::FLOAT)
      return make_error("input '" + in.name() + "': element type " +
                        std::to_string(tt.elem_type()) + " (only float inputs are supported)");
    if (!tt.has_shape())
      return make_error("input '" + in.name() + "': no shape (dynamic shapes are not supported)");
    for (const auto &d : tt.shape().dim()) {
      // A symbolic (or unknown) first dimension is the batch: compiled for one image, the
      // number of images is chosen at compile time (CompileOptions::batch, --batch N).
      if (t.shape.empty() && !d.has_dim_value()) {
        t.shape.push_back(1);
        continue;
      }
      if (!d.has_dim_value() || d.dim_value() <= 0)
        return make_error("input '" + in.name() + "': dynamic dimension '" + d.dim_param() +
                          "' (export with static shapes)");
      t.shape.push_back(d.dim_value());
    }
    if (t.shape.empty())
      return make_error("input '" + in.name() + "': a scalar input (expected a batch axis)");
    if (t.shape[0] != 1 && split_batch) { // a batch: one image compiled, run for each
      if (graph.batch != 1 && graph.batch != t.shape[0])
        return make_error("input '" + in.name() + "': batch " + std::to_string(t.shape[0]) +
                          " differs from another input's " + std::to_string(graph.batch));
      graph.batch = t.shape[0];
      t.shape[0] = 1;
    }
    graph.inputs.push_back(graph.add_tensor(std::move(t)));
  }
  int unnamed = 0;
  for (const auto &np : g.node()) {
    Node n;
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(unnamed++) : np.name();
    // Until the operator is known (kann/ops.h), errors name it as the model does.
    const std::string as_in_model = "node '" + n.name + "' (" + np.op_type() + ")";
    std::optional<Op> op;
    const auto known = ir::op_from_onnx(np.op_type());
    if (np.domain() == "com.microsoft" && known && ms_qlinear_op(*known)) {
      op = known; // ONNX Runtime's contrib operators of quantized exports
    } else if (!np.domain().empty() && np.domain() != "ai.onnx") {
      if (auto custom = kann::custom::import_node(np.domain(), np.op_type(), n); !custom)
        return make_error(as_in_model + ": " + custom.error().message);
      op = n.op; // a user's native function (custom_ops.h)
    } else {
      op = ir::op_from_onnx(np.op_type());
      if (op && ms_qlinear_op(*op))
        op.reset(); // only in the com.microsoft domain
    }
    if (!op)
      return make_error(as_in_model + ": unsupported operator");
    n.op = *op;
    if (const int64_t since = first_opset(n.op); opset < since)
      return make_error(as_in_model + ": opset " + std::to_string(opset) +
                        " predates the definition kann implements (opset " + std::to_string(since) +
                        " and later)");
    for (const auto &a : np.attribute()) {
      switch (a.type()) {
      case onnx::AttributeProto::INT:
        n.ints[a.name()] = {a.i()};
        break;
      case onnx::AttributeProto::INTS:
        n.ints[a.name()] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::FLOAT:
        n.floats[a.name()] = a.f();
        break;
      case onnx::AttributeProto::STRING:
        n.strings[a.name()] = a.s();
        break;
      case onnx::AttributeProto::TENSOR:
        if (n.op == Op::Constant && a.name() == "value") {
          auto t = convert_initializer(a.t());
          if (!t)
            return make_error(where(n) + ": " + t.error().message);
          t.value().name = np.output_size() ? np.output(0) : n.name;
          graph.add_tensor(std::move(t.value()));
          break;
        }
        [[fallthrough]];
      default:
        return make_error(where(n) + ": attribute '" + a.name() + "' of an unsupported kind");
      }
    }
    if (n.op == Op::Constant) {
      if (np.output_size() != 1 || graph.find(np.output(0)) < 0)
        return make_error(where(n) + ": only tensor-valued constants are supported");
      continue;
    }
    for (const auto &name : np.input()) {
      if (name.empty()) {
        n.inputs.push_back(-1);
        continue;
      }
      int t = graph.find(name);
      if (t < 0)
        return make_error(where(n) + ": input '" + name + "' is not defined before use");
      n.inputs.push_back(t);
    }
    // Gemm with transA or a matrix C ([M,N] / [M,1]): A's rows are not the images of a batch,
    // so the model compiles as whole tensors, where the product is a 1x1 convolution over
    // A^T viewed as an image of M rows (channels K): A^T (a Transpose unless transA) ->
    // Reshape [1,K,M,1] -> Conv (weights alpha * B^T, bias beta * C when C is per column) ->
    // Reshape [N,M] -> Transpose [M,N], then + beta * C when C varies along the rows (a
    // constant operand, tiler/plan.cpp).
    if (n.op == Op::Gemm && n.inputs.size() >= 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0 &&
        graph.tensors[n.inputs[1]].is_const && graph.tensors[n.inputs[1]].shape.size() == 2 &&
        graph.tensors[n.inputs[1]].dtype == DType::F32) {
      const bool trans_a = n.attr("transA", 0) != 0;
      const int c_in = n.inputs.size() > 2 ? n.inputs[2] : -1;
      const bool matrix_c = c_in >= 0 && graph.tensors[c_in].is_const &&
                            graph.tensors[c_in].shape.size() == 2 &&
                            graph.tensors[c_in].shape[0] != 1;
      if (trans_a || matrix_c) {
        if (!graph.whole_tensors)
          return make_error(where(n) + ": transA or a matrix C: A's rows are not a batch of "
                                       "images");
        if (np.output_size() != 1 || graph.find(np.output(0)) >= 0)
          return make_error(where(n) + ": needs one output, defined once");
        if (c_in >= 0 && (!graph.tensors[c_in].is_const || graph.tensors[c_in].dtype != DType::F32))
          return make_error(where(n) + ": C must be a float constant");
        const Tensor &b = graph.tensors[n.inputs[1]];
        const bool trans_b = n.attr("transB", 0) != 0;
        const int64_t k = trans_b ? b.shape[1] : b.shape[0],
                      cols = trans_b ? b.shape[0] : b.shape[1];
        const float alpha = n.attrf("alpha", 1.0f), beta = n.attrf("beta", 1.0f);
        auto constant = [&](const std::string &name, std::vector<int64_t> shape,
                            std::vector<float> data, std::vector<int64_t> idata = {}) {
          Tensor t;
          t.name = n.name + "." + name;
          t.shape = std::move(shape);
          t.is_const = true;
          t.data = std::move(data);
          if (!idata.empty())
            t.dtype = DType::I64, t.idata = std::move(idata);
          return graph.add_tensor(std::move(t));
        };
        auto emit = [&](Op op, const std::string &suffix, std::vector<int> inputs,
                        const std::string &out) {
          Node part;
          part.op = op;
          part.name = n.name + (suffix.empty() ? "" : "." + suffix);
          part.inputs = std::move(inputs);
          if (op == Op::Transpose)
            part.ints["perm"] = {1, 0};
          if (op == Op::Conv) {
            part.ints["kernel_shape"] = {1, 1};
            part.ints["strides"] = {1, 1};
            part.ints["dilations"] = {1, 1};
            part.ints["pads"] = {0, 0, 0, 0};
            part.ints["group"] = {1};
          }
          return append_node(graph, std::move(part), out);
        };
        std::vector<float> w(size_t(cols * k));
        for (int64_t o = 0; o < cols; ++o)
          for (int64_t i = 0; i < k; ++i)
            w[size_t(o * k + i)] = alpha * b.data[size_t(trans_b ? o * k + i : i * cols + o)];
        std::vector<int> conv_inputs;
        int at = n.inputs[0];
        if (!trans_a)
          at = emit(Op::Transpose, "a_t", {at}, n.name + ".a_t");
        const int image =
            emit(Op::Reshape, "as_image", {at, constant("image_shape", {4}, {}, {1, k, -1, 1})},
                 n.name + ".as_image");
        conv_inputs = {image, constant("weights", {cols, k, 1, 1}, std::move(w))};
        if (c_in >= 0 && !matrix_c) { // per column (or one value): the convolution's bias
          const Tensor &c = graph.tensors[c_in];
          if (c.data.size() != 1 && int64_t(c.data.size()) != cols)
            return make_error(where(n) + ": C does not broadcast to [M,N]");
          std::vector<float> bias(static_cast<size_t>(cols));
          for (int64_t o = 0; o < cols; ++o)
            bias[size_t(o)] = beta * c.data[c.data.size() == 1 ? 0 : size_t(o)];
          conv_inputs.push_back(constant("bias", {cols}, std::move(bias)));
        }
        const int product = emit(Op::Conv, "", std::move(conv_inputs), n.name + ".product");
        const int rows =
            emit(Op::Reshape, "as_rows", {product, constant("rows_shape", {2}, {}, {cols, -1})},
                 n.name + ".as_rows");
        if (!matrix_c) {
          emit(Op::Transpose, "y_t", {rows}, np.output(0));
          continue;
        }
        const int y = emit(Op::Transpose, "y_t", {rows}, n.name + ".y_t");
        Tensor c = graph.tensors[c_in];
        c.name = n.name + ".beta_c";
        for (float &v : c.data)
          v *= beta;
        emit(Op::Add, "c", {y, graph.add_tensor(std::move(c))}, np.output(0));
        continue;
      }
    }
    // LogSoftmax: Softmax, then Log (the same axis rules as Softmax).
    if (n.op == Op::LogSoftmax) {
      if (np.output_size() != 1 || n.inputs.size() != 1 || n.inputs[0] < 0)
        return make_error(where(n) + ": needs one input and one output");
      if (graph.find(np.output(0)) >= 0)
        return make_error(where(n) + ": output '" + np.output(0) + "' defined twice");
      Node softmax = n;
      softmax.op = Op::Softmax;
      softmax.name = n.name + ".softmax";
      Tensor mid;
      mid.name = n.name + ".probabilities";
      mid.producer = static_cast<int>(graph.nodes.size());
      softmax.outputs = {graph.add_tensor(std::move(mid))};
      const int probabilities = softmax.outputs[0];
      graph.nodes.push_back(std::move(softmax));
      Node log;
      log.op = Op::Log;
      log.name = n.name;
      log.inputs = {probabilities};
      Tensor out;
      out.name = np.output(0);
      out.producer = static_cast<int>(graph.nodes.size());
      log.outputs = {graph.add_tensor(std::move(out))};
      graph.nodes.push_back(std::move(log));
      continue;
    }
    // PRelu with a slope of several values: Relu(x) + (-slope) * Relu(-x). nn.PReLU(C)'s one
    // per channel makes the product a per-channel ScaleShift (passes); other constant slopes
    // (per element, along another axis) a strided product with the constant; a slope that is
    // an activation Relu(x) - slope * Relu(-x). One constant value: a LeakyRelu (infer_node).
    const auto slope_of = [&](const Node &p) -> const Tensor * {
      return p.inputs.size() == 2 && p.inputs[0] >= 0 && p.inputs[1] >= 0
                 ? &graph.tensors[p.inputs[1]]
                 : nullptr;
    };
    if (const Tensor *s = n.op == Op::PRelu ? slope_of(n) : nullptr;
        s && (!s->is_const || (s->dtype == DType::F32 && s->elements() > 1))) {
      if (np.output_size() != 1 || graph.find(np.output(0)) >= 0)
        return make_error(where(n) + ": needs one output, defined once");
      auto emit = [&](Op op, const std::string &suffix, std::vector<int> inputs,
                      const std::string &out) {
        Node part;
        part.op = op;
        part.name = suffix.empty() ? n.name : n.name + "." + suffix;
        part.inputs = std::move(inputs);
        return append_node(graph, std::move(part), out);
      };
      const bool constant = s->is_const;
      int slope = n.inputs[1];
      if (constant) {
        Tensor negated = *s;
        negated.name = n.name + ".negated_slope";
        for (float &v : negated.data)
          v = -v;
        slope = graph.add_tensor(std::move(negated));
      }
      const int x = n.inputs[0];
      const int positive = emit(Op::Relu, "positive", {x}, n.name + ".positive");
      const int minus_x = emit(Op::Neg, "negate", {x}, n.name + ".minus_x");
      const int negative = emit(Op::Relu, "negative", {minus_x}, n.name + ".negative_part");
      const int scaled = emit(Op::Mul, "slope", {negative, slope}, n.name + ".scaled");
      emit(constant ? Op::Add : Op::Sub, "", {positive, scaled}, np.output(0));
      continue;
    }
    // Variadic Sum / Max / Min / Mean: a chain of binary nodes (Mean: the sum divided by the
    // count, a constant divisor the passes fold into a ScaleShift).
    if (n.op == Op::Sum || n.op == Op::Max || n.op == Op::Min || n.op == Op::Mean) {
      if (np.output_size() != 1 || n.inputs.empty() ||
          std::count(n.inputs.begin(), n.inputs.end(), -1))
        return make_error(where(n) + ": needs one output and its inputs");
      if (graph.find(np.output(0)) >= 0)
        return make_error(where(n) + ": output '" + np.output(0) + "' defined twice");
      const Op binary = n.op == Op::Max ? Op::Max : n.op == Op::Min ? Op::Min : Op::Add;
      const bool mean = n.op == Op::Mean;
      int acc = n.inputs[0];
      const size_t count = n.inputs.size();
      auto emit = [&](Node part, const std::string &out) {
        return append_node(graph, std::move(part), out);
      };
      if (count == 1) {
        Node copy;
        copy.name = n.name;
        copy.op = Op::Identity;
        copy.inputs = {acc};
        acc = emit(std::move(copy), mean ? n.name + ".sum" : np.output(0));
      }
      for (size_t k = 1; k < count; ++k) {
        Node part;
        part.name = k + 1 == count ? n.name : n.name + "." + std::to_string(k);
        part.op = binary;
        part.inputs = {acc, n.inputs[k]};
        const bool last = k + 1 == count && !mean;
        acc = emit(std::move(part), last ? np.output(0) : n.name + ".partial" + std::to_string(k));
      }
      if (mean) {
        Tensor divisor;
        divisor.name = n.name + ".count";
        divisor.is_const = true;
        divisor.shape = {};
        divisor.data = {float(count)};
        const int d = graph.add_tensor(std::move(divisor));
        Node div;
        div.name = n.name + ".mean";
        div.op = Op::Div;
        div.inputs = {acc, d};
        emit(std::move(div), np.output(0));
      }
      continue;
    }
    if (n.op == Op::QLinearConv || n.op == Op::QLinearMatMul || ms_qlinear_op(n.op)) {
      if (np.output_size() != 1 || np.output(0).empty())
        return make_error(where(n) + ": needs one output");
      if (graph.find(np.output(0)) >= 0)
        return make_error(where(n) + ": output '" + np.output(0) + "' defined twice");
      QLinearExpander expander(graph, n);
      auto expand = [&]() -> Result<void> {
        const std::string &y = np.output(0);
        switch (n.op) {
        case Op::QLinearAdd:
          return expander.expand_add(y);
        case Op::QLinearMul:
          return expander.expand_add(y, Op::Mul);
        case Op::QLinearConcat:
          return expander.expand_concat(y);
        case Op::QLinearSigmoid:
          return expander.expand_unary(y, Op::Sigmoid);
        case Op::QLinearLeakyRelu:
          return expander.expand_unary(y, Op::LeakyRelu);
        case Op::QLinearGlobalAveragePool:
          return expander.expand_unary(y, Op::GlobalAveragePool);
        case Op::QLinearAveragePool:
          return expander.expand_unary(y, Op::AveragePool);
        default: // QLinearConv, QLinearMatMul
          return expander.expand(y);
        }
      };
      auto r = expand();
      if (!r)
        return r.error();
      continue;
    }
    for (const auto &name : np.output()) {
      if (graph.find(name) >= 0)
        return make_error(where(n) + ": output '" + name + "' defined twice");
      Tensor t;
      t.name = name;
      t.producer = static_cast<int>(graph.nodes.size());
      n.outputs.push_back(graph.add_tensor(std::move(t)));
    }
    graph.nodes.push_back(std::move(n));
  }
  for (const auto &out : g.output()) {
    int t = graph.find(out.name());
    if (t < 0)
      return make_error("output '" + out.name() + "' is not produced by the graph");
    graph.outputs.push_back(t);
  }
  if (graph.inputs.empty() || graph.outputs.empty())
    return make_error("model has no inputs or no outputs");
  if (auto r = infer_shapes(graph); !r)
    return r.error();
  for (int t : graph.outputs)
    if (graph.tensors[t].is_const)
      return make_error("output '" + graph.tensors[t].name + "' is a constant");
  return graph;
}

// ---- shape inference and folding ----

Result<std::vector<int64_t>> broadcast(const Node &n, std::vector<int64_t> a,
                                       std::vector<int64_t> b) {
  while (a.size() < b.size())
    a.insert(a.begin(), 1);
  while (b.size() < a.size())
    b.insert(b.begin(), 1);
  std::vector<int64_t> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      return make_error(where(n) + ": shapes cannot be broadcast");
    out[i] = std::max(a[i], b[i]);
  }
  return out;
}

int64_t norm_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

// Spatial output size and explicit pads of a Conv / pooling window (auto_pad resolved).
// Records a window's resolved geometry on the node (auto_pad already applied).
void store_window(Node &n, const std::vector<int64_t> &kernel, const std::vector<int64_t> &strides,
                  const std::vector<int64_t> &dilations, const std::vector<int64_t> &pads) {
  n.ints["pads"] = pads;
  n.ints["strides"] = strides;
  n.ints["dilations"] = dilations;
  n.ints["kernel_shape"] = kernel;
  n.strings["auto_pad"] = "NOTSET";
}

Result<void> window_shape(Node &n, const std::vector<int64_t> &in, int64_t cout,
                          std::vector<int64_t> kernel, std::vector<int64_t> &out) {
  if (in.size() != 4)
    return make_error(where(n) + ": only 2-D (NCHW) windows are supported");
  auto strides = n.attrs("strides", {1, 1});
  auto dil = n.attrs("dilations", {1, 1});
  auto pads = n.attrs("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return make_error(where(n) + ": expected 2-D kernel, strides, dilations and 4 pads");
  const bool ceil_mode = n.attr("ceil_mode", 0) != 0;
  std::string auto_pad = n.strings.count("auto_pad") ? n.strings["auto_pad"] : "NOTSET";
  out = {1, cout, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dil[i] <= 0 || kernel[i] > 64 || strides[i] > 64 ||
        dil[i] > 64)
      return make_error(where(n) + ": kernel, stride or dilation out of range");
    const int64_t eff = (kernel[i] - 1) * dil[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t o = (in[2 + i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(0, (o - 1) * strides[i] + eff - in[2 + i]);
      int64_t small = total / 2, large = total - small;
      pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      pads[i + 2] = auto_pad == "SAME_UPPER" ? large : small;
    } else if (auto_pad == "VALID") {
      pads[i] = pads[i + 2] = 0;
    } else if (auto_pad != "NOTSET") {
      return make_error(where(n) + ": auto_pad '" + auto_pad + "' not supported");
    }
    if (pads[i] < 0 || pads[i + 2] < 0 || pads[i] >= eff || pads[i + 2] >= eff + strides[i])
      return make_error(where(n) + ": padding out of range");
    int64_t span = in[2 + i] + pads[i] + pads[i + 2] - eff;
    if (span < 0)
      return make_error(where(n) + ": window larger than the padded input");
    out[2 + i] = (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    if (ceil_mode && (out[2 + i] - 1) * strides[i] >= in[2 + i] + pads[i])
      out[2 + i] -= 1; // the last window must start inside the input or left pad
  }
  store_window(n, kernel, strides, dil, pads);
  return {};
}

bool all_const(const Graph &g, const Node &n) {
  for (int i : n.inputs)
    if (i >= 0 && !g.tensors[i].is_const)
      return false;
  return true;
}

// Folds shape arithmetic; returns true when the node became constant outputs.
Result<bool> fold(Graph &g, Node &n) {
  auto &outs = g.tensors;
  auto in = [&](size_t i) -> Tensor & { return g.tensors[n.inputs[i]]; };
  auto set_int = [&](std::vector<int64_t> shape, std::vector<int64_t> values) {
    Tensor &o = outs[n.outputs[0]];
    o.is_const = true;
    o.dtype = DType::I64;
    o.shape = std::move(shape);
    o.idata = std::move(values);
    n.dead = true;
    return true;
  };
  if (n.op == Op::Shape) { // static shapes make Shape a constant even on activations
    auto s = in(0).shape;
    return set_int({int64_t(s.size())}, s);
  }
  if (!all_const(g, n) || n.inputs.empty())
    return false;
  if (n.op == Op::DequantizeLinear) { // quantized weights and biases: fold to float constants
    const Tensor &x = in(0);
    const Tensor &scale = in(1);
    const bool has_zp = n.inputs.size() > 2 && n.inputs[2] >= 0;
    auto value = [](const Tensor &t, size_t i) -> double {
      return t.dtype == DType::I64 ? double(t.idata[i]) : double(t.data[i]);
    };
    const size_t count = size_t(x.elements());
    const size_t scales = size_t(scale.elements());
    if (scale.dtype != DType::F32 || scales == 0 || (has_zp && size_t(in(2).elements()) != scales))
      return make_error(where(n) + ": malformed scale or zero point");
    size_t inner = 1, dim = 1;
    if (scales > 1) {
      const int64_t axis = norm_axis(n.attr("axis", 1), x.shape.size());
      if (axis < 0 || axis >= int64_t(x.shape.size()) || size_t(x.shape[axis]) != scales)
        return make_error(where(n) + ": per-axis scales do not match the axis");
      for (size_t d = size_t(axis) + 1; d < x.shape.size(); ++d)
        inner *= size_t(x.shape[d]);
      dim = scales;
    }
    Tensor &o = outs[n.outputs[0]];
    o.is_const = true;
    o.dtype = DType::F32;
    o.shape = x.shape;
    o.data.resize(count);
    for (size_t i = 0; i < count; ++i) {
      const size_t ch = scales > 1 ? (i / inner) % dim : 0;
      const double zp = has_zp ? value(in(2), ch) : 0.0;
      o.data[i] = float((value(x, i) - zp) * double(scale.data[ch]));
    }
    // Per-tensor or axis-0 quantization is what INT8 kernels take (weights [cout,...]).
    if (scales == 1 || inner * dim == count) {
      o.qvalues.resize(count);
      for (size_t i = 0; i < count; ++i)
        o.qvalues[i] = int32_t(value(x, i));
      o.qscales = scale.data;
      o.qzeros.assign(scales, 0);
      for (size_t c = 0; c < scales && has_zp; ++c)
        o.qzeros[c] = int32_t(value(in(2), c));
    }
    n.dead = true;
    return true;
  }
  const bool ints = std::all_of(n.inputs.begin(), n.inputs.end(),
                                [&](int i) { return i < 0 || g.tensors[i].dtype == DType::I64; });
  if (n.op == Op::Cast && in(0).dtype == DType::I64 &&
      (n.attr("to", 7) == 7 || n.attr("to", 7) == 6))
    return set_int(in(0).shape, in(0).idata);
  if (!ints)
    return false;
  if (n.op == Op::Gather) {
    const auto &data = in(0).idata, &idx = in(1).idata;
    if (in(0).shape.size() != 1)
      return false;
    std::vector<int64_t> v;
    for (int64_t i : idx) {
      int64_t j = i < 0 ? i + int64_t(data.size()) : i;
      if (j < 0 || j >= int64_t(data.size()))
        return make_error(where(n) + ": index out of range");
      v.push_back(data[j]);
    }
    return set_int(in(1).shape, v);
  }
  if (n.op == Op::Unsqueeze || n.op == Op::Squeeze) {
    std::vector<int64_t> shape = in(0).shape;
    auto axes = n.attrs("axes");
    if (n.inputs.size() > 1 && n.inputs[1] >= 0)
      axes = in(1).idata;
    if (n.op == Op::Unsqueeze) {
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes)
        shape.insert(shape.begin() + std::clamp<int64_t>(norm_axis(a, shape.size() + 1), 0,
                                                         int64_t(shape.size())),
                     1);
    } else {
      std::vector<int64_t> s2;
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] != 1)
          s2.push_back(shape[i]);
      shape = s2;
    }
    return set_int(shape, in(0).idata);
  }
  if (n.op == Op::Slice && in(0).shape.size() == 1 && n.inputs.size() >= 3) {
    // Shape arithmetic: a 1-D slice (axes, if given, must be {0}; steps default to 1).
    const auto &data = in(0).idata;
    if (n.inputs.size() > 3 && n.inputs[3] >= 0 &&
        (in(3).idata.size() != 1 || norm_axis(in(3).idata[0], 1) != 0))
      return make_error(where(n) + ": shape slice over an axis other than 0");
    const int64_t step = n.inputs.size() > 4 && n.inputs[4] >= 0 ? in(4).idata.at(0) : 1;
    if (in(1).idata.size() != 1 || in(2).idata.size() != 1 || step == 0)
      return make_error(where(n) + ": malformed shape slice");
    const int64_t size = int64_t(data.size());
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
      v = v < 0 ? v + size : v;
      return std::clamp<int64_t>(v, lo, hi);
    };
    std::vector<int64_t> v;
    if (step > 0)
      for (int64_t i = clampi(in(1).idata[0], 0, size); i < clampi(in(2).idata[0], 0, size);
           i += step)
        v.push_back(data[size_t(i)]);
    else
      for (int64_t i = clampi(in(1).idata[0], -1, size - 1);
           i > clampi(in(2).idata[0], -1, size - 1); i += step)
        v.push_back(data[size_t(i)]);
    return set_int({int64_t(v.size())}, v);
  }
  if (n.op == Op::Concat) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      v.insert(v.end(), in(i).idata.begin(), in(i).idata.end());
    return set_int({int64_t(v.size())}, v);
  }
  if (n.op == Op::Add || n.op == Op::Sub || n.op == Op::Mul || n.op == Op::Div) {
    const auto &a = in(0).idata, &b = in(1).idata;
    if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
      return false;
    std::vector<int64_t> v(std::max(a.size(), b.size()));
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t x = a[a.size() == 1 ? 0 : i], y = b[b.size() == 1 ? 0 : i];
      if (n.op == Op::Div && y == 0)
        return make_error(where(n) + ": division by zero in shape arithmetic");
      v[i] = n.op == Op::Add ? x + y : n.op == Op::Sub ? x - y : n.op == Op::Mul ? x * y : x / y;
    }
    return set_int(a.size() >= b.size() ? in(0).shape : in(1).shape, v);
  }
  return false;
}

// A batch runs image by image: an operator computing along dimension 0 (the images) would
// see one image only. Such models compile as whole tensors (import_onnx_bytes).
Result<void> batch_axis_guard(const Graph &g, const Node &n, std::vector<int64_t> axes) {
  if (g.whole_tensors || g.batch <= 1)
    return {};
  for (int64_t a : axes)
    if (a == 0)
      return make_error(where(n) + ": computes along the batch axis (dimension 0)");
  return {};
}

Result<void> infer_node(Graph &g, Node &n) {
  auto in = [&](size_t i) -> Tensor & { return g.tensors[n.inputs[i]]; };
  auto has = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] >= 0; };
  auto out = [&](size_t i) -> Tensor & { return g.tensors[n.outputs[i]]; };
  if (n.inputs.empty() || !has(0))
    return make_error(where(n) + ": missing input");
  if (n.outputs.empty())
    return make_error(where(n) + ": no output");
  for (int i : n.inputs)
    if (i >= 0 && !g.tensors[i].is_const && g.tensors[i].shape.empty())
      return make_error(where(n) + ": input '" + g.tensors[i].name + "' has no static shape");
  auto folded = fold(g, n);
  if (!folded)
    return folded.error();
  if (folded.value())
    return {};
  const auto &x = in(0).shape;
  Tensor &y = out(0);
  y.dtype = in(0).dtype == DType::I64 ? DType::F32 : in(0).dtype;
  const ShapeRule rule = ir::op_info(n.op).shape;
  // Image operators compute one image: whole tensors with a first dimension > 1 are no image.
  const bool image_rule = rule == ShapeRule::Conv || rule == ShapeRule::ConvTranspose ||
                          rule == ShapeRule::Window || rule == ShapeRule::GlobalPool ||
                          rule == ShapeRule::Resize;
  if (image_rule && !x.empty() && x[0] != 1)
    return make_error(where(n) + ": a first dimension of " + std::to_string(x[0]) +
                      " (image operators take one image: batch 1)");
  switch (rule) {
  case ShapeRule::Conv: {
    if (!has(1) || !in(1).is_const)
      return make_error(where(n) + ": weights must be constant");
    const auto &w = in(1).shape;
    const int64_t group = n.attr("group", 1);
    if (w.size() != 4 || x.size() != 4 || group <= 0 || x[1] != w[1] * group || w[0] % group)
      return make_error(where(n) + ": weight shape does not match the input");
    if (has(2) && (!in(2).is_const || in(2).elements() != w[0]))
      return make_error(where(n) + ": bias must be a constant of " + std::to_string(w[0]));
    return window_shape(n, x, w[0], n.attrs("kernel_shape", {w[2], w[3]}), y.shape);
  }
  case ShapeRule::ConvTranspose: {
    if (!has(1) || !in(1).is_const)
      return make_error(where(n) + ": weights must be constant");
    const auto &w = in(1).shape; // [cin][cout/group][kh][kw]
    const int64_t group = n.attr("group", 1);
    if (w.size() != 4 || x.size() != 4)
      return make_error(where(n) + ": only 2-D (NCHW) transposed convolutions are supported");
    if (group <= 0 || x[1] != w[0] || w[0] % group)
      return make_error(where(n) + ": weight shape does not match the input");
    const int64_t cout = w[1] * group;
    if (has(2) && (!in(2).is_const || in(2).elements() != cout))
      return make_error(where(n) + ": bias must be a constant of " + std::to_string(cout));
    auto kernel = n.attrs("kernel_shape", {w[2], w[3]});
    auto strides = n.attrs("strides", {1, 1});
    auto dil = n.attrs("dilations", {1, 1});
    auto pads = n.attrs("pads", {0, 0, 0, 0});
    auto extra = n.attrs("output_padding", {0, 0});
    const std::string auto_pad = n.strings.count("auto_pad") ? n.strings["auto_pad"] : "NOTSET";
    if (kernel.size() != 2 || strides.size() != 2 || dil.size() != 2 || pads.size() != 4 ||
        extra.size() != 2 || kernel[0] != w[2] || kernel[1] != w[3])
      return make_error(where(n) + ": expected 2-D kernel, strides, dilations, 4 pads");
    if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
        auto_pad != "SAME_LOWER")
      return make_error(where(n) + ": unknown auto_pad '" + auto_pad + "'");
    if (auto_pad == "VALID")
      pads = {0, 0, 0, 0};
    // An output shape (given, or the input's times the strides for SAME) sets the pads:
    // ONNX's total padding, its odd half at the end for SAME_UPPER (and for an explicit
    // output_shape), at the start for SAME_LOWER.
    std::vector<int64_t> out_shape = n.attrs("output_shape");
    int64_t grow[2] = {0, 0};  // output rows / columns past the full result (only the bias)
    if (out_shape.size() == 4) // [N, C, H, W] is allowed as well as [H, W]
      out_shape = {out_shape[2], out_shape[3]};
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      out_shape = {x[2] * strides[0], x[3] * strides[1]};
    if (!out_shape.empty()) {
      if (out_shape.size() != 2)
        return make_error(where(n) + ": output_shape must give 2 spatial sizes");
      for (int i = 0; i < 2; ++i) {
        const int64_t total =
            strides[i] * (x[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dil[i] + 1 - out_shape[i];
        if (total < 0) { // a larger output: its last rows are past every tap (ONNX's reference)
          pads[i] = pads[i + 2] = 0, grow[i] = -total;
          continue;
        }
        const int64_t start = auto_pad == "SAME_LOWER" ? total - total / 2 : total / 2;
        pads[i] = start, pads[i + 2] = total - start;
      }
    }
    y.shape = {1, cout, 0, 0};
    for (int i = 0; i < 2; ++i) {
      if (kernel[i] <= 0 || strides[i] <= 0 || dil[i] <= 0 || kernel[i] > 64 || strides[i] > 64 ||
          dil[i] > 64 || extra[i] < 0 || extra[i] >= std::max(strides[i], dil[i]) || pads[i] < 0 ||
          pads[i + 2] < 0)
        return make_error(where(n) + ": kernel, stride, dilation, padding out of range");
      const int64_t size = (x[2 + i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 + extra[i] +
                           grow[i] - pads[i] - pads[i + 2];
      if (size <= 0 || pads[i] >= (kernel[i] - 1) * dil[i] + 1)
        return make_error(where(n) + ": padding removes the whole output");
      y.shape[2 + i] = size;
    }
    store_window(n, kernel, strides, dil, pads);
    return {};
  }
  case ShapeRule::Pad: {
    // Opset 11+: pads (and constant_value, axes) as inputs; before: attributes. Modes
    // constant (any value), reflect and edge, over at most three dimensions (with every
    // other dimension of size 1 and unpadded): lower_layout.cpp.
    const std::string mode = n.strings.count("mode") ? n.strings["mode"] : "constant";
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      return make_error(where(n) + ": mode '" + mode + "' is not supported");
    std::vector<int64_t> pads = n.attrs(n.ints.count("paddings") ? "paddings" : "pads");
    if (has(1)) {
      if (!in(1).is_const)
        return make_error(where(n) + ": pads must be constant");
      pads = in(1).idata;
    }
    float value = n.floats.count("value") ? n.floats["value"] : 0.0f;
    if (has(2)) {
      if (!in(2).is_const)
        return make_error(where(n) + ": constant_value must be constant");
      if (!in(2).data.empty())
        value = in(2).data[0];
    }
    const size_t rank = x.size();
    if (has(3)) { // axes: the pads of these axes only
      if (!in(3).is_const)
        return make_error(where(n) + ": axes must be constant");
      const auto &axes = in(3).idata;
      if (pads.size() != 2 * axes.size())
        return make_error(where(n) + ": pads must have two values per axis");
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        const int64_t a = norm_axis(axes[k], rank);
        if (a < 0 || a >= int64_t(rank))
          return make_error(where(n) + ": axis out of range");
        full[size_t(a)] = pads[k], full[rank + size_t(a)] = pads[axes.size() + k];
      }
      pads = full;
    }
    if (pads.size() != 2 * rank || rank == 0)
      return make_error(where(n) + ": pads must have two values per dimension");
    if (std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v < 0 || v > 1024; }))
      return make_error(where(n) + ": padding out of range 0..1024 (negative pads crop: not "
                                   "supported)");
    if (!std::isfinite(value))
      return make_error(where(n) + ": the padding value must be finite");
    y.shape = x;
    for (size_t d = 0; d < rank; ++d) {
      y.shape[d] = x[d] + pads[d] + pads[rank + d];
      const bool padded = pads[d] || pads[rank + d];
      if (padded && mode == "reflect" && std::max(pads[d], pads[rank + d]) >= x[d])
        return make_error(where(n) + ": reflect padding of " +
                          std::to_string(std::max(pads[d], pads[rank + d])) +
                          " needs a dimension larger than that (" + std::to_string(x[d]) + ")");
      if (padded && mode == "edge" && x[d] == 0)
        return make_error(where(n) + ": edge padding of an empty dimension");
    }
    if (pads[0] || pads[rank])
      if (auto r = batch_axis_guard(g, n, {0}); !r)
        return r;
    n.ints["pads"] = pads;
    n.floats["value"] = value;
    n.strings["mode"] = mode;
    n.inputs.resize(1); // the pads are recorded on the node
    return {};
  }
  case ShapeRule::Window: {
    if (n.outputs.size() > 1)
      return make_error(where(n) + ": the Indices output is not supported");
    if (x.size() != 4)
      return make_error(where(n) + ": only 2-D pooling is supported");
    return window_shape(n, x, x[1], n.attrs("kernel_shape"), y.shape);
  }
  case ShapeRule::Reduce: {
    // Over H and W of an NCHW activation: global pooling ([1,C,1,1], or [1,C] without
    // keepdims, the same storage).
    auto axes = n.attrs("axes");
    if (has(1)) {
      if (!in(1).is_const)
        return make_error(where(n) + ": axes must be constant");
      axes = in(1).idata;
    }
    for (auto &a : axes) {
      a = norm_axis(a, x.size());
      if (a < 0 || a >= int64_t(x.size()))
        return make_error(where(n) + ": axis out of range");
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    const bool keep = n.attr("keepdims", 1) != 0;
    n.inputs.resize(1);
    if (axes.empty() && n.attr("noop_with_empty_axes", 0) != 0) { // opset 13/18: identity
      n.op = Op::Identity;
      y.shape = x;
      return {};
    }
    if (axes.empty()) // all of them
      for (size_t d = 0; d < x.size(); ++d)
        axes.push_back(int64_t(d));
    if (auto r = batch_axis_guard(g, n, axes); !r)
      return r;
    // Mean / max over H and W of an image: global pooling ([1,C,1,1], or [1,C] without
    // keepdims, the same storage), split over the clusters.
    if (x.size() == 4 && x[0] == 1 && axes == std::vector<int64_t>{2, 3} &&
        (n.op == Op::ReduceMean || n.op == Op::ReduceMax)) {
      n.op = n.op == Op::ReduceMean ? Op::GlobalAveragePool : Op::GlobalMaxPool;
      y.shape = keep ? std::vector<int64_t>{1, x[1], 1, 1} : std::vector<int64_t>{1, x[1]};
      return {};
    }
    // Any other axes: a strided reduction of the whole tensor (tiler/lower_layout.cpp).
    y.shape.clear();
    for (size_t d = 0; d < x.size(); ++d) {
      const bool reduced = std::binary_search(axes.begin(), axes.end(), int64_t(d));
      if (!reduced)
        y.shape.push_back(x[d]);
      else if (keep)
        y.shape.push_back(1);
    }
    n.ints["axes"] = axes;
    n.ints["keepdims"] = {keep ? 1 : 0};
    return {};
  }
  case ShapeRule::GlobalPool: {
    if (x.size() != 4)
      return make_error(where(n) + ": only NCHW input is supported");
    y.shape = {1, x[1], 1, 1};
    return {};
  }
  case ShapeRule::Gemm: {
    // MatMul of two activations (attention): batch dimensions broadcast, one native matrix
    // product per batch index on one cluster (tiler/lower_layout.cpp), whole tensors only.
    if (n.op == Op::MatMul && has(1) && !in(1).is_const) {
      const auto &b = in(1).shape;
      if (x.size() < 2 || b.size() < 2)
        return make_error(where(n) + ": products of 1-D activations are not supported");
      if (!g.whole_tensors)
        return make_error(where(n) + ": a product of two activations needs whole tensors (its "
                                     "first dimension is no batch of images)");
      if (x.back() != b[b.size() - 2])
        return make_error(where(n) + ": inner dimensions differ (" + std::to_string(x.back()) +
                          " and " + std::to_string(b[b.size() - 2]) + ")");
      auto batch = broadcast(n, std::vector<int64_t>(x.begin(), x.end() - 2),
                             std::vector<int64_t>(b.begin(), b.end() - 2));
      if (!batch)
        return batch.error();
      y.shape = batch.value();
      y.shape.insert(y.shape.end(), {x[x.size() - 2], b.back()});
      n.ints["two_activations"] = {1};
      return {};
    }
    if (!has(1) || !in(1).is_const)
      return make_error(where(n) + ": the second operand must be constant");
    const auto &b = in(1).shape;
    if (x.size() != 2 || b.size() != 2 || x[0] != 1)
      return make_error(where(n) + ": only [1,K] x [K,N] products are supported");
    if (n.op == Op::Gemm && n.attr("transA", 0) != 0)
      return make_error(where(n) + ": transA is not supported");
    const bool tb = n.op == Op::Gemm && n.attr("transB", 0) != 0;
    const int64_t k = tb ? b[1] : b[0], nn = tb ? b[0] : b[1];
    if (k != x[1])
      return make_error(where(n) + ": inner dimensions differ");
    if (has(2) && (!in(2).is_const || (in(2).elements() != nn && in(2).elements() != 1)))
      return make_error(where(n) + ": C must be a constant of N or 1 elements");
    y.shape = {1, nn};
    return {};
  }
  case ShapeRule::Broadcast: {
    if (!has(1))
      return make_error(where(n) + ": needs two inputs");
    auto s = broadcast(n, x, in(1).shape);
    if (!s)
      return s.error();
    y.shape = s.value();
    if (in(0).is_const && !in(1).is_const)
      y.dtype = in(1).dtype;
    return {};
  }
  case ShapeRule::SameShape: {
    if (n.op == Op::Custom) { // a user's operator (custom_ops.h)
      const kann::custom::Operator *op = kann::custom::of(n);
      if (!op)
        return make_error(where(n) + ": custom operator no longer registered");
      if (n.outputs.size() != 1)
        return make_error(where(n) + ": a custom operator has one output");
      const size_t inputs = op->kind == MCL_CUSTOM_WHOLE ? n.inputs.size() : 1;
      if (inputs > MCL_CUSTOM_INPUT_MAX)
        return make_error(where(n) + ": more than " + std::to_string(MCL_CUSTOM_INPUT_MAX) +
                          " inputs");
      std::vector<std::vector<int64_t>> shapes;
      for (size_t i = 0; i < inputs; ++i) {
        // Constant inputs of an operator on whole tensors are read from its parameters
        // (tiler/plan.cpp); the element-wise kind takes one activation.
        if (!has(i) || (in(i).is_const && op->kind != MCL_CUSTOM_WHOLE))
          return make_error(where(n) + ": input " + std::to_string(i) +
                            (has(i) ? " must be an activation (constant inputs need kind "
                                      "MCL_CUSTOM_WHOLE)"
                                    : " is missing (not supported)"));
        if (in(i).is_const &&
            (in(i).dtype != DType::F32 || int64_t(in(i).data.size()) != in(i).elements()))
          return make_error(where(n) + ": constant input " + std::to_string(i) +
                            " is not a float tensor");
        if (!in(i).is_const && in(i).dtype != in(0).dtype)
          return make_error(where(n) + ": the inputs must have one element type");
        shapes.push_back(in(i).shape);
      }
      n.inputs.resize(inputs);
      auto shape = kann::custom::output_shape(*op, n, shapes);
      if (!shape)
        return make_error(where(n) + ": " + shape.error().message);
      y.shape = shape.value();
      return {};
    }
    if (n.outputs.size() > 1 && n.op == Op::Dropout)
      n.outputs.resize(1); // the mask output is unused in inference
    if (n.op == Op::BatchNormalization && n.outputs.size() > 1)
      return make_error(where(n) + ": training-mode outputs are not supported");
    y.shape = x;
    if (n.op == Op::PRelu) { // one slope (PyTorch's nn.PReLU()): a LeakyRelu
      if (!has(1) || !in(1).is_const || in(1).dtype != DType::F32 || in(1).elements() != 1)
        return make_error(where(n) + ": only a constant one-value slope is supported");
      n.floats["alpha"] = in(1).data[0];
      n.inputs.resize(1);
    }
    if (n.op == Op::Clip)
      for (size_t i = 1; i < 3; ++i)
        if (has(i) && !in(i).is_const)
          return make_error(where(n) + ": min/max must be constant");
    if (n.op == Op::Softmax) {
      // Opset 13: over one axis; before: over the dimensions from `axis` on, flattened.
      const int64_t axis = norm_axis(n.attr("axis", g.opset >= 13 ? -1 : 1), x.size());
      int64_t after = 1; // elements of the dimensions after the axis
      for (size_t d = size_t(std::max<int64_t>(axis + 1, 0)); d < x.size(); ++d)
        after *= x[d];
      if (auto r = batch_axis_guard(g, n, {axis}); !r)
        return r;
      // Opset 13's one axis (or an older flattening one that is a single axis): another axis
      // than the last or an image's channels is moved there around the softmax
      // (passes::softmax_axes_to_last, which reads the axis recorded here).
      if (axis != int64_t(x.size()) - 1 && g.opset < 13 && after != 1)
        return make_error(where(n) + ": softmax only over the last (or channel) axis");
      n.ints["axis"] = {axis};
    }
    if (n.op == Op::BatchNormalization)
      for (size_t i = 1; i < 5; ++i)
        if (!has(i) || !in(i).is_const || in(i).elements() != x[1])
          return make_error(where(n) + ": scale, bias, mean and variance must be constants");
    return {};
  }
  case ShapeRule::Transpose: {
    // Channel shuffles become ChannelShuffle (passes::fuse_channel_shuffles); the others are
    // strided copies (tiler/lower_layout.cpp).
    auto perm = n.attrs("perm");
    if (perm.empty())
      for (size_t i = x.size(); i-- > 0;)
        perm.push_back(int64_t(i));
    if (perm.size() != x.size())
      return make_error(where(n) + ": perm does not match the rank");
    std::vector<bool> seen(x.size(), false);
    y.shape.clear();
    for (int64_t a : perm) {
      if (a < 0 || a >= int64_t(x.size()) || seen[size_t(a)])
        return make_error(where(n) + ": perm is not a permutation");
      seen[size_t(a)] = true;
      y.shape.push_back(x[size_t(a)]);
    }
    n.ints["perm"] = perm;
    if (perm[0] != 0)
      if (auto r = batch_axis_guard(g, n, {0}); !r)
        return r;
    return {};
  }
  case ShapeRule::Slice: {
    // Activations: a range of channels of an NCHW tensor (ShuffleNet's split), step 1, split
    // over the clusters; any other slice: a strided copy (StridedSlice; negative steps one
    // copy per index of their dimensions).
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (has(i) && !in(i).is_const)
        return make_error(where(n) + ": starts, ends, axes and steps must be constant");
    const bool channel_range = has(1) && has(2) && x.size() == 4 && x[0] == 1 &&
                               in(1).idata.size() == 1 && in(2).idata.size() == 1 && has(3) &&
                               in(3).idata.size() == 1 && norm_axis(in(3).idata[0], 4) == 1 &&
                               !(n.inputs.size() > 4 && has(4) && in(4).idata.at(0) != 1);
    if (!channel_range && has(1) && has(2)) {
      const auto &starts = in(1).idata, &ends = in(2).idata;
      std::vector<int64_t> axes, steps;
      for (size_t k = 0; k < starts.size(); ++k)
        axes.push_back(has(3) ? in(3).idata.at(k) : int64_t(k));
      steps.assign(starts.size(), 1);
      if (n.inputs.size() > 4 && has(4))
        steps = in(4).idata;
      if (ends.size() != starts.size() || steps.size() != starts.size())
        return make_error(where(n) + ": starts, ends, axes and steps differ in length");
      std::vector<int64_t> begin(x.size(), 0), step(x.size(), 1);
      y.shape = x;
      for (size_t k = 0; k < starts.size(); ++k) {
        const int64_t a = norm_axis(axes[k], x.size());
        if (a < 0 || a >= int64_t(x.size()))
          return make_error(where(n) + ": axis out of range");
        if (steps[k] == 0)
          return make_error(where(n) + ": a step of 0");
        const int64_t d = x[size_t(a)];
        int64_t s = starts[k] < 0 ? starts[k] + d : starts[k];
        int64_t e = ends[k] < 0 ? ends[k] + d : ends[k];
        // ONNX: positive steps clamp both to [0, d]; negative ones (walking backwards)
        // the start to [0, d - 1] and the end to [-1, d - 1].
        s = std::clamp<int64_t>(s, 0, steps[k] > 0 ? d : d - 1);
        e = std::clamp<int64_t>(e, steps[k] > 0 ? 0 : -1, steps[k] > 0 ? d : d - 1);
        if (auto r = batch_axis_guard(g, n, {a}); !r)
          return r;
        begin[size_t(a)] = s;
        step[size_t(a)] = steps[k];
        const int64_t back = -steps[k];
        y.shape[size_t(a)] = steps[k] > 0 ? (e > s ? (e - s + steps[k] - 1) / steps[k] : 0)
                                          : (s > e ? (s - e + back - 1) / back : 0);
      }
      n.op = Op::StridedSlice;
      n.ints["begin"] = begin;
      n.ints["step"] = step;
      n.inputs.resize(1);
      return {};
    }
    if (!has(1) || !has(2) || x.size() != 4 || in(1).idata.size() != 1 || in(2).idata.size() != 1 ||
        (has(3) && (in(3).idata.size() != 1 || norm_axis(in(3).idata[0], 4) != 1)) || (!has(3)) ||
        (n.inputs.size() > 4 && has(4) && in(4).idata.at(0) != 1))
      return make_error(where(n) + ": only slices of a channel range (axis 1, step 1) of an "
                                   "NCHW activation are supported");
    int64_t start = in(1).idata[0], end = in(2).idata[0];
    if (start < 0)
      start += x[1];
    if (end < 0)
      end += x[1];
    start = std::clamp<int64_t>(start, 0, x[1]);
    end = std::clamp<int64_t>(end, 0, x[1]);
    if (end <= start)
      return make_error(where(n) + ": empty channel slice");
    y.shape = {x[0], end - start, x[2], x[3]};
    n.ints["channels"] = {start, end};
    n.inputs.resize(1);
    return {};
  }
  case ShapeRule::Flatten: {
    // [d0 * .. * d(axis-1), d(axis) * ..]: a view of row-major storage (or of an image
    // flattened from axis 1), a copy when it is the network's input reshaped.
    const int64_t axis = norm_axis(n.attr("axis", 1), x.size());
    if (axis < 0 || axis > int64_t(x.size()))
      return make_error(where(n) + ": axis out of range");
    if (auto r = batch_axis_guard(g, n, {axis}); !r)
      return r;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < x.size(); ++i)
      (int64_t(i) < axis ? outer : inner) *= x[i];
    y.shape = {outer, inner};
    return {};
  }
  case ShapeRule::Reshape: {
    std::vector<int64_t> target;
    if (n.op == Op::Reshape) {
      if (!has(1) || !in(1).is_const || in(1).dtype != DType::I64)
        return make_error(where(n) + ": shape must be constant (after folding)");
      target = in(1).idata;
      int64_t known = 1, infer = -1;
      for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == 0 && n.attr("allowzero", 0) == 0)
          target[i] = i < x.size() ? x[i] : 1;
        if (target[i] == -1)
          infer = int64_t(i);
        else
          known *= target[i];
      }
      if (infer >= 0)
        target[infer] = known ? in(0).elements() / known : 0;
    } else {
      target = x;
      auto axes = n.attrs("axes");
      if (has(1))
        axes = in(1).idata;
      for (int64_t a : axes) // inserting or removing dimension 0 moves the images' axis
        if (auto r = batch_axis_guard(
                g, n, {norm_axis(a, n.op == Op::Squeeze ? x.size() : x.size() + axes.size())});
            !r)
          return r;
      if (n.op == Op::Squeeze) {
        std::vector<int64_t> t2;
        for (size_t i = 0; i < x.size(); ++i) {
          bool drop = axes.empty() ? x[i] == 1
                                   : std::count(axes.begin(), axes.end(), int64_t(i)) ||
                                         std::count(axes.begin(), axes.end(),
                                                    int64_t(i) - int64_t(x.size()));
          if (!drop)
            t2.push_back(x[i]);
        }
        target = t2;
      } else {
        std::sort(axes.begin(), axes.end());
        for (int64_t a : axes)
          target.insert(target.begin() + std::clamp<int64_t>(norm_axis(a, target.size() + 1), 0,
                                                             int64_t(target.size())),
                        1);
      }
    }
    int64_t count = 1;
    for (int64_t d : target)
      count = d > 0 ? count * d : -1;
    if (count != in(0).elements())
      return make_error(where(n) + ": reshape changes the element count");
    y.shape = target;
    if (in(0).is_const) { // constant reshape: fold
      y.is_const = true;
      y.dtype = in(0).dtype;
      y.data = in(0).data;
      y.idata = in(0).idata;
      n.dead = true;
    }
    return {};
  }
  case ShapeRule::Concat: {
    int64_t axis = norm_axis(n.attr("axis", 1), x.size());
    if (axis < 0 || axis >= int64_t(x.size()))
      return make_error(where(n) + ": axis out of range");
    if (auto r = batch_axis_guard(g, n, {axis}); !r)
      return r;
    y.shape = x;
    y.shape[axis] = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!has(i) || in(i).shape.size() != x.size())
        return make_error(where(n) + ": inputs of different ranks");
      for (size_t d = 0; d < x.size(); ++d)
        if (int64_t(d) != axis && in(i).shape[d] != x[d])
          return make_error(where(n) + ": inputs differ outside the concat axis");
      y.shape[axis] += in(i).shape[axis];
    }
    return {};
  }
  case ShapeRule::Resize: {
    if (x.size() != 4)
      return make_error(where(n) + ": only NCHW resizing is supported");
    const std::string mode = n.strings.count("mode") ? n.strings["mode"] : "nearest";
    if (mode != "nearest" && mode != "linear")
      return make_error(where(n) + ": mode '" + mode + "' is not supported");
    // The native resize knows these four; tf_half_pixel_for_nn and tf_crop_and_resize (roi)
    // must not silently run as half_pixel.
    const std::string coord = n.strings.count("coordinate_transformation_mode")
                                  ? n.strings["coordinate_transformation_mode"]
                                  : "half_pixel";
    if (coord != "half_pixel" && coord != "asymmetric" && coord != "align_corners" &&
        coord != "pytorch_half_pixel")
      return make_error(where(n) + ": coordinate_transformation_mode '" + coord +
                        "' is not supported");
    std::vector<float> scales;
    if (has(2) && in(2).is_const && in(2).elements() == 4)
      scales = in(2).data;
    else if (has(3) && in(3).is_const && in(3).elements() == 4)
      for (int i = 0; i < 4; ++i)
        scales.push_back(float(in(3).idata[i]) / float(x[i]));
    else
      return make_error(where(n) + ": needs constant scales or sizes");
    if (scales[0] != 1.0f || scales[1] != 1.0f || !(scales[2] > 0) || !(scales[3] > 0))
      return make_error(where(n) + ": only spatial (H, W) resizing is supported");
    y.shape = {1, x[1], int64_t(std::floor(x[2] * double(scales[2]))),
               int64_t(std::floor(x[3] * double(scales[3])))};
    if (has(3) && in(3).is_const && in(3).elements() == 4)
      y.shape = {1, x[1], in(3).idata[2], in(3).idata[3]};
    if (y.shape[2] <= 0 || y.shape[3] <= 0 || y.shape[2] > (1 << 16) || y.shape[3] > (1 << 16))
      return make_error(where(n) + ": output size out of range");
    n.floats["scale_h"] = scales[2];
    n.floats["scale_w"] = scales[3];
    return {};
  }
  case ShapeRule::Cast: {
    if (n.attr("to", 1) != 1)
      return make_error(where(n) + ": only casts to float of activations are supported");
    y.shape = x;
    return {};
  }
  case ShapeRule::Quantize: {
    // Activations: per-tensor quantization (weights were folded above).
    if (!has(1) || !in(1).is_const || in(1).elements() != 1 || in(1).dtype != DType::F32 ||
        !(in(1).data[0] > 0.0f))
      return make_error(where(n) + ": only per-tensor constant positive scales are supported");
    if (has(2) && (!in(2).is_const || in(2).elements() != 1))
      return make_error(where(n) + ": the zero point must be a constant scalar");
    const float scale = in(1).data[0];
    const int32_t zp =
        has(2) ? int32_t(in(2).dtype == DType::I64 ? in(2).idata[0] : in(2).data[0]) : 0;
    y.shape = x;
    if (n.op == Op::QuantizeLinear) {
      if (in(0).dtype != DType::F32)
        return make_error(where(n) + ": quantizes a non-float tensor");
      y.dtype = has(2) && in(2).dtype == DType::S8 ? DType::S8 : DType::U8;
      y.scale = scale;
      y.zero_point = zp;
    } else {
      if (in(0).dtype != DType::S8 && in(0).dtype != DType::U8)
        return make_error(where(n) + ": dequantizes a non-INT8 tensor");
      if (in(0).scale != scale || in(0).zero_point != zp)
        return make_error(where(n) +
                          ": scale differs from the QuantizeLinear that made the tensor");
      y.dtype = DType::F32;
    }
    return {};
  }
  case ShapeRule::Movement: {
    if (n.op == Op::Expand || n.op == Op::Tile) {
      if (!has(1) || !in(1).is_const || in(1).dtype != DType::I64)
        return make_error(where(n) + (n.op == Op::Expand ? ": the shape must be constant"
                                                         : ": repeats must be constant"));
      const auto &v = in(1).idata;
      if (n.op == Op::Expand) {
        auto s = broadcast(n, x, v);
        if (!s)
          return s.error();
        y.shape = s.value();
        if (y.shape.size() != x.size() || y.shape[0] != x[0])
          if (auto r = batch_axis_guard(g, n, {0}); !r)
            return r;
      } else {
        if (v.size() != x.size())
          return make_error(where(n) + ": repeats must have one value per dimension");
        y.shape = x;
        for (size_t d = 0; d < x.size(); ++d) {
          if (v[d] < 1)
            return make_error(where(n) + ": repeats must be positive");
          y.shape[d] = x[d] * v[d];
        }
        n.ints["repeats"] = v;
        if (v[0] != 1)
          if (auto r = batch_axis_guard(g, n, {0}); !r)
            return r;
      }
      n.inputs.resize(1);
      return {};
    }
    // DepthToSpace / SpaceToDepth of an NCHW tensor.
    const int64_t b = n.attr("blocksize", 0);
    if (x.size() != 4 || b < 1)
      return make_error(where(n) + ": needs an NCHW input and a positive blocksize");
    if (n.op == Op::DepthToSpace) {
      if (x[1] % (b * b))
        return make_error(where(n) + ": channels are not a multiple of blocksize^2");
      const std::string mode = n.strings.count("mode") ? n.strings["mode"] : "DCR";
      if (mode != "DCR" && mode != "CRD")
        return make_error(where(n) + ": mode '" + mode + "' is not supported");
      y.shape = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
    } else {
      if (x[2] % b || x[3] % b)
        return make_error(where(n) + ": H and W are not multiples of blocksize");
      y.shape = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
    }
    return {};
  }
  case ShapeRule::ConstantOnly:
    return make_error(where(n) + ": only supported on constants (shape arithmetic)");
  case ShapeRule::None: // expanded at import, or created by a pass
    break;
  }
  return make_error(where(n) + ": unsupported operator");
}

} // namespace

// MatMul with an operand of rank 3 or more (ONNX's batched product, batch dimensions
// broadcast as NumPy does) and a constant float B: every batch's product is one group of a
// grouped 1x1 convolution over A^T viewed as an image of M rows (channels G x K):
//   A [..., M, K] -> Expand to the broadcast batch (when A's differs) -> Reshape [G, M, K] ->
//   Transpose [G, K, M] -> Reshape [1, G*K, M, 1] -> Conv 1x1, group G, weights
//   W[g*N + o][k] = B[g][k][o] -> Reshape [G, N, M] -> Transpose [G, M, N] -> Reshape
//   [batch..., M, N]
// (strided whole-tensor copies around a convolution split over the clusters). Returns the
// nodes that replace `mm`, or none when it is not such a product.
Result<std::vector<Node>> batched_matmul(Graph &g, const Node &mm) {
  if (mm.op != Op::MatMul || mm.inputs.size() != 2 || mm.inputs[0] < 0 || mm.inputs[1] < 0 ||
      mm.outputs.size() != 1)
    return std::vector<Node>{};
  const Tensor &a = g.tensors[size_t(mm.inputs[0])], &b = g.tensors[size_t(mm.inputs[1])];
  if (a.is_const || a.shape.size() < 2 || b.shape.size() < 2 ||
      (a.shape.size() < 3 && b.shape.size() < 3))
    return std::vector<Node>{};
  if (!b.is_const)
    return std::vector<Node>{}; // a product of two activations (the Gemm shape rule)
  if (b.dtype != DType::F32 || int64_t(b.data.size()) != b.elements())
    return make_error(where(mm) + ": a batched product needs a float second operand");
  const std::vector<int64_t> a_batch(a.shape.begin(), a.shape.end() - 2),
      b_batch(b.shape.begin(), b.shape.end() - 2);
  auto batch = broadcast(mm, a_batch, b_batch);
  if (!batch)
    return batch.error();
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  if (b.shape[b.shape.size() - 2] != k)
    return make_error(where(mm) + ": inner dimensions differ (" + std::to_string(k) + " and " +
                      std::to_string(b.shape[b.shape.size() - 2]) + ")");
  const std::vector<int64_t> &bs = batch.value();
  // B varying along the first dimension of the output couples the product with axis 0.
  if (!g.whole_tensors && b_batch.size() == bs.size() && !bs.empty() && b_batch[0] != 1)
    return make_error(where(mm) + ": a batched product whose second operand varies along the "
                                  "first dimension (no batch of images)");
  int64_t groups = 1;
  for (int64_t d : bs)
    groups *= d;
  // Weights: group gi takes B's batch index gi maps to (broadcast dimensions of size 1 stay 0).
  std::vector<float> w(size_t(groups * n * k));
  for (int64_t gi = 0; gi < groups; ++gi) {
    int64_t rest = gi, offset = 0, stride = 1;
    for (size_t d = bs.size(); d-- > 0;) {
      const int64_t index = rest % bs[d];
      rest /= bs[d];
      const ptrdiff_t bd = ptrdiff_t(d) - ptrdiff_t(bs.size() - b_batch.size());
      if (bd >= 0) {
        offset += (b_batch[size_t(bd)] == 1 ? 0 : index) * stride;
        stride *= b_batch[size_t(bd)];
      }
    }
    for (int64_t o = 0; o < n; ++o)
      for (int64_t i = 0; i < k; ++i)
        w[size_t((gi * n + o) * k + i)] = b.data[size_t((offset * k + i) * n + o)];
  }
  const std::string name = mm.name;
  const int output = mm.outputs[0];
  auto shape_constant = [&](const std::string &suffix, std::vector<int64_t> dims) {
    Tensor t;
    t.name = name + "." + suffix;
    t.shape = {int64_t(dims.size())};
    t.is_const = true;
    t.dtype = DType::I64;
    t.idata = std::move(dims);
    return g.add_tensor(std::move(t));
  };
  std::vector<Node> parts;
  auto part = [&](Op op, const std::string &suffix, std::vector<int> inputs, int out = -1) {
    Node p;
    p.op = op;
    p.name = name + "." + suffix;
    p.inputs = std::move(inputs);
    if (out < 0) {
      Tensor t;
      t.name = p.name;
      out = g.add_tensor(std::move(t));
    }
    p.outputs = {out};
    parts.push_back(std::move(p));
    return out;
  };
  int x = mm.inputs[0];
  if (a_batch != bs) {
    std::vector<int64_t> full = bs;
    full.insert(full.end(), {m, k});
    x = part(Op::Expand, "a_broadcast", {x, shape_constant("a_shape", full)});
  }
  x = part(Op::Reshape, "a_groups", {x, shape_constant("groups_shape", {groups, m, k})});
  x = part(Op::Transpose, "a_t", {x});
  parts.back().ints["perm"] = {0, 2, 1};
  x = part(Op::Reshape, "as_image", {x, shape_constant("image_shape", {1, groups * k, m, 1})});
  Tensor weights;
  weights.name = name + ".weights";
  weights.shape = {groups * n, k, 1, 1};
  weights.is_const = true;
  weights.data = std::move(w);
  x = part(Op::Conv, "product", {x, g.add_tensor(std::move(weights))});
  Node &conv = parts.back();
  conv.ints["kernel_shape"] = {1, 1};
  conv.ints["strides"] = {1, 1};
  conv.ints["dilations"] = {1, 1};
  conv.ints["pads"] = {0, 0, 0, 0};
  conv.ints["group"] = {groups};
  x = part(Op::Reshape, "as_groups", {x, shape_constant("product_shape", {groups, n, m})});
  x = part(Op::Transpose, "y_t", {x});
  parts.back().ints["perm"] = {0, 2, 1};
  std::vector<int64_t> y_shape = bs;
  y_shape.insert(y_shape.end(), {m, n});
  part(Op::Reshape, "y", {x, shape_constant("y_shape", y_shape)}, output);
  return parts;
}

Result<void> infer_shapes(Graph &graph) {
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].dead)
      continue;
    auto batched = batched_matmul(graph, graph.nodes[i]);
    if (!batched)
      return batched.error();
    if (!batched.value().empty()) { // replaced in place, then inferred part by part
      auto &parts = batched.value();
      graph.nodes.erase(graph.nodes.begin() + ptrdiff_t(i));
      graph.nodes.insert(graph.nodes.begin() + ptrdiff_t(i), parts.begin(), parts.end());
      for (size_t j = 0; j < graph.nodes.size(); ++j)
        for (int o : graph.nodes[j].outputs)
          graph.tensors[size_t(o)].producer = int(j);
    }
    Node &n = graph.nodes[i];
    if (auto r = infer_node(graph, n); !r)
      return r;
    for (int o : n.outputs) {
      Tensor &t = graph.tensors[o];
      if (t.is_const)
        continue;
      if (std::count(t.shape.begin(), t.shape.end(), 0))
        return make_error(where(n) + ": output '" + t.name + "' is empty (zero elements)");
      if (t.elements() <= 0 || t.elements() > (1ll << 30))
        return make_error(where(n) + ": output '" + t.name +
                          "' has no static shape (dynamic shapes are not supported)");
      // A batch runs image by image: dimension 0 stays the image's.
      if (!graph.whole_tensors && (t.shape.empty() || t.shape[0] != 1))
        return make_error(where(n) + ": output '" + t.name +
                          "' has no static batch-1 shape (its first dimension is not the batch)");
    }
  }
  return {};
}

Result<Graph> import_onnx_bytes(const std::string &bytes) {
  // protobuf may throw on allocation failure: nothing escapes this function.
  try {
    onnx::ModelProto model;
    if (!model.ParseFromString(bytes))
      return make_error("not a valid ONNX model (protobuf parse failed)");
    // A batch of images first; a model that does not split along its first dimension (inputs
    // of other ranks or first dimensions, operators along axis 0) as whole tensors.
    auto batched = convert(model, true);
    if (batched || batched.error().message.find("model uses opset") != std::string::npos)
      return batched;
    auto whole = convert(model, false);
    if (whole)
      return whole;
    // Both fail: the batch's reason, unless it was about the batch itself.
    return batched.error().message.find("batch") != std::string::npos ? whole : batched;
  } catch (const std::exception &e) {
    return make_error(std::string("ONNX import failed: ") + e.what());
  }
}

Result<Graph> import_onnx_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return make_error("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  auto r = import_onnx_bytes(ss.str());
  if (!r)
    return make_error(path + ": " + r.error().message);
  return r;
}

} // namespace kann
