#include "kann/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "kann/passes.h"
#include "manycl/device/device.h"
#include "manycl/kbin_runner.h"

namespace kann::quantize {

using ir::DType;
using ir::Graph;
using ir::Node;
using ir::Op;
using ir::Tensor;
using manycl::make_error;
using manycl::Result;

namespace {

bool is_view(const Node &n) {
  return ir::op_has(n.op, ir::kView);
}

bool is_float_activation(const Tensor &t) {
  return !t.is_const && t.dtype == DType::F32;
}

// Range of one tensor over all samples: min/max, or percentiles of the collected values.
struct Collector {
  double percentile = 100.0;
  Range range;
  std::vector<float> values; // only with a percentile

  void add(const float *v, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i]))
        continue;
      if (!range.seen)
        range = {v[i], v[i], true};
      range.min = std::min(range.min, v[i]);
      range.max = std::max(range.max, v[i]);
    }
    if (percentile < 100.0)
      values.insert(values.end(), v, v + n);
  }
  Range result() {
    if (percentile >= 100.0 || values.empty() || !range.seen)
      return range;
    const size_t last = values.size() - 1;
    const auto at = [&](double fraction) {
      const size_t k = std::min(last, size_t(std::llround(fraction * double(last))));
      std::nth_element(values.begin(), values.begin() + ptrdiff_t(k), values.end());
      return values[k];
    };
    const double tail = (100.0 - percentile) / 100.0;
    return {at(tail), at(1.0 - tail), true};
  }
};

} // namespace

Result<std::vector<std::vector<std::vector<float>>>>
calibration_samples(const Graph &g, const std::vector<CalibrationSource> &sources) {
  if (sources.empty())
    return make_error("calibration: no samples");
  std::string names;
  for (int t : g.inputs)
    names += (names.empty() ? "'" : ", '") + g.tensors[t].name + "'";
  // Each input's values, its sources one after the other.
  std::vector<std::vector<float>> per_input(g.inputs.size());
  std::vector<std::string> origins(g.inputs.size());
  for (const CalibrationSource &src : sources) {
    size_t k = 0;
    if (src.input.empty()) {
      if (g.inputs.size() != 1)
        return make_error("calibration: '" + src.origin + "' names no input, and the model has " +
                          std::to_string(g.inputs.size()) + " (" + names +
                          "): give each input its samples as NAME=FILE.npy");
    } else {
      while (k < g.inputs.size() && g.tensors[g.inputs[k]].name != src.input)
        ++k;
      if (k == g.inputs.size())
        return make_error("calibration: '" + src.input + "' is not an input of the model (" +
                          names + ")");
    }
    const int64_t per_sample = g.tensors[g.inputs[k]].elements();
    if (src.values.empty() || src.values.size() % size_t(per_sample))
      return make_error(src.origin + ": " + std::to_string(src.values.size()) +
                        " values is not a whole number of samples of " +
                        std::to_string(per_sample) + " (input '" + g.tensors[g.inputs[k]].name +
                        "')");
    per_input[k].insert(per_input[k].end(), src.values.begin(), src.values.end());
    origins[k] = src.origin;
  }
  size_t count = 0;
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const size_t n = per_input[k].size() / size_t(g.tensors[g.inputs[k]].elements());
    if (n == 0)
      return make_error("calibration: no samples for input '" + g.tensors[g.inputs[k]].name +
                        "' (give each input its samples as NAME=FILE.npy)");
    if (k > 0 && n != count)
      return make_error("calibration: input '" + g.tensors[g.inputs[k]].name + "' has " +
                        std::to_string(n) + " samples, input '" + g.tensors[g.inputs[0]].name +
                        "' " + std::to_string(count) + " (every input needs as many)");
    count = n;
  }
  std::vector<std::vector<std::vector<float>>> samples(count);
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < g.inputs.size(); ++k) {
      const size_t e = size_t(g.tensors[g.inputs[k]].elements());
      samples[i].emplace_back(per_input[k].begin() + ptrdiff_t(i * e),
                              per_input[k].begin() + ptrdiff_t((i + 1) * e));
    }
  return samples;
}

Result<std::vector<Range>> calibrate(const Graph &g, const CompileOptions &options,
                                     const std::vector<std::vector<std::vector<float>>> &samples,
                                     const CalibrationOptions &calibration) {
  if (samples.empty())
    return make_error("calibration: no samples");
  if (!(calibration.percentile > 50.0 && calibration.percentile <= 100.0))
    return make_error("calibration: the percentile must be in (50, 100]");
  // Every float activation an operator writes becomes a network output (views share their
  // source's storage and so its range).
  // A view's source whose view is a network output is measured through the view (one
  // storage cannot be two outputs).
  Graph probe = g;
  std::set<int> measured_by_view;
  for (auto it = probe.nodes.rbegin(); it != probe.nodes.rend(); ++it)
    if (!it->dead && is_view(*it) &&
        (probe.is_output(it->outputs[0]) || measured_by_view.count(it->outputs[0])))
      measured_by_view.insert(it->inputs[0]);
  for (const Node &n : probe.nodes) {
    if (n.dead || is_view(n))
      continue;
    for (int o : n.outputs)
      if (is_float_activation(probe.tensors[o]) && !probe.is_output(o) &&
          !measured_by_view.count(o))
        probe.outputs.push_back(o);
  }
  CompileOptions float_options = options;
  float_options.precision = "fp32";
  auto compiled = compile_graph(probe, float_options);
  if (!compiled)
    return make_error("calibration: compiling the float graph failed: " + compiled.error().message);
  const auto &program = compiled.value().program;
  std::vector<Collector> collect(g.tensors.size());
  for (auto &c : collect)
    c.percentile = calibration.percentile;
  manycl::device::Device device(float_options.device);
  for (size_t s = 0; s < samples.size(); ++s) {
    if (samples[s].size() != g.inputs.size())
      return make_error("calibration sample " + std::to_string(s) + ": " +
                        std::to_string(samples[s].size()) + " inputs, the model has " +
                        std::to_string(g.inputs.size()));
    std::vector<std::vector<uint8_t>> args(program.arg_count);
    for (const auto &t : program.tensors) {
      if (t.role != KBIN_ROLE_INPUT)
        continue;
      const int tensor = probe.find(t.name);
      const auto at = std::find(g.inputs.begin(), g.inputs.end(), tensor);
      if (at == g.inputs.end())
        return make_error("calibration: program input '" + t.name + "' is not a model input");
      const auto &values = samples[s][size_t(at - g.inputs.begin())];
      if (values.size() * 4 != t.byte_size)
        return make_error("calibration sample " + std::to_string(s) + ": input '" + t.name +
                          "' has " + std::to_string(values.size()) + " values, the model needs " +
                          std::to_string(t.byte_size / 4));
      args[t.arg_index].resize(t.byte_size);
      std::memcpy(args[t.arg_index].data(), values.data(), t.byte_size);
      collect[size_t(tensor)].add(values.data(), values.size());
    }
    auto run = manycl::interp::run_kbin(device, program, args);
    if (!run)
      return make_error("calibration: running the float graph failed: " + run.error().message);
    for (const auto &t : program.tensors) {
      if (t.role != KBIN_ROLE_OUTPUT)
        continue;
      const int tensor = probe.find(t.name);
      if (tensor < 0)
        return make_error("calibration: program output '" + t.name + "' is not in the graph");
      const auto &bytes = run.value().outputs[t.arg_index];
      std::vector<float> values(bytes.size() / 4);
      std::memcpy(values.data(), bytes.data(), values.size() * 4);
      collect[size_t(tensor)].add(values.data(), values.size());
    }
  }
  std::vector<Range> ranges(g.tensors.size());
  for (size_t t = 0; t < ranges.size(); ++t)
    ranges[t] = collect[t].result();
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) // sources measured by views
    if (!it->dead && is_view(*it) && measured_by_view.count(it->inputs[0]))
      ranges[size_t(it->inputs[0])] = ranges[size_t(it->outputs[0])];
  for (const Node &n : g.nodes) // nodes are in topological order
    if (!n.dead && is_view(n))
      ranges[size_t(n.outputs[0])] = ranges[size_t(n.inputs[0])];
  return ranges;
}

int split_activations(Graph &g) {
  std::vector<Node> nodes;
  int count = 0;
  for (Node &n : g.nodes) {
    if (n.dead)
      continue;
    Node act;
    act.floats["alpha"] = n.act.alpha;
    bool split = true; // activations the INT8 products cannot apply themselves
    switch (n.act.kind) {
    case MCL_ACT_LEAKY_RELU:
      act.op = Op::LeakyRelu;
      break;
    case MCL_ACT_SIGMOID:
      act.op = Op::Sigmoid;
      break;
    case MCL_ACT_TANH:
      act.op = Op::Tanh;
      break;
    case MCL_ACT_HARD_SIGMOID:
      act.op = Op::HardSigmoid;
      act.floats["beta"] = n.act.beta;
      break;
    case MCL_ACT_HARD_SWISH:
      act.op = Op::HardSwish;
      break;
    case MCL_ACT_SILU:
      act.op = Op::Silu;
      break;
    default:
      split = false;
      break;
    }
    const bool product = n.op == Op::Conv || n.op == Op::Gemm || n.op == Op::MatMul;
    if (!product || !split) {
      nodes.push_back(std::move(n));
      continue;
    }
    Tensor pre = g.tensors[n.outputs[0]];
    pre.name += ".before_activation";
    const int pre_t = g.add_tensor(std::move(pre));
    act.name = n.name + ".activation";
    act.inputs = {pre_t};
    act.outputs = {n.outputs[0]};
    n.outputs[0] = pre_t;
    n.act = {MCL_ACT_NONE, 0.0f, 0.0f};
    nodes.push_back(std::move(n));
    nodes.push_back(std::move(act));
    ++count;
  }
  g.nodes = std::move(nodes);
  g.compact();
  return count;
}

namespace {

// Gemm (any transB, alpha) and MatMul with a constant [K,N] operand -> Gemm transB=1 with
// alpha folded: the weight layout of INT8 GEMMs ([N][K], per-output-channel scales on axis 0).
void normalize_gemm(Graph &g, Node &n) {
  const bool matmul = n.op == Op::MatMul;
  if (!matmul && n.op != Op::Gemm)
    return;
  const bool trans_b = !matmul && n.attr("transB", 0) != 0;
  const float alpha = matmul ? 1.0f : n.attrf("alpha", 1.0f);
  if (trans_b && alpha == 1.0f)
    return;
  const Tensor &b = g.tensors[n.inputs[1]];
  if (!b.is_const || b.shape.size() != 2 || b.data.empty())
    return;
  const int64_t rows = b.shape[0], cols = b.shape[1];
  Tensor w;
  w.name = b.name + ".nk";
  w.is_const = true;
  w.shape = trans_b ? b.shape : std::vector<int64_t>{cols, rows};
  w.data.resize(b.data.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = b.data[size_t(r * cols + c)] * alpha;
      w.data[trans_b ? size_t(r * cols + c) : size_t(c * rows + r)] = v;
    }
  const int wi = g.add_tensor(std::move(w));
  n.op = Op::Gemm;
  n.inputs[1] = wi;
  n.ints["transB"] = {1};
  n.floats["alpha"] = 1.0f;
}

bool clamp_activation(const Node &n) {
  return n.act.kind == MCL_ACT_NONE || n.act.kind == MCL_ACT_RELU || n.act.kind == MCL_ACT_CLIP;
}

// Operators with INT8 kernels (what lower_qdq_to_int8 lowers).
bool has_int8_kernel(const Graph &g, const Node &n) {
  if (n.dead)
    return false;
  if (n.op == Op::Conv ||
      (n.op == Op::Gemm && n.attr("transB", 0) == 1 && n.attrf("alpha", 1.0f) == 1.0f)) {
    const Tensor &w = g.tensors[n.inputs[1]];
    return clamp_activation(n) && w.is_const && !w.data.empty();
  }
  const ir::Lowering lowering = ir::op_info(n.op).lowering;
  if (lowering == ir::Lowering::Pool || lowering == ir::Lowering::GlobalPool || n.op == Op::Concat)
    return true;
  mcl_activation act; // an activation of an INT8 product: INT8 in and out
  if (passes::activation_of(g, n, act)) {
    const int producer = g.tensors[n.inputs[0]].producer;
    return producer >= 0 && g.nodes[producer].op != Op::Concat &&
           has_int8_kernel(g, g.nodes[producer]);
  }
  if (n.op == Op::Add && n.inputs.size() == 2) {
    const Tensor &a = g.tensors[n.inputs[0]], &b = g.tensors[n.inputs[1]];
    return !a.is_const && !b.is_const && a.shape == b.shape;
  }
  return false;
}

// Asymmetric uint8 quantization covering [min, max] and 0.
void choose_quantization(const Range &r, float &scale, int32_t &zero_point) {
  const double lo = std::min(0.0, double(r.min)), hi = std::max(0.0, double(r.max));
  scale = float((hi - lo) / 255.0);
  if (!(scale > 1e-12f)) {
    scale = 1.0f / 255.0f; // a constant-zero tensor: any scale represents it
    zero_point = 0;
    return;
  }
  zero_point = int32_t(std::clamp(std::nearbyint(-lo / double(scale)), 0.0, 255.0));
}

// Per-output-channel symmetric int8 weights ([cout][...] layout), zero points 0. A channel's
// scale stays >= min_scales[c] so that its int32 bias, bias / (x_scale * w_scale), fits.
int quantize_weights(Graph &g, int weight, const std::vector<float> &min_scales) {
  const Tensor &w = g.tensors[weight];
  Tensor q;
  q.name = w.name + ".int8";
  q.is_const = true;
  q.shape = w.shape;
  const size_t channels = size_t(w.shape[0]), per = w.data.size() / channels;
  q.data.resize(w.data.size());
  q.qvalues.resize(w.data.size());
  q.qzeros.assign(channels, 0);
  for (size_t c = 0; c < channels; ++c) {
    float peak = 0.0f;
    for (size_t k = 0; k < per; ++k)
      peak = std::max(peak, std::fabs(w.data[c * per + k]));
    const float scale = std::max(peak > 0.0f ? peak / 127.0f : 1.0f, min_scales[c]);
    q.qscales.push_back(scale);
    for (size_t k = 0; k < per; ++k) {
      const size_t i = c * per + k;
      q.qvalues[i] = int32_t(std::clamp(std::nearbyint(w.data[i] / scale), -127.0f, 127.0f));
      q.data[i] = float(q.qvalues[i]) * scale;
    }
  }
  return g.add_tensor(std::move(q));
}

int scalar_const(Graph &g, const std::string &name, DType dtype, float value) {
  Tensor t;
  t.name = name;
  t.is_const = true;
  t.dtype = dtype;
  t.shape = {};
  t.data = {value};
  return g.add_tensor(std::move(t));
}

} // namespace

Result<int> quantize_int8(Graph &g, const std::vector<Range> &ranges_in) {
  if (ranges_in.size() > g.tensors.size())
    return make_error("quantize: ranges do not belong to this graph");
  for (const Node &n : g.nodes)
    if (!n.dead &&
        (n.ints.count("int8") || n.op == Op::QuantizeLinear || n.op == Op::DequantizeLinear))
      return make_error("quantize: the model is already quantized (QDQ); compile it without "
                        "--calibration");
  for (Node &n : g.nodes)
    if (!n.dead && clamp_activation(n))
      normalize_gemm(g, n);
  std::vector<Range> ranges = ranges_in;
  ranges.resize(g.tensors.size());

  // Tensors read or written by INT8 kernels get quantized (views: their source decides).
  std::vector<char> quantized(g.tensors.size(), 0);
  for (const Node &n : g.nodes) {
    if (!has_int8_kernel(g, n))
      continue;
    std::vector<int> acts = {n.outputs[0]};
    for (int i : n.inputs)
      if (i >= 0 && (n.op == Op::Add || n.op == Op::Concat || i == n.inputs[0]))
        acts.push_back(i);
    for (int t : acts)
      if (is_float_activation(g.tensors[t]))
        quantized[size_t(t)] = 1;
  }
  for (size_t t = 0; t < quantized.size(); ++t)
    if (quantized[t] && !ranges[t].seen)
      return make_error("quantize: no calibration range for tensor '" + g.tensors[t].name + "'");
  // A concat's inputs read only by it share its quantization (its buffer is written in place,
  // no requantizing copies); max pooling keeps its input's quantization (no requantization).
  for (const Node &n : g.nodes) {
    if (n.dead || n.op != Op::Concat)
      continue;
    for (int i : n.inputs)
      if (g.consumers(i).size() == 1 && !g.is_output(i))
        ranges[size_t(i)] = ranges[size_t(n.outputs[0])];
  }
  for (const Node &n : g.nodes)
    if (!n.dead && ir::op_has(n.op, ir::kMaxReduction))
      ranges[size_t(n.outputs[0])] = ranges[size_t(n.inputs[0])];
  for (const Node &n : g.nodes) // views carry their source's quantization
    if (!n.dead && is_view(n))
      ranges[size_t(n.outputs[0])] = ranges[size_t(n.inputs[0])];

  // Weights: per-output-channel int8.
  for (Node &n : g.nodes) {
    if (!has_int8_kernel(g, n) || (n.op != Op::Conv && n.op != Op::Gemm))
      continue;
    float x_scale;
    int32_t x_zero_point;
    choose_quantization(ranges[size_t(n.inputs[0])], x_scale, x_zero_point);
    const int64_t channels = g.tensors[n.inputs[1]].shape[0];
    std::vector<float> min_scales(size_t(channels), 0.0f);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const auto &bias = g.tensors[n.inputs[2]].data;
      const float beta = n.op == Op::Gemm ? n.attrf("beta", 1.0f) : 1.0f;
      for (int64_t c = 0; c < channels; ++c)
        min_scales[size_t(c)] =
            std::fabs(bias[bias.size() == 1 ? 0 : size_t(c)] * beta) / (x_scale * 0x1p30f);
    }
    n.inputs[1] = quantize_weights(g, n.inputs[1], min_scales);
  }

  // t -> QuantizeLinear -> t.q (uint8) -> DequantizeLinear -> t.dq, read by t's readers.
  std::map<int, int> replacement;
  std::set<size_t> pair_quantizers; // indices in `nodes` of the pairs' QuantizeLinear
  auto pair = [&](int t, std::vector<Node> &out) {
    float scale;
    int32_t zero_point;
    choose_quantization(ranges[size_t(t)], scale, zero_point);
    const std::string base = g.tensors[t].name;
    const int s = scalar_const(g, base + ".scale", DType::F32, scale);
    const int z = scalar_const(g, base + ".zero_point", DType::U8, float(zero_point));
    Tensor q = g.tensors[t];
    q.name = base + ".quantized";
    q.dtype = DType::U8;
    q.scale = scale;
    q.zero_point = zero_point;
    q.producer = -1;
    const int qi = g.add_tensor(std::move(q));
    Tensor d = g.tensors[t];
    d.name = base + ".dequantized";
    d.producer = -1;
    const int di = g.add_tensor(std::move(d));
    Node qn;
    qn.name = base + ".quantize";
    qn.op = Op::QuantizeLinear;
    qn.inputs = {t, s, z};
    qn.outputs = {qi};
    Node dn;
    dn.name = base + ".dequantize";
    dn.op = Op::DequantizeLinear;
    dn.inputs = {qi, s, z};
    dn.outputs = {di};
    pair_quantizers.insert(out.size());
    out.push_back(std::move(qn));
    out.push_back(std::move(dn));
    replacement[t] = di;
  };
  std::vector<Node> nodes;
  for (int t : g.inputs)
    if (quantized[size_t(t)])
      pair(t, nodes);
  for (Node &n : g.nodes) {
    if (n.dead)
      continue;
    const std::vector<int> outs = n.outputs;
    nodes.push_back(std::move(n));
    for (int o : outs)
      if (quantized[size_t(o)])
        pair(o, nodes);
  }
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (pair_quantizers.count(k))
      continue; // the pair's own QuantizeLinear reads the float tensor
    for (int &i : nodes[k].inputs)
      if (i >= 0 && replacement.count(i))
        i = replacement[i];
  }
  for (int &o : g.outputs) {
    auto it = replacement.find(o);
    if (it == replacement.end())
      continue;
    // The network output keeps its name: it is now the dequantized tensor.
    std::swap(g.tensors[o].name, g.tensors[it->second].name);
    o = it->second;
  }
  g.nodes = std::move(nodes);
  g.compact();
  passes::lower_qdq_to_int8(g);
  int count = 0;
  for (const Node &n : g.nodes)
    count += !n.dead && n.ints.count("int8");
  return count;
}

} // namespace kann::quantize
