#include "kann/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

namespace kann::passes {

using ir::Graph;
using ir::Node;
using ir::Op;
using ir::Tensor;

namespace {

void replace_uses(Graph &g, int from, int to) {
  for (Node &n : g.nodes)
    if (!n.dead)
      std::replace(n.inputs.begin(), n.inputs.end(), from, to);
  std::replace(g.outputs.begin(), g.outputs.end(), from, to);
}

// The single live consumer of tensor t, or -1 (none, several, or t is a network output).
int only_consumer(const Graph &g, int t) {
  if (g.is_output(t))
    return -1;
  auto c = g.consumers(t);
  return c.size() == 1 ? c[0] : -1;
}

int new_const(Graph &g, const std::string &name, std::vector<int64_t> shape,
              std::vector<float> data) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.is_const = true;
  t.data = std::move(data);
  return g.add_tensor(std::move(t));
}

// Per-channel values of a constant broadcast against an NCHW (or [1,C]) tensor with C
// channels: shapes [C], [C,1,1], [1,C,1,1], [1,C] or a scalar. Empty if not per-channel.
std::vector<float> per_channel(const Tensor &k, int64_t channels, size_t rank) {
  if (!k.is_const || k.dtype != ir::DType::F32)
    return {};
  if (k.elements() == 1)
    return std::vector<float>(channels, k.data[0]);
  if (k.elements() != channels)
    return {};
  // The channel axis of the broadcast shape must be axis 1 of the activation.
  std::vector<int64_t> s = k.shape;
  while (s.size() < rank)
    s.insert(s.begin(), 1);
  if (s.size() != rank || s[1] != channels)
    return {};
  return k.data;
}

} // namespace

int remove_identities(Graph &g) {
  int count = 0;
  for (Node &n : g.nodes) {
    if (n.dead)
      continue;
    const bool identity = ir::op_has(n.op, ir::kIdentity) ||
                          (n.op == Op::Cast && g.tensors[n.inputs[0]].dtype == ir::DType::F32);
    if (!identity)
      continue;
    int in = n.inputs[0], out = n.outputs[0];
    if (g.is_output(out) && (g.tensors[in].producer < 0 || g.is_output(in)))
      continue; // would make an input (or another output) the output: keep the copy
    n.dead = true;
    if (g.is_output(out))
      g.tensors[in].name = g.tensors[out].name; // keep the network's output name
    replace_uses(g, out, in);
    ++count;
  }
  g.compact();
  return count;
}

// Zero padding of H and W (Pad, mode constant, value 0): nothing when every pad is 0,
// otherwise added to the pads of the one consumer that pads with zeros itself (a Conv, or an
// AveragePool counting the padding). Other pads stay: strided copies (lower_layout.cpp).
int fold_pads(Graph &g) {
  int count = 0;
  for (Node &n : g.nodes) {
    if (n.dead || n.op != Op::Pad)
      continue;
    const auto pads = n.attrs("pads"); // begins then ends, one per dimension
    const int in = n.inputs[0], out = n.outputs[0];
    if (std::all_of(pads.begin(), pads.end(), [](int64_t v) { return v == 0; })) {
      n.op = Op::Identity;
      ++count;
      continue;
    }
    // Only zero padding of H and W of an image folds (other pads: lower_layout.cpp).
    const bool zeros = (!n.strings.count("mode") || n.strings.at("mode") == "constant") &&
                       (!n.floats.count("value") || n.floats.at("value") == 0.0f);
    if (!zeros || pads.size() != 8 || pads[0] || pads[1] || pads[4] || pads[5] ||
        g.tensors[in].shape.size() != 4 || g.tensors[in].shape[0] != 1)
      continue;
    const int c = only_consumer(g, out);
    if (c < 0)
      continue;
    Node &k = g.nodes[c];
    const bool zero_padding_consumer =
        (k.op == Op::Conv || (k.op == Op::AveragePool && k.attr("count_include_pad", 0) == 1)) &&
        k.inputs[0] == out;
    if (!zero_padding_consumer)
      continue;
    auto kp = k.attrs("pads", {0, 0, 0, 0});
    kp[0] += pads[2], kp[1] += pads[3], kp[2] += pads[6], kp[3] += pads[7];
    k.ints["pads"] = kp;
    k.inputs[0] = in;
    n.dead = true;
    ++count;
  }
  if (count)
    remove_identities(g);
  return count;
}

// Reshape [1,C,H,W] -> [1,G,C/G,H,W], Transpose perm [0,2,1,3,4], Reshape -> [1,C,H,W]
// (ShuffleNet's channel shuffle) becomes one ChannelShuffle node with ints["group"] = {G}:
// output channel b*G + a is input channel a*(C/G) + b.
int fuse_channel_shuffles(Graph &g) {
  int count = 0;
  for (Node &t : g.nodes) {
    if (t.dead || t.op != Op::Transpose || t.attrs("perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
      continue;
    const int mid = t.inputs[0];
    const int r1 = g.tensors[mid].producer, r2 = only_consumer(g, t.outputs[0]);
    if (r1 < 0 || r2 < 0 || only_consumer(g, mid) < 0)
      continue;
    Node &a = g.nodes[r1], &b = g.nodes[r2];
    if (a.dead || b.dead || a.op != Op::Reshape || b.op != Op::Reshape)
      continue;
    const auto &x = g.tensors[a.inputs[0]].shape, &v = g.tensors[mid].shape,
               &y = g.tensors[b.outputs[0]].shape;
    if (x.size() != 4 || v.size() != 5 || x != y || v[0] != x[0] || v[1] * v[2] != x[1] ||
        v[3] != x[2] || v[4] != x[3])
      continue;
    b.op = Op::ChannelShuffle;
    b.inputs = {a.inputs[0]};
    b.ints["group"] = {v[1]};
    t.dead = true;
    if (g.consumers(a.outputs[0]).empty() && !g.is_output(a.outputs[0]))
      a.dead = true;
    ++count;
  }
  if (count)
    g.compact();
  return count;
}

int fold_batchnorm(Graph &g) {
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node &n = g.nodes[i];
    if (n.dead)
      continue;
    // x (op) constant, or constant (op) x for Add, Mul and Sub.
    const bool constant_first = (n.op == Op::Mul || n.op == Op::Add || n.op == Op::Sub) &&
                                n.inputs.size() == 2 && g.tensors[n.inputs[0]].is_const &&
                                !g.tensors[n.inputs[1]].is_const;
    const int xi = n.inputs[constant_first ? 1 : 0];
    const Tensor &x = g.tensors[xi];
    if (x.is_const || x.shape.empty())
      continue;
    // The storage's channels are dimension 1 of an image [1,C,H,W] or a vector [1,C]; other
    // tensors are stored row-major with one channel (tiler/plan.cpp): only a scalar folds.
    const bool channel_storage = (x.shape.size() == 4 || x.shape.size() == 2) && x.shape[0] == 1;
    const int64_t channels = channel_storage ? x.shape[1] : 1;
    std::vector<float> scale, shift;
    if (n.op == Op::BatchNormalization) {
      if (!channel_storage)
        continue;
      const float eps = n.attrf("epsilon", 1e-5f);
      const auto &gamma = g.tensors[n.inputs[1]].data, &beta = g.tensors[n.inputs[2]].data;
      const auto &mean = g.tensors[n.inputs[3]].data, &var = g.tensors[n.inputs[4]].data;
      for (int64_t c = 0; c < channels; ++c) {
        float s = gamma[c] / std::sqrt(var[c] + eps);
        scale.push_back(s);
        shift.push_back(beta[c] - mean[c] * s);
      }
    } else if ((n.op == Op::Mul || n.op == Op::Add || n.op == Op::Sub || n.op == Op::Div) &&
               n.inputs.size() == 2) {
      const Tensor &k = g.tensors[n.inputs[constant_first ? 0 : 1]];
      std::vector<float> v = per_channel(k, channels, x.shape.size());
      if (v.empty() || g.tensors[n.outputs[0]].shape != x.shape)
        continue;
      scale.assign(channels, 1.0f);
      shift.assign(channels, 0.0f);
      if (n.op == Op::Mul) {
        scale = v;
      } else if (n.op == Op::Div) { // x / k as x * (1/k): within a rounding of the quotient
        for (int64_t c = 0; c < channels; ++c)
          scale[c] = 1.0f / v[c];
      } else if (n.op == Op::Sub && constant_first) { // k - x
        for (int64_t c = 0; c < channels; ++c)
          scale[c] = -1.0f, shift[c] = v[c];
      } else {
        for (int64_t c = 0; c < channels; ++c)
          shift[c] = n.op == Op::Add ? v[c] : -v[c];
      }
    } else {
      continue;
    }
    // Fold into the producing Conv / Gemm when this node is its only reader.
    const int producer = x.producer;
    Node *p = producer >= 0 ? &g.nodes[producer] : nullptr;
    const bool foldable = p && !p->dead && (p->op == Op::Conv || p->op == Op::Gemm) &&
                          p->act.kind == MCL_ACT_NONE && only_consumer(g, xi) == int(i) &&
                          !(p->op == Op::Gemm && p->attr("transB", 0) == 0);
    if (foldable) {
      const Tensor &w = g.tensors[p->inputs[1]];
      std::vector<float> wd = w.data;
      const size_t per_out = wd.size() / channels; // Conv [M,...], Gemm transB [N,K]
      for (int64_t c = 0; c < channels; ++c)
        for (size_t j = 0; j < per_out; ++j)
          wd[c * per_out + j] *= scale[c];
      std::vector<float> bias(channels, 0.0f);
      if (p->inputs.size() > 2 && p->inputs[2] >= 0) {
        const Tensor &b = g.tensors[p->inputs[2]];
        for (int64_t c = 0; c < channels; ++c)
          bias[c] =
              b.data[b.data.size() == 1 ? 0 : c] * (p->op == Op::Gemm ? p->attrf("beta", 1) : 1);
        if (p->op == Op::Gemm)
          p->floats["beta"] = 1.0f;
      }
      for (int64_t c = 0; c < channels; ++c)
        bias[c] = bias[c] * scale[c] + shift[c];
      std::vector<int64_t> wshape = w.shape;
      const std::string base = p->name;
      p = &g.nodes[producer]; // new_const may not move nodes, but keep it explicit
      p->inputs[1] = new_const(g, base + ".w_folded", wshape, std::move(wd));
      const int b = new_const(g, base + ".b_folded", {channels}, std::move(bias));
      if (p->inputs.size() < 3)
        p->inputs.resize(3, -1);
      p->inputs[2] = b;
      Node &self = g.nodes[i];
      self.dead = true;
      const int out = self.outputs[0];
      g.tensors[out].producer = producer;
      g.nodes[producer].outputs[0] = out;
    } else {
      Node &self = g.nodes[i];
      self.op = Op::ScaleShift;
      const int s = new_const(g, self.name + ".scale", {channels}, scale);
      const int t = new_const(g, self.name + ".shift", {channels}, shift);
      g.nodes[i].inputs = {xi, s, t};
    }
    ++count;
  }
  g.compact();
  return count;
}

bool activation_of(const Graph &g, const Node &n, mcl_activation &act) {
  act = {MCL_ACT_NONE, 0.0f, 0.0f};
  if (n.op == Op::Relu) {
    act.kind = MCL_ACT_RELU;
  } else if (n.op == Op::Clip) {
    act.kind = MCL_ACT_CLIP;
    act.alpha = n.attrf("min", -std::numeric_limits<float>::max());
    act.beta = n.attrf("max", std::numeric_limits<float>::max());
    if (n.inputs.size() > 1 && n.inputs[1] >= 0)
      act.alpha = g.tensors[n.inputs[1]].data.at(0);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0)
      act.beta = g.tensors[n.inputs[2]].data.at(0);
  } else if (n.op == Op::LeakyRelu || n.op == Op::PRelu) { // PRelu: its one slope (import)
    act.kind = MCL_ACT_LEAKY_RELU;
    act.alpha = n.attrf("alpha", 0.01f);
  } else if (n.op == Op::Sigmoid) {
    act.kind = MCL_ACT_SIGMOID;
  } else if (n.op == Op::Tanh) {
    act.kind = MCL_ACT_TANH;
  } else if (n.op == Op::HardSigmoid) {
    act.kind = MCL_ACT_HARD_SIGMOID;
    act.alpha = n.attrf("alpha", 0.2f);
    act.beta = n.attrf("beta", 0.5f);
  } else if (n.op == Op::HardSwish) {
    act.kind = MCL_ACT_HARD_SWISH;
  } else if (n.op == Op::Silu) {
    act.kind = MCL_ACT_SILU;
  } else {
    return false;
  }
  return true;
}

int fuse_gated_activations(Graph &g) {
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node &m = g.nodes[i];
    if (m.dead || m.op != Op::Mul || m.inputs.size() != 2 || m.act.kind != MCL_ACT_NONE)
      continue;
    for (int k = 0; k < 2; ++k) {
      const int x = m.inputs[size_t(k)], gate = m.inputs[size_t(1 - k)];
      const int h = g.tensors[gate].producer;
      if (h < 0 || g.tensors[x].is_const || only_consumer(g, gate) != int(i))
        continue;
      Node &hs = g.nodes[h];
      // HardSwish's own constants (the native activation uses exactly these floats).
      const bool hard_swish = hs.op == Op::HardSigmoid && hs.attrf("alpha", 0.2f) == 1.0f / 6.0f &&
                              hs.attrf("beta", 0.5f) == 0.5f;
      if (hs.dead || !(hard_swish || hs.op == Op::Sigmoid) || hs.inputs[0] != x ||
          g.tensors[x].shape != g.tensors[m.outputs[0]].shape)
        continue;
      m.op = hard_swish ? Op::HardSwish : Op::Silu;
      m.inputs = {x};
      m.floats.clear();
      hs.dead = true;
      ++count;
      break;
    }
  }
  if (count)
    g.compact();
  return count;
}

int fuse_activations(Graph &g) {
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node &n = g.nodes[i];
    mcl_activation act;
    if (n.dead || !activation_of(g, n, act))
      continue;
    const int x = n.inputs[0];
    const int producer = g.tensors[x].producer;
    if (producer < 0 || only_consumer(g, x) != int(i))
      continue;
    Node &p = g.nodes[producer];
    // An element-wise producer takes the activation only between two activations (with a
    // constant operand it becomes a ScaleShift, which takes it then).
    const bool eltwise = ir::op_info(p.op).lowering == ir::Lowering::Eltwise;
    const bool takes_activation =
        ir::op_has(p.op, ir::kFusesActivation) &&
        (!eltwise || (!g.tensors[p.inputs[1]].is_const && !g.tensors[p.inputs[0]].is_const));
    if (p.dead || p.act.kind != MCL_ACT_NONE || !takes_activation)
      continue;
    p.act = act;
    const int out = n.outputs[0];
    p.outputs[0] = out;
    g.tensors[out].producer = producer;
    n.dead = true;
    ++count;
  }
  g.compact();
  return count;
}

int fuse_residual_adds(Graph &g) {
  const auto float_type = [](ir::DType t) { return t == ir::DType::F32 || t == ir::DType::F16; };
  int count = 0;
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    Node &add = g.nodes[ai];
    if (add.dead || !ir::op_has(add.op, ir::kResidualAdd) || add.ints.count("int8") ||
        add.inputs.size() != 2 || add.inputs[0] == add.inputs[1])
      continue;
    const Tensor &sum = g.tensors[add.outputs[0]];
    bool operands_ok = float_type(sum.dtype);
    for (int x : add.inputs) // no broadcast, no constant, no conversion
      operands_ok = operands_ok && !g.tensors[x].is_const && g.tensors[x].shape == sum.shape &&
                    g.tensors[x].dtype == sum.dtype;
    if (!operands_ok)
      continue;
    // Of the operands a convolution produces for this Add alone, the later one takes the
    // other as its residual: that one is computed by then in most graphs (a ResNet
    // downsampling block's two convolutions).
    int conv_slot = -1;
    for (int k = 0; k < 2; ++k) {
      const int x = add.inputs[size_t(k)], p = g.tensors[x].producer;
      if (p < 0 || only_consumer(g, x) != int(ai))
        continue;
      const Node &conv = g.nodes[size_t(p)];
      if (conv.dead || !ir::op_has(conv.op, ir::kTakesResidual) || conv.ints.count("int8") ||
          conv.act.kind != MCL_ACT_NONE || conv.inputs.size() > 3 || conv.outputs[0] != x)
        continue;
      if (conv_slot < 0 || p > g.tensors[add.inputs[size_t(conv_slot)]].producer)
        conv_slot = k;
    }
    if (conv_slot < 0)
      continue;
    const int conv_index = g.tensors[add.inputs[size_t(conv_slot)]].producer;
    const int residual = add.inputs[size_t(1 - conv_slot)];
    Node fused = g.nodes[size_t(conv_index)];
    fused.inputs.resize(3, -1); // [X, W, B or -1, residual]
    fused.inputs.push_back(residual);
    fused.outputs = add.outputs;
    fused.act = add.act;
    // It runs where the convolution ran, or where the Add ran when the residual is produced
    // after the convolution (the node order is the execution order).
    const int residual_producer = g.tensors[residual].producer;
    const size_t at = residual_producer > conv_index ? ai : size_t(conv_index);
    g.nodes[size_t(conv_index)].dead = true;
    add.dead = true;
    g.nodes[at] = std::move(fused);
    g.nodes[at].dead = false;
    g.tensors[g.nodes[at].outputs[0]].producer = int(at);
    ++count;
  }
  if (count)
    g.compact();
  return count;
}

uint16_t float_to_half(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = (f >> 16) & 0x8000u;
  const int32_t exponent = int32_t((f >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = f & 0x7fffffu;
  if (((f >> 23) & 0xff) == 0xff) // inf / nan
    return uint16_t(sign | 0x7c00u | (mantissa ? 0x200u : 0));
  if (exponent >= 31)
    return uint16_t(sign | 0x7c00u); // overflow: infinity
  if (exponent <= 0) {               // subnormal or zero
    if (exponent < -10)
      return uint16_t(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half; // may carry into the exponent: still the correctly rounded value
  return uint16_t(half);
}

int convert_to_fp16(Graph &g, const std::set<std::string> &fp32_nodes) {
  int count = 0;
  const auto is_float_activation = [&](int t) {
    return t >= 0 && !g.tensors[t].is_const &&
           (g.tensors[t].dtype == ir::DType::F32 || g.tensors[t].dtype == ir::DType::F16);
  };
  // One converted copy per (tensor, type), made before its first reader.
  std::map<std::pair<int, ir::DType>, int> converted;
  const auto convert = [&](int t, ir::DType to, std::vector<Node> &out) {
    auto [it, fresh] = converted.try_emplace({t, to}, -1);
    if (!fresh)
      return it->second;
    Tensor c = g.tensors[t];
    const char *suffix = to == ir::DType::F16 ? ".f16" : ".f32";
    c.name += suffix;
    c.dtype = to;
    const int ct = g.add_tensor(std::move(c));
    Node n;
    n.name = g.tensors[t].name + (to == ir::DType::F16 ? ".to_f16" : ".to_f32");
    n.op = Op::Convert;
    n.inputs = {t};
    n.outputs = {ct};
    out.push_back(std::move(n));
    ++count;
    return it->second = ct;
  };
  // Network inputs stay float32 in DDR; their binary16 copies are made first (the prologue).
  std::vector<Node> nodes;
  for (int x : g.inputs) {
    g.tensors[x].dtype = ir::DType::F32;
    const auto readers = g.consumers(x);
    if (std::any_of(readers.begin(), readers.end(),
                    [&](int r) { return !fp32_nodes.count(g.nodes[r].name); }))
      convert(x, ir::DType::F16, nodes);
  }
  // Every operator computes in one type: binary16 unless named in fp32_nodes; an input of the
  // other type is read through a conversion. A view keeps the type of the operator that
  // produced its source (a network input's views are binary16 unless named).
  const auto is_input = [&](int t) {
    return std::find(g.inputs.begin(), g.inputs.end(), t) != g.inputs.end();
  };
  for (Node &n : g.nodes) {
    if (n.dead) {
      nodes.push_back(std::move(n));
      continue;
    }
    ir::DType type = fp32_nodes.count(n.name) ? ir::DType::F32 : ir::DType::F16;
    if (ir::op_has(n.op, ir::kView) && !fp32_nodes.count(n.name) && !is_input(n.inputs[0]) &&
        is_float_activation(n.inputs[0]))
      type = g.tensors[n.inputs[0]].dtype;
    for (int &i : n.inputs)
      if (is_float_activation(i) && g.tensors[i].dtype != type)
        i = convert(i, type, nodes);
    for (int o : n.outputs)
      if (is_float_activation(o))
        g.tensors[o].dtype = type;
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  g.compact();
  // Outputs: a binary16 producer writes y.f16, and Convert writes y (float32).
  for (int &y : g.outputs) {
    if (g.tensors[y].dtype != ir::DType::F16)
      continue; // computed in float32, or an input passed through
    Tensor h = g.tensors[y];
    h.name += ".f16";
    const int hy = g.add_tensor(std::move(h));
    for (Node &n : g.nodes) {
      std::replace(n.outputs.begin(), n.outputs.end(), y, hy);
      std::replace(n.inputs.begin(), n.inputs.end(), y, hy);
    }
    g.tensors[y].dtype = ir::DType::F32;
    Node c;
    c.name = g.tensors[y].name + ".to_f32";
    c.op = Op::Convert;
    c.inputs = {hy};
    c.outputs = {y};
    g.nodes.push_back(std::move(c));
    ++count;
  }
  g.compact();
  return count;
}

namespace {

bool same_quantization(const Tensor &a, const Tensor &b) {
  return a.dtype == b.dtype && a.scale == b.scale && a.zero_point == b.zero_point;
}

// A view (Flatten / Reshape) between DequantizeLinear(q) and a QuantizeLinear of the same
// scale and zero point views q itself: no dequantize / quantize copies.
int views_on_int8(Graph &g) {
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node &v = g.nodes[i];
    if (v.dead || (v.op != Op::Flatten && v.op != Op::Reshape))
      continue;
    const int xd = v.inputs[0];
    const int dq = g.tensors[xd].producer;
    if (dq < 0 || g.nodes[dq].op != Op::DequantizeLinear)
      continue;
    const int q = only_consumer(g, v.outputs[0]);
    if (q < 0 || g.nodes[q].op != Op::QuantizeLinear || g.nodes[q].inputs[0] != v.outputs[0])
      continue;
    const int xq = g.nodes[dq].inputs[0], yq = g.nodes[q].outputs[0];
    if (!same_quantization(g.tensors[xq], g.tensors[yq]))
      continue;
    v.inputs[0] = xq;
    v.outputs[0] = yq;
    g.tensors[yq].producer = int(i);
    g.nodes[q].dead = true;
    if (g.consumers(xd).empty() && !g.is_output(xd))
      g.nodes[dq].dead = true;
    ++count;
  }
  g.compact();
  return count;
}

} // namespace

int lower_qdq_to_int8(Graph &g) {
  int count = views_on_int8(g);
  auto is_int8 = [&](int t) {
    return t >= 0 && (g.tensors[t].dtype == ir::DType::S8 || g.tensors[t].dtype == ir::DType::U8);
  };
  // The quantized tensor a DequantizeLinear output comes from, or -1.
  auto dequantized = [&](int t) {
    const int dq = t >= 0 ? g.tensors[t].producer : -1;
    if (dq < 0 || g.nodes[dq].op != Op::DequantizeLinear || !is_int8(g.nodes[dq].inputs[0]))
      return -1;
    return g.nodes[dq].inputs[0];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node &n = g.nodes[i];
    if (n.dead)
      continue;
    // Element-wise Add and channel Concat of dequantized tensors: requantizing kernels on the
    // INT8 operands (each input with its own scale and zero point).
    const bool add = n.op == Op::Add && n.inputs.size() == 2, concat = n.op == Op::Concat;
    if (add || concat) {
      const int y = n.outputs[0];
      const int q = only_consumer(g, y);
      if (q < 0 || g.nodes[q].op != Op::QuantizeLinear || g.nodes[q].inputs[0] != y)
        continue;
      const int yq = g.nodes[q].outputs[0];
      std::vector<int> sources;
      for (int x : n.inputs) {
        const int xq = dequantized(x);
        if (xq < 0 || g.tensors[xq].dtype != g.tensors[yq].dtype ||
            g.tensors[x].shape != g.tensors[xq].shape)
          break;
        sources.push_back(xq);
      }
      if (sources.size() != n.inputs.size() ||
          (add && g.tensors[n.inputs[0]].shape != g.tensors[n.inputs[1]].shape))
        continue;
      const std::vector<int> dequantized_inputs = n.inputs;
      n.inputs = sources;
      n.outputs[0] = yq;
      g.tensors[yq].producer = int(i);
      g.nodes[q].dead = true;
      n.ints["int8"] = {1};
      for (int xd : dequantized_inputs)
        if (g.consumers(xd).empty() && !g.is_output(xd))
          g.nodes[g.tensors[xd].producer].dead = true;
      ++count;
      continue;
    }
    // An activation between DequantizeLinear and QuantizeLinear: computed on the dequantized
    // values by the native activation function, INT8 in and out (LeakyReLU, Sigmoid, ...).
    mcl_activation unary;
    if (activation_of(g, n, unary) && n.act.kind == MCL_ACT_NONE) {
      const int xq = dequantized(n.inputs[0]);
      const int y = n.outputs[0];
      const int q = only_consumer(g, y);
      if (xq < 0 || q < 0 || g.nodes[q].op != Op::QuantizeLinear || g.nodes[q].inputs[0] != y)
        continue;
      const int xd = n.inputs[0], yq = g.nodes[q].outputs[0];
      n.inputs[0] = xq;
      n.outputs[0] = yq;
      g.tensors[yq].producer = int(i);
      g.nodes[q].dead = true;
      n.ints["int8"] = {1};
      if (g.consumers(xd).empty() && !g.is_output(xd))
        g.nodes[g.tensors[xd].producer].dead = true;
      ++count;
      continue;
    }
    const bool conv = n.op == Op::Conv, gemm = n.op == Op::Gemm && n.attr("transB", 0) == 1,
               pool = ir::op_info(n.op).lowering == ir::Lowering::Pool ||
                      ir::op_info(n.op).lowering == ir::Lowering::GlobalPool;
    if (!conv && !gemm && !pool)
      continue;
    if (n.act.kind != MCL_ACT_NONE && n.act.kind != MCL_ACT_RELU && n.act.kind != MCL_ACT_CLIP)
      continue;
    const int xd = n.inputs[0];
    const int dq = g.tensors[xd].producer;
    if (dq < 0 || g.nodes[dq].op != Op::DequantizeLinear || !is_int8(g.nodes[dq].inputs[0]))
      continue;
    if (conv || gemm) {
      const Tensor &w = g.tensors[n.inputs[1]];
      if (w.qvalues.empty() || (gemm && n.attrf("alpha", 1.0f) != 1.0f))
        continue;
    }
    const int y = n.outputs[0];
    const int q = only_consumer(g, y);
    if (q < 0 || g.nodes[q].op != Op::QuantizeLinear || g.nodes[q].inputs[0] != y)
      continue;
    const int yq = g.nodes[q].outputs[0];
    const int xq = g.nodes[dq].inputs[0];
    if (pool && ir::op_has(n.op, ir::kMaxReduction) &&
        (g.tensors[xq].scale != g.tensors[yq].scale ||
         g.tensors[xq].zero_point != g.tensors[yq].zero_point ||
         g.tensors[xq].dtype != g.tensors[yq].dtype))
      continue; // max pooling does not requantize
    n.inputs[0] = xq;
    n.outputs[0] = yq;
    g.tensors[yq].producer = int(i);
    g.nodes[q].dead = true;
    n.ints["int8"] = {1};
    if (g.consumers(xd).empty() && !g.is_output(xd))
      g.nodes[dq].dead = true;
    ++count;
  }
  g.compact();
  return count;
}

int softmax_axes_to_last(Graph &g) {
  std::vector<Node> nodes;
  int count = 0;
  for (Node &n : g.nodes) {
    if (n.dead || n.op != Op::Softmax) {
      nodes.push_back(std::move(n));
      continue;
    }
    const auto shape = g.tensors[n.inputs[0]].shape;
    const int64_t rank = int64_t(shape.size());
    int64_t axis = n.attr("axis", -1);
    axis = axis < 0 ? axis + rank : axis;
    // An image's height or width becomes its channels (the axis the native softmax takes
    // on images); any other axis moves last.
    const bool image = rank == 4 && shape[0] == 1;
    const bool to_channels = image && (axis == 2 || axis == 3);
    if (axis < 0 || (image && axis == 1) || (!image && axis == rank - 1)) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::vector<int64_t> perm, back(size_t(rank), 0), moved;
    if (to_channels) {
      perm = {0, 1, 2, 3};
      std::swap(perm[1], perm[size_t(axis)]);
    } else {
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis)
          perm.push_back(d);
      perm.push_back(axis);
    }
    for (int64_t d = 0; d < rank; ++d) {
      back[size_t(perm[size_t(d)])] = d;
      moved.push_back(shape[size_t(perm[size_t(d)])]);
    }
    auto tensor = [&](const std::string &suffix) {
      Tensor t = g.tensors[n.outputs[0]];
      t.name += suffix;
      t.shape = moved;
      return g.add_tensor(std::move(t));
    };
    const int in_t = tensor(".axis_last"), out_t = tensor(".softmax_last");
    Node to;
    to.op = Op::Transpose;
    to.name = n.name + ".to_last";
    to.ints["perm"] = perm;
    to.inputs = {n.inputs[0]};
    to.outputs = {in_t};
    Node from;
    from.op = Op::Transpose;
    from.name = n.name + ".from_last";
    from.ints["perm"] = back;
    from.inputs = {out_t};
    from.outputs = {n.outputs[0]};
    n.ints["axis"] = {to_channels ? 1 : rank - 1};
    n.inputs = {in_t};
    n.outputs = {out_t};
    nodes.push_back(std::move(to));
    nodes.push_back(std::move(n));
    nodes.push_back(std::move(from));
    ++count;
  }
  g.nodes = std::move(nodes);
  g.compact();
  return count;
}

manycl::Result<void> optimize(Graph &g) {
  softmax_axes_to_last(g);
  fold_pads(g);
  fuse_channel_shuffles(g);
  remove_identities(g);
  fold_batchnorm(g);
  fuse_gated_activations(g);
  fuse_activations(g);
  lower_qdq_to_int8(g);
  return {};
}

} // namespace kann::passes
