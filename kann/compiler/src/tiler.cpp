// Tile compiler and record emitter. Three phases:
//   plan      per operator: split, the box of output each cluster owns, the input boxes it
//             needs, the SPM buffers (activations, parameters, staging) with lifetimes
//   allocate  one SPM offset per buffer, identical on every cluster (multicast needs it),
//             placed greedily (largest first, lowest free offset among overlapping lifetimes)
//   emit      parameter blob and per-cluster record streams, step by step
#include "kann/compile.h"
#include "kann/timing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/native/native.h"

namespace kann {

using ir::Graph;
using ir::Node;
using ir::Tensor;
using manycl::make_error;
using manycl::Result;

namespace {

constexpr uint64_t kAlign = 64;
constexpr uint32_t kWeightSignal = 0; // counts parameter slices arrived in a cluster's SPM
constexpr int64_t kPanel = 16;        // output channels per packed weight panel (the native format)
uint64_t align_up(uint64_t v, uint64_t a = kAlign) {
  return (v + a - 1) / a * a;
}

// A box of a channel-last activation: rows [y0, y1) x all columns x channels [c0, c1).
struct Box {
  int64_t y0 = 0, y1 = 0, c0 = 0, c1 = 0;
  bool empty() const { return y1 <= y0 || c1 <= c0; }
  int64_t rows() const { return y1 - y0; }
  int64_t chans() const { return c1 - c0; }
};
Box intersect(const Box &a, const Box &b) {
  return {std::max(a.y0, b.y0), std::min(a.y1, b.y1), std::max(a.c0, b.c0), std::min(a.c1, b.c1)};
}
Box bbox(const Box &a, const Box &b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  return {std::min(a.y0, b.y0), std::max(a.y1, b.y1), std::min(a.c0, b.c0), std::max(a.c1, b.c1)};
}

struct SpmBuffer {
  std::string name;
  std::vector<uint64_t> bytes; // per cluster (0: unused there)
  int first = 0, last = 0;     // steps
  uint64_t offset = 0;
  int act = -1;        // activation it holds, or -1
  int op = -1;         // operator whose staging buffer it is, or -1
  int prefetched = -1; // operator whose parameters it prefetches, or -1
  int weights_of = -1; // operator whose (sliced) parameters it holds, or -1
  uint64_t size() const { return *std::max_element(bytes.begin(), bytes.end()); }
};

// Where an activation lives. SPM: a buffer on every cluster holding its owned rows plus what
// its consumers there need (exchanged). DDR: spilled, the whole tensor in one DDR buffer
// (its network argument in ONNX layout, or SCRATCH in channel-last layout); operators
// stream it through SPM staging buffers.
struct Act {
  int tensor = -1; // the tensor that owns the storage
  int64_t H = 1, W = 1, C = 1;
  uint32_t es = 4;
  uint32_t dtype = MCL_DTYPE_F32;
  float scale = 1.0f; // INT8 activations (quantized by QuantizeLinear)
  int32_t zero_point = 0;
  std::vector<Box> owned; // per cluster: produced there
  std::vector<Box> need;  // per cluster: read there by consumers (bounding box)
  std::vector<Box> buf;   // per cluster: bbox(owned, need), what the buffer holds
  int buffer = -1;        // SpmBuffer index (SPM home)
  bool in_ddr = false;
  kbin_ddr_ref home{};      // DDR home
  bool onnx_layout = false; // DDR home layout: NCHW (network arguments) or HWC (scratch)
  int first = 0, last = 0;
  uint64_t bytes() const { return uint64_t(H * W * C) * es; }
};

enum class Kind {
  Conv,
  Pool,
  GlobalPool,
  Gemm,
  Eltwise,
  ScaleShift,
  Activation,
  Softmax,
  Concat,
  Convert, // also a channel Slice (Op::in_c0)
  Resize,
  Shuffle // ChannelShuffle: one strided copy per group
};

// Packed parameters of a range of output channels (the operator's own numbering).
struct ParamSlice {
  Box box;
  std::vector<uint8_t> bytes;
  uint64_t blob_offset = 0;
};

// An operator's parameters: per slot (one shared slot, multicast to every cluster with work,
// or one slot per cluster) the output-channel slices, streamed one after the other when
// they do not fit at once. Slice 0 goes to `buffer` (prefetched during the previous step),
// then slices alternate between `buffer2` and `buffer` (double buffering).
struct ParamBlock {
  bool shared = false;
  std::vector<std::vector<ParamSlice>> slots;
  int buffer = -1;
  int buffer2 = -1;
  size_t slices() const {
    size_t n = 0;
    for (const auto &s : slots)
      n = std::max(n, s.size());
    return n;
  }
};

struct Op {
  int node = -1;
  Kind kind = Kind::Conv;
  std::string split = "rows";
  int out = -1;                         // Act index
  std::vector<int> ins;                 // Act indices (activation inputs)
  std::vector<Box> out_box;             // per cluster
  std::vector<std::vector<Box>> in_box; // [input][cluster] for the whole out_box
  int chunks = 1;                       // intra-cluster tiles (bands of output rows)
  int wslices = 1; // output-channel slices of the parameters, streamed inside the step
  // Conv/pool geometry
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t groups = 1;
  ParamBlock params;         // packed weights (conv: shared; gemm: per cluster)
  int pad_row = -1;          // SpmBuffer: conv pad row
  std::vector<int> stage_in; // per input: SpmBuffer staging a DDR-homed input, or -1
  int stage_out = -1;        // SpmBuffer staging a DDR-homed output, or -1
  uint32_t fn = 0;
  bool transposed = false; // ConvTranspose (Kind::Conv)
  int64_t in_c0 = 0;       // Slice: first input channel read
  int64_t shuffle_groups = 1;
  uint32_t conv_fn() const {
    return transposed ? MCL_NATIVE_FN_CONV_TRANSPOSE2D : MCL_NATIVE_FN_CONV2D;
  }
};

// What the tiler may change between attempts when the SPM is too small.
struct Policy {
  std::set<int> spilled;      // tensors (storage owners) homed in DDR
  std::map<int, int> chunks;  // node -> intra-cluster tiles
  std::map<int, int> wslices; // node -> output-channel slices of its parameters
  std::set<int> no_prefetch;  // nodes whose parameters load in their own step
};

// Why an allocation failed: the buffer that did not fit and what it competed with.
struct AllocFailure {
  std::string message;
  std::vector<int> candidates; // buffers live at the same time, the failing one included
};

struct Compiler {
  const Graph &g;
  const CompileOptions &opt;
  unsigned K;
  const Policy &policy;
  std::vector<Act> acts;
  std::map<int, int> act_of;                          // tensor -> Act
  std::map<int, std::vector<int64_t>> view_src_shape; // tensor viewed as 2-D from 4-D: CHW
  std::vector<Op> ops;
  std::vector<SpmBuffer> buffers;
  format::Program prog;
  CompileOutput out;
  AllocFailure failure;
  std::map<int, uint32_t> input_arg, output_arg; // tensor -> kernel argument
  std::vector<uint64_t> weight_signals;          // per cluster: notifications sent so far
  // Concat elimination: a concat input written straight into the concat output's storage
  // at this channel offset (tensor -> offset); the eliminated Concat nodes.
  std::map<int, int64_t> chan_offset;
  std::set<int> eliminated;

  // Output channels of an operator: its storage's, unless it writes part of a concat.
  int64_t out_c(const Op &op) const {
    const int t = g.nodes[op.node].outputs[0];
    return chan_offset.count(t) ? g.tensors[t].shape[1] : acts[op.out].C;
  }
  int64_t out_off(const Op &op) const {
    auto it = chan_offset.find(g.nodes[op.node].outputs[0]);
    return it == chan_offset.end() ? 0 : it->second;
  }
  // An op's output box (its own channel numbering) in the storage it writes.
  Box stored(const Op &op, Box b) const {
    const int64_t off = out_off(op);
    if (!b.empty())
      b.c0 += off, b.c1 += off;
    return b;
  }

  // Channel concats whose inputs are each read only by the concat and produced by a
  // row-split operator: the producers write into the concat's buffer, no copy runs.
  void plan_concat_elimination() {
    static const std::set<std::string> producers = {"Conv",
                                                    "ConvTranspose",
                                                    "MaxPool",
                                                    "AveragePool",
                                                    "Add",
                                                    "Sub",
                                                    "Mul",
                                                    "Div",
                                                    "ScaleShift",
                                                    "Relu",
                                                    "Clip",
                                                    "LeakyRelu",
                                                    "Sigmoid",
                                                    "Tanh",
                                                    "HardSigmoid",
                                                    "HardSwish",
                                                    "Convert",
                                                    "QuantizeLinear",
                                                    "DequantizeLinear"};
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node &n = g.nodes[ni];
      if (n.dead || n.op != "Concat" || g.tensors[n.outputs[0]].shape.size() != 4)
        continue;
      bool ok = true;
      std::set<int> seen, nodes;
      for (int t : n.inputs) {
        const Tensor &x = g.tensors[t];
        ok = ok && x.producer >= 0 && !x.is_const && !g.is_output(t) && !seen.count(t) &&
             !chan_offset.count(t) && !eliminated.count(x.producer) &&
             producers.count(g.nodes[x.producer].op) && g.consumers(t).size() == 1 &&
             !nodes.count(x.producer) && x.dtype == g.tensors[n.outputs[0]].dtype &&
             x.scale == g.tensors[n.outputs[0]].scale && // INT8: no requantization needed
             x.zero_point == g.tensors[n.outputs[0]].zero_point;
        seen.insert(t);
        if (x.producer >= 0)
          nodes.insert(x.producer);
      }
      if (!ok)
        continue;
      auto storage = act_for(n.outputs[0]);
      if (!storage)
        continue;
      int64_t off = 0;
      for (int t : n.inputs) {
        act_of[t] = storage.value();
        chan_offset[t] = off;
        off += g.tensors[t].shape[1];
      }
      eliminated.insert(int(ni));
    }
  }

  Compiler(const Graph &graph, const CompileOptions &o, unsigned clusters, const Policy &p)
      : g(graph), opt(o), K(clusters), policy(p) {}

  std::string where(const Node &n) const { return "node '" + n.name + "' (" + n.op + ")"; }

  int new_buffer(std::string name, int first, int last) {
    SpmBuffer b;
    b.name = std::move(name);
    b.bytes.assign(K, 0);
    b.first = first;
    b.last = last;
    buffers.push_back(std::move(b));
    return int(buffers.size()) - 1;
  }

  Result<int> act_for(int tensor) {
    auto it = act_of.find(tensor);
    if (it != act_of.end())
      return it->second;
    const Tensor &t = g.tensors[tensor];
    Act a;
    a.tensor = tensor;
    if (t.shape.size() == 4) {
      a.C = t.shape[1], a.H = t.shape[2], a.W = t.shape[3];
    } else if (t.shape.size() == 2) {
      a.C = t.shape[1];
    } else {
      return make_error("tensor '" + t.name + "': rank " + std::to_string(t.shape.size()) +
                        " activations are not supported (only NCHW and [1,N])");
    }
    a.scale = t.scale;
    a.zero_point = t.zero_point;
    if (t.dtype == ir::DType::F16)
      a.dtype = MCL_DTYPE_F16, a.es = 2;
    else if (t.dtype == ir::DType::S8)
      a.dtype = MCL_DTYPE_S8, a.es = 1;
    else if (t.dtype == ir::DType::U8)
      a.dtype = MCL_DTYPE_U8, a.es = 1;
    else if (t.dtype != ir::DType::F32)
      return make_error("tensor '" + t.name + "': element type " + ir::dtype_name(t.dtype) +
                        " is not supported for activations");
    a.owned.assign(K, Box{});
    a.need.assign(K, Box{});
    acts.push_back(a);
    act_of[tensor] = int(acts.size()) - 1;
    return int(acts.size()) - 1;
  }

  Box full(const Act &a) const { return {0, a.H, 0, a.C}; }

  std::vector<Box> split_rows(int64_t H, int64_t C) const {
    std::vector<Box> v(K);
    for (unsigned k = 0; k < K; ++k)
      v[k] = {H * k / K, H * (k + 1) / K, 0, C};
    return v;
  }
  // Channel slices; with `granule` (the packing's panel width for weights) the boundaries
  // fall on whole panels when there are enough, so no slice packs padding channels.
  std::vector<Box> split_channels(int64_t H, int64_t C, int64_t granule = 1) const {
    std::vector<Box> v(K);
    const int64_t units = (C + granule - 1) / granule;
    if (units < int64_t(K))
      granule = 1;
    const int64_t n = (C + granule - 1) / granule;
    for (unsigned k = 0; k < K; ++k)
      v[k] = {0, H, std::min(C, n * k / K * granule), std::min(C, n * (k + 1) / K * granule)};
    return v;
  }

  // The output-channel slices of an operator's parameters on a cluster whose output box is
  // `b`: op.wslices parts of whole packing panels.
  std::vector<Box> weight_slices(const Op &op, const Box &b) const {
    std::vector<Box> v;
    if (b.empty())
      return v;
    const int64_t panels = (b.chans() + kPanel - 1) / kPanel;
    const int64_t n = std::clamp<int64_t>(op.wslices, 1, panels);
    for (int64_t j = 0; j < n; ++j) {
      Box x = b;
      x.c0 = b.c0 + panels * j / n * kPanel;
      x.c1 = std::min(b.c1, b.c0 + panels * (j + 1) / n * kPanel);
      v.push_back(x);
    }
    return v;
  }

  // Input box that input i of `op` needs to compute output box `o`.
  Box need_for(const Op &op, size_t i, const Box &o) const {
    if (o.empty())
      return {};
    const Act &in = acts[op.ins[i]];
    switch (op.kind) {
    case Kind::Conv:
      if (op.transposed) {
        // Output row y reads input rows iy with iy*sh = y + pt - ky*dh for some tap ky.
        const int64_t lo = o.y0 + op.pt - (op.kh - 1) * op.dh, hi = o.y1 - 1 + op.pt;
        int64_t a = lo <= 0 ? 0 : (lo + op.sh - 1) / op.sh;
        int64_t b = hi < 0 ? 0 : hi / op.sh + 1;
        a = std::min<int64_t>(a, in.H - 1);
        b = std::max<int64_t>(std::min<int64_t>(b, in.H), a + 1);
        return {a, b, 0, in.C};
      }
      [[fallthrough]];
    case Kind::Pool: {
      // Depthwise convolutions split by channels read only their channels.
      const bool depthwise_slice =
          op.kind == Kind::Conv && op.groups > 1 && op.groups == in.C && o.chans() != out_c(op);
      const int64_t c0 = depthwise_slice ? o.c0 : 0, c1 = depthwise_slice ? o.c1 : in.C;
      int64_t a = o.y0 * op.sh - op.pt;
      int64_t b = (o.y1 - 1) * op.sh - op.pt + (op.kh - 1) * op.dh + 1;
      a = std::max<int64_t>(a, 0);
      b = std::min<int64_t>(b, in.H);
      if (b <= a) { // the band sees only padding: keep one real row so the tile is not empty
        a = std::min<int64_t>(std::max<int64_t>(a, 0), in.H - 1);
        b = a + 1;
      }
      return {a, b, c0, c1};
    }
    case Kind::GlobalPool:
      return {0, in.H, o.c0, o.c1};
    case Kind::Gemm:
      return full(in);
    case Kind::Concat:
    case Kind::Shuffle:
      return {o.y0, o.y1, 0, in.C};
    case Kind::Convert:
      return {o.y0, o.y1, o.c0 + op.in_c0, o.c1 + op.in_c0};
    case Kind::Eltwise: {
      // Broadcast operands: a per-channel gate [1,C,1,1] (or a scalar) reads its one pixel,
      // a per-pixel mask [1,1,H,W] its one channel; the native call repeats them (0 strides).
      const Act &out = acts[op.out];
      const bool one_pixel = in.H == 1 && in.W == 1 && (out.H > 1 || out.W > 1);
      const bool one_channel = in.C == 1 && out_c(op) > 1;
      if (!one_pixel && !one_channel)
        return o;
      return {one_pixel ? 0 : o.y0, one_pixel ? 1 : o.y1, one_channel ? 0 : o.c0,
              one_channel ? 1 : o.c1};
    }
    case Kind::Resize: {
      // Source rows of output rows [y0, y1): the ratio of sizes (or of size-1 for
      // align_corners), with two rows of margin for interpolation and rounding.
      const Act &out = acts[op.out];
      const double r = std::max(double(in.H) / double(out.H),
                                double(in.H - 1) / double(std::max<int64_t>(1, out.H - 1)));
      const int64_t a = std::max<int64_t>(0, int64_t(std::floor(double(o.y0) * r)) - 2);
      const int64_t b = std::min<int64_t>(in.H, int64_t(std::ceil(double(o.y1) * r)) + 2);
      return {a, std::max(b, a + 1), 0, in.C};
    }
    default:
      return o;
    }
  }

  // Output rows of cluster c split into op.chunks bands.
  std::vector<Box> chunk_boxes(const Op &op, unsigned c) const {
    const Box &b = op.out_box[c];
    std::vector<Box> v;
    if (b.empty())
      return v;
    const int64_t n = std::min<int64_t>(op.chunks, b.rows());
    for (int64_t j = 0; j < n; ++j) {
      Box x = b;
      x.y0 = b.y0 + b.rows() * j / n;
      x.y1 = b.y0 + b.rows() * (j + 1) / n;
      v.push_back(x);
    }
    return v;
  }

  // ---------------- planning ----------------
  Result<void> plan() {
    for (int t : g.inputs) {
      auto a = act_for(t);
      if (!a)
        return a.error();
    }
    plan_concat_elimination();
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node &n = g.nodes[ni];
      if (n.dead || eliminated.count(int(ni)))
        continue;
      // Views: Flatten / Reshape share their input's storage.
      if (n.op == "Flatten" || n.op == "Reshape" || n.op == "Squeeze" || n.op == "Unsqueeze") {
        auto src = act_for(n.inputs[0]);
        if (!src)
          return src.error();
        const Tensor &y = g.tensors[n.outputs[0]];
        const Act &s = acts[src.value()];
        const bool same_order = (s.H * s.W == 1) || (s.C == 1);
        if (y.shape.size() != 2 && !(y.shape.size() == 4 && same_order))
          return make_error(where(n) + ": only reshapes to [1,N] are supported");
        if (g.is_output(n.outputs[0]) && g.is_output(n.inputs[0]))
          return make_error(where(n) + ": a network output viewed as another output");
        act_of[n.outputs[0]] = src.value();
        if (!same_order)
          view_src_shape[n.outputs[0]] = {s.C, s.H, s.W};
        if (view_src_shape.count(n.inputs[0]))
          view_src_shape[n.outputs[0]] = view_src_shape[n.inputs[0]];
        continue;
      }
      Op op;
      op.node = int(ni);
      if (n.op == "Conv" || n.op == "ConvTranspose") {
        op.kind = Kind::Conv;
        op.transposed = n.op == "ConvTranspose";
      }
      else if (n.op == "MaxPool" || n.op == "AveragePool")
        op.kind = Kind::Pool;
      else if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool")
        op.kind = Kind::GlobalPool;
      else if (n.op == "Gemm" || n.op == "MatMul")
        op.kind = Kind::Gemm;
      else if (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div")
        op.kind = Kind::Eltwise;
      else if (n.op == "ScaleShift")
        op.kind = Kind::ScaleShift;
      else if (n.op == "Softmax")
        op.kind = Kind::Softmax;
      else if (n.op == "Concat")
        op.kind = Kind::Concat;
      else if (n.op == "Resize")
        op.kind = Kind::Resize;
      else if (n.op == "Convert" || n.op == "QuantizeLinear" || n.op == "DequantizeLinear")
        op.kind = Kind::Convert;
      else if (n.op == "Slice") {
        op.kind = Kind::Convert;
        op.in_c0 = n.attrs("channels").at(0);
      } else if (n.op == "ChannelShuffle") {
        op.kind = Kind::Shuffle;
        op.shuffle_groups = n.attrs("group").at(0);
      } else if (n.op == "Transpose")
        return make_error(where(n) + ": only channel shuffles (Reshape [1,G,C/G,H,W], Transpose "
                                     "perm [0,2,1,3,4], Reshape back) are supported");
      else if ((n.op == "Identity" || n.op == "Dropout" || n.op == "Cast") &&
               g.tensors[n.inputs[0]].dtype == g.tensors[n.outputs[0]].dtype &&
               g.tensors[n.inputs[0]].scale == g.tensors[n.outputs[0]].scale &&
               g.tensors[n.inputs[0]].zero_point == g.tensors[n.outputs[0]].zero_point)
        op.kind = Kind::Convert; // an identity passes::remove_identities kept: a plain copy
      else {
        mcl_activation act;
        if (!passes::activation_of(g, n, act))
          return make_error(where(n) + ": not supported by the tile compiler");
        op.kind = Kind::Activation;
      }
      auto o = act_for(n.outputs[0]);
      if (!o)
        return o.error();
      op.out = o.value();
      // A conversion of a flattened image keeps the image's channel-last geometry (and so
      // its flatten order for a following Gemm).
      if (op.kind == Kind::Convert && view_src_shape.count(n.inputs[0])) {
        auto src = act_for(n.inputs[0]);
        if (!src)
          return src.error();
        Act &y = acts[op.out];
        y.H = acts[src.value()].H, y.W = acts[src.value()].W, y.C = acts[src.value()].C;
        view_src_shape[n.outputs[0]] = view_src_shape[n.inputs[0]];
      }
      std::vector<int> act_inputs;
      if (op.kind == Kind::Eltwise || op.kind == Kind::Concat) {
        for (int i : n.inputs) {
          if (g.tensors[i].is_const)
            return make_error(where(n) + ": constant operands must be per-channel (folded into a "
                                         "ScaleShift) or the shapes of both operands must match");
          act_inputs.push_back(i);
        }
      } else {
        act_inputs.push_back(n.inputs[0]);
      }
      for (int i : act_inputs) {
        auto a = act_for(i);
        if (!a)
          return a.error();
        op.ins.push_back(a.value());
      }
      if (op.kind != Kind::Convert && !n.ints.count("int8"))
        for (int t : {n.inputs[0], n.outputs[0]})
          if (g.tensors[t].dtype == ir::DType::S8 || g.tensors[t].dtype == ir::DType::U8)
            return make_error(where(n) +
                              ": INT8 operands are only supported through "
                              "QuantizeLinear/DequantizeLinear pairs (INT8 kernels are not "
                              "emitted yet)");
      auto ch = policy.chunks.find(int(ni));
      if (ch != policy.chunks.end())
        op.chunks = ch->second;
      auto ws = policy.wslices.find(int(ni));
      if (ws != policy.wslices.end() && (op.kind == Kind::Conv || op.kind == Kind::Gemm))
        op.wslices = ws->second;
      if (auto r = plan_op(op, n); !r)
        return r;
      ops.push_back(std::move(op));
    }
    for (int t : g.outputs) {
      if (!act_of.count(t))
        return make_error("output '" + g.tensors[t].name + "' is not computed");
      for (int i : g.inputs)
        if (act_of.count(i) && act_of[i] == act_of[t])
          return make_error("output '" + g.tensors[t].name + "' is input '" + g.tensors[i].name +
                            "' reshaped: nothing to compute (not supported)");
    }
    return {};
  }

  // Cost model for a convolution: spatial split (bands of rows; weights multicast; halo rows
  // exchanged) against channel split (output channels sliced; every cluster needs the whole
  // input, so the input is gathered; weight slices loaded per cluster). Modeled cycles of
  // the slowest cluster: MACs at the configured FP32 rate plus NoC time of the exchanges.
  bool choose_channel_split(const Op &op) const {
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    const int64_t yc = out_c(op);
    const bool depthwise = op.groups > 1 && op.groups == x.C && op.groups == yc;
    if ((op.groups != 1 && !depthwise) || yc < int64_t(K) || out_off(op) != 0 ||
        chan_offset.count(g.nodes[op.node].outputs[0]))
      return false;
    // Every cluster would hold the whole input (a depthwise one reads only its channels, but
    // the buffer spans all of them when the producer split rows): not when that takes a
    // large part of the SPM.
    if (x.bytes() > opt.device.spm_bytes / 4)
      return false;
    const auto &d = opt.device;
    const double macs_per_row = double(y.W) * yc * (x.C / op.groups) * op.kh * op.kw;
    const double rate = double(d.pes_per_cluster) * d.fp32_fmas_per_cycle;
    const double es = x.es, row_bytes = double(x.W) * x.C * es;
    auto noc = [&](double bytes) {
      return bytes > 0 ? d.dma_latency_cycles + bytes / d.noc_bytes_per_cycle : 0.0;
    };
    // Spatial: the largest band, plus the halo rows it must receive.
    const double band = std::ceil(double(y.H) / K);
    const double in_rows = std::min<double>(x.H, (band - 1) * op.sh + (op.kh - 1) * op.dh + 1);
    const double spatial =
        band * macs_per_row / rate + noc(std::max(0.0, in_rows - double(x.H) / K) * row_bytes);
    // Channels: the largest slice of output channels, plus gathering the rest of the input.
    const double slice = std::ceil(double(yc) / K) / double(yc);
    const double gathered = depthwise ? slice : 1.0;
    const double channel = double(y.H) * macs_per_row * slice / rate +
                           noc(double(x.H) * row_bytes * std::max(0.0, gathered - 1.0 / K));
    return channel < spatial;
  }

  Result<void> plan_op(Op &op, const Node &n) {
    Act &y = acts[op.out];
    const int64_t yc = out_c(op);
    const bool aliased = chan_offset.count(n.outputs[0]) != 0; // writes into a concat
    switch (op.kind) {
    case Kind::Conv:
    case Kind::Pool: {
      auto k = n.attrs("kernel_shape"), s = n.attrs("strides"), d = n.attrs("dilations"),
           p = n.attrs("pads");
      op.kh = k[0], op.kw = k[1], op.sh = s[0], op.sw = s[1], op.dh = d[0], op.dw = d[1];
      op.pt = p[0], op.pl = p[1], op.pb = p[2], op.pr = p[3];
      op.groups = n.attr("group", 1);
      op.out_box = split_rows(y.H, yc);
      if (op.kind == Kind::Conv && K > 1 && choose_channel_split(op))
        op.split = "channels", op.out_box = split_channels(y.H, yc, kPanel);
      break;
    }
    case Kind::GlobalPool:
    case Kind::Gemm:
      op.split = "channels";
      op.out_box = split_channels(1, yc, op.kind == Kind::Gemm ? kPanel : 1);
      op.chunks = 1;
      break;
    case Kind::Softmax:
      if (y.H == 1) {
        op.split = "single";
        op.out_box.assign(K, Box{});
        op.out_box[0] = full(y);
      } else {
        op.out_box = split_rows(y.H, yc);
      }
      break;
    case Kind::Eltwise:
    case Kind::ScaleShift:
    case Kind::Activation:
    case Kind::Convert:
      if (op.kind == Kind::Eltwise)
        for (int i : op.ins) {
          const Act &a = acts[i];
          const bool same_pixels = a.H == y.H && a.W == y.W, one_pixel = a.H == 1 && a.W == 1;
          const bool same_channels = a.C == yc, one_channel = a.C == 1;
          if (!(same_pixels || one_pixel) || !(same_channels || one_channel))
            return make_error(where(n) + ": operand [" + std::to_string(a.C) + "," +
                              std::to_string(a.H) + "," + std::to_string(a.W) +
                              "] does not broadcast to the output [" + std::to_string(yc) + "," +
                              std::to_string(y.H) + "," + std::to_string(y.W) +
                              "]: only per-channel [C,1,1], per-pixel [1,H,W] and scalar "
                              "operands broadcast between activations");
        }
      if (y.H > 1 || aliased) {
        op.out_box = split_rows(y.H, yc);
      } else {
        op.split = "channels";
        op.out_box = split_channels(y.H, yc);
        op.chunks = 1;
      }
      break;
    case Kind::Concat:
    case Kind::Resize:
    case Kind::Shuffle:
      op.out_box = split_rows(y.H, yc);
      break;
    }
    op.in_box.assign(op.ins.size(), std::vector<Box>(K));
    for (size_t i = 0; i < op.ins.size(); ++i)
      for (unsigned c = 0; c < K; ++c)
        op.in_box[i][c] = need_for(op, i, op.out_box[c]);
    for (unsigned c = 0; c < K; ++c)
      y.owned[c] = bbox(y.owned[c], stored(op, op.out_box[c]));
    for (size_t i = 0; i < op.ins.size(); ++i)
      for (unsigned c = 0; c < K; ++c)
        acts[op.ins[i]].need[c] = bbox(acts[op.ins[i]].need[c], op.in_box[i][c]);
    return {};
  }

  // Steps: 0 = prologue, op s runs in step s + 1. Also decides DDR homes.
  Result<void> lifetimes() {
    const int steps = int(ops.size()) + 1;
    uint32_t arg = 0;
    for (int t : g.inputs)
      input_arg[t] = arg++;
    for (int t : g.outputs)
      output_arg[t] = arg++;
    for (Act &a : acts) {
      a.first = steps;
      a.last = 0;
    }
    for (int t : g.inputs)
      acts[act_of[t]].first = 0;
    for (size_t s = 0; s < ops.size(); ++s) {
      Act &o = acts[ops[s].out];
      o.first = std::min(o.first, int(s) + 1);
      o.last = std::max(o.last, int(s) + 1);
      for (int i : ops[s].ins)
        acts[i].last = std::max(acts[i].last, int(s) + 1);
    }
    uint64_t scratch = 0;
    for (size_t i = 0; i < acts.size(); ++i) {
      Act &a = acts[i];
      a.last = std::max(a.last, a.first);
      if (policy.spilled.count(a.tensor)) {
        a.in_ddr = true;
        // Network inputs and outputs spill into their own argument (ONNX layout); other
        // activations into SCRATCH (channel-last, so bands of rows are contiguous).
        int arg_tensor = -1;
        for (auto [t, k] : input_arg)
          if (act_of[t] == int(i))
            arg_tensor = t;
        for (auto [t, k] : output_arg)
          if (act_of[t] == int(i) && arg_tensor < 0 && !view_src_shape.count(t))
            arg_tensor = t;
        if (arg_tensor >= 0) {
          a.onnx_layout = true;
          a.home = {KBIN_DDR_ARG,
                    input_arg.count(arg_tensor) ? input_arg[arg_tensor] : output_arg[arg_tensor],
                    0};
        } else {
          a.home = {KBIN_DDR_SCRATCH, 0, scratch};
          scratch = align_up(scratch + a.bytes(), 128);
        }
        continue;
      }
    }
    // Activations sharing one buffer (in-place element-wise chains): one buffer per group,
    // holding what every member needs, alive from the first member's start to the last one's
    // end. Members have identical geometry, so their tiles coincide.
    const std::vector<int> root = plan_in_place();
    for (size_t i = 0; i < acts.size(); ++i) {
      Act &a = acts[i];
      if (a.in_ddr || root[i] != int(i))
        continue;
      a.buf.assign(K, Box{});
      int last = a.last;
      for (size_t m = 0; m < acts.size(); ++m)
        if (root[m] == int(i)) {
          for (unsigned c = 0; c < K; ++c)
            a.buf[c] = bbox(a.buf[c], bbox(acts[m].owned[c], acts[m].need[c]));
          last = std::max(last, acts[m].last);
        }
      a.buffer = new_buffer(g.tensors[a.tensor].name, a.first, last);
      buffers[a.buffer].act = int(i);
      for (unsigned c = 0; c < K; ++c)
        buffers[a.buffer].bytes[c] =
            a.buf[c].empty() ? 0 : uint64_t(a.buf[c].rows() * a.W * a.buf[c].chans() * a.es);
    }
    for (size_t i = 0; i < acts.size(); ++i)
      if (!acts[i].in_ddr && root[i] != int(i)) {
        acts[i].buffer = acts[size_t(root[i])].buffer;
        acts[i].buf = acts[size_t(root[i])].buf;
      }
    prog.scratch_size = scratch;
    return {};
  }

  // In-place element-wise operators: a float element-wise operator (Add, ScaleShift,
  // activation; not copies, which may use memcpy, nor INT8 kernels, which requantize
  // through blocks) whose input dies at it writes its output over that input: each
  // cluster reads and writes the same box (the native functions go element by element),
  // other clusters' exchanges land in rows or channels it does not read, and no later step
  // reads the input. Returns, per activation, the activation owning its buffer.
  std::vector<int> plan_in_place() const {
    std::vector<int> root(acts.size());
    std::iota(root.begin(), root.end(), 0);
    auto is_io = [&](int act) {
      for (int t : g.inputs)
        if (act_of.at(t) == act)
          return true;
      for (int t : g.outputs)
        if (act_of.at(t) == act)
          return true;
      return false;
    };
    // Per group (root): the box each cluster's buffer holds; a member may not enlarge it
    // (an output needed whole by a channel-split consumer would otherwise keep the whole
    // tensor alive over the group's lifetime).
    std::vector<std::vector<Box>> group_box(acts.size());
    for (size_t i = 0; i < acts.size(); ++i)
      for (unsigned c = 0; c < K; ++c)
        group_box[i].push_back(bbox(acts[i].owned[c], acts[i].need[c]));
    auto inside = [](const Box &a, const Box &b) {
      return a.empty() || (a.y0 >= b.y0 && a.y1 <= b.y1 && a.c0 >= b.c0 && a.c1 <= b.c1);
    };
    for (size_t s = 0; s < ops.size(); ++s) {
      const Op &op = ops[s];
      const int step = int(s) + 1;
      const Act &y = acts[op.out];
      const int yt = g.nodes[op.node].outputs[0];
      if ((op.kind != Kind::Eltwise && op.kind != Kind::ScaleShift &&
           op.kind != Kind::Activation) ||
          y.in_ddr || y.first != step || chan_offset.count(yt) || act_of.at(yt) != op.out ||
          is_io(op.out) || (y.dtype != MCL_DTYPE_F32 && y.dtype != MCL_DTYPE_F16))
        continue;
      for (size_t i = 0; i < op.ins.size(); ++i) {
        const int xi = op.ins[i];
        const Act &x = acts[xi];
        if (x.in_ddr || x.last != step || x.es != y.es || x.dtype != y.dtype || x.H != y.H ||
            x.W != y.W || x.C != y.C || x.scale != y.scale || x.zero_point != y.zero_point ||
            is_io(xi) || std::count(op.ins.begin(), op.ins.end(), xi) != 1)
          continue;
        bool fits = true;
        for (unsigned c = 0; c < K; ++c)
          fits = fits && inside(group_box[op.out][c], group_box[root[xi]][c]);
        if (!fits)
          continue;
        root[op.out] = root[xi];
        break;
      }
    }
    return root;
  }

  mcl_conv_args conv_args_shape(const Op &op, const Box &ib, const Box &ob) const {
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    mcl_conv_args a{};
    const uint32_t ic = uint32_t(ib.chans() > 0 ? ib.chans() : x.C);
    const uint32_t oc = uint32_t(ob.chans() > 0 ? ob.chans() : y.C);
    a.input = {0,
               uint32_t(std::max<int64_t>(ib.rows(), 1)),
               uint32_t(x.W),
               ic,
               uint32_t(x.W) * ic,
               ic,
               1,
               x.dtype};
    a.output = {0,
                uint32_t(std::max<int64_t>(ob.rows(), 1)),
                uint32_t(y.W),
                oc,
                uint32_t(y.W) * oc,
                oc,
                1,
                y.dtype};
    // A depthwise convolution split by channels is a smaller depthwise convolution.
    a.groups = uint32_t(op.groups > 1 && ic != uint32_t(x.C) ? ic : op.groups);
    a.kernel_h = uint16_t(op.kh), a.kernel_w = uint16_t(op.kw);
    a.stride_h = uint16_t(op.sh), a.stride_w = uint16_t(op.sw);
    a.dilation_h = uint16_t(op.dh), a.dilation_w = uint16_t(op.dw);
    if (op.transposed) { // docs/native.md: origin = out_y0 + pad_top - in_y0 * stride
      a.origin_y = int32_t(ob.y0 + op.pt - ib.y0 * op.sh);
      a.origin_x = int32_t(op.pl);
      return a;
    }
    a.origin_y = int32_t(ob.y0 * op.sh - op.pt - ib.y0);
    a.origin_x = int32_t(-op.pl);
    return a;
  }

  // Parameter and staging buffers (sizes; contents are packed after allocation).
  Result<void> plan_params() {
    for (size_t s = 0; s < ops.size(); ++s) {
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      const int step = int(s) + 1;
      const Act &x = acts[op.ins[0]];
      const Act &y = acts[op.out];
      // Parameters load during the previous step (double buffering) unless the SPM cannot
      // hold two operators' parameters at once.
      const bool prefetch = !policy.no_prefetch.count(op.node);
      const int params_first = prefetch ? step - 1 : step;
      // An operator streaming DDR-homed operands would reload them for every slice of its
      // parameters: small parameters are not sliced there.
      bool streams = y.in_ddr;
      for (int i : op.ins)
        streams = streams || acts[i].in_ddr;
      if (streams && op.wslices > 1 && op.kind == Kind::Conv) {
        uint64_t whole = 0;
        for (unsigned c = 0; c < K; ++c)
          if (!op.out_box[c].empty()) {
            const Box ob = chunk_boxes(op, c)[0];
            mcl_conv_args a = conv_args_shape(op, need_for(op, 0, ob), ob);
            whole = std::max<uint64_t>(whole, mcl_native_conv_params_size(op.conv_fn(), &a));
          }
        if (whole <= opt.device.spm_bytes / 8)
          op.wslices = 1;
      }
      size_t slices = 1;
      if (op.kind == Kind::Conv) {
        op.params.buffer = new_buffer(n.name + ".params", params_first, step);
        op.pad_row = new_buffer(n.name + ".pad", step, step);
        for (unsigned c = 0; c < K; ++c) {
          const auto parts = weight_slices(op, op.out_box[c]);
          slices = std::max(slices, parts.size());
          for (const Box &part : parts)
            for (Box ob : chunk_boxes(op, c)) {
              ob.c0 = part.c0, ob.c1 = part.c1;
              mcl_conv_args a = conv_args_shape(op, need_for(op, 0, ob), ob);
              auto &p = buffers[op.params.buffer].bytes[c];
              p = std::max<uint64_t>(p, mcl_native_conv_params_size(op.conv_fn(), &a));
              buffers[op.pad_row].bytes[c] = align_up(x.C * x.es, 16);
            }
        }
      } else if (op.kind == Kind::Gemm) {
        op.params.buffer = new_buffer(n.name + ".params", params_first, step);
        for (unsigned c = 0; c < K; ++c) {
          const auto parts = weight_slices(op, op.out_box[c]);
          slices = std::max(slices, parts.size());
          for (const Box &part : parts) {
            mcl_gemm_args a{};
            a.input = {0, 1, 1, uint32_t(x.H * x.W * x.C), 0, 0, 1, x.dtype};
            a.input.row_stride = a.input.pixel_stride = a.input.c;
            a.output = {0, 1, 1, uint32_t(part.chans()), 0, 0, 1, y.dtype};
            a.output.row_stride = a.output.pixel_stride = a.output.c;
            auto &p = buffers[op.params.buffer].bytes[c];
            p = std::max<uint64_t>(p, mcl_native_gemm_params_size(&a));
          }
        }
      } else if (op.kind == Kind::ScaleShift) {
        op.params.buffer = new_buffer(n.name + ".params", params_first, step);
        for (unsigned c = 0; c < K; ++c)
          if (!op.out_box[c].empty())
            buffers[op.params.buffer].bytes[c] = uint64_t(op.out_box[c].chans()) * 8;
      }
      if (prefetch && op.params.buffer >= 0)
        buffers[op.params.buffer].prefetched = int(s);
      if (op.params.buffer >= 0)
        buffers[op.params.buffer].weights_of = int(s);
      if (slices > 1) { // streamed slices: the second buffer of the pair
        op.params.buffer2 = new_buffer(n.name + ".params2", step, step);
        buffers[op.params.buffer2].bytes = buffers[op.params.buffer].bytes;
        buffers[op.params.buffer2].weights_of = int(s);
      }
      // Staging for DDR-homed operands: one chunk's worth.
      op.stage_in.assign(op.ins.size(), -1);
      for (size_t i = 0; i < op.ins.size(); ++i) {
        const Act &a = acts[op.ins[i]];
        if (!a.in_ddr)
          continue;
        op.stage_in[i] = new_buffer(n.name + ".in" + std::to_string(i), step, step);
        buffers[op.stage_in[i]].op = int(s);
        for (unsigned c = 0; c < K; ++c)
          for (const Box &ob : chunk_boxes(op, c)) {
            Box ib = need_for(op, i, ob);
            auto &b = buffers[op.stage_in[i]].bytes[c];
            b = std::max<uint64_t>(b, uint64_t(ib.rows() * a.W * ib.chans()) * a.es);
          }
      }
      if (y.in_ddr) {
        op.stage_out = new_buffer(n.name + ".out", step, step);
        buffers[op.stage_out].op = int(s);
        for (unsigned c = 0; c < K; ++c)
          for (const Box &ob : chunk_boxes(op, c)) {
            auto &b = buffers[op.stage_out].bytes[c];
            b = std::max<uint64_t>(b, uint64_t(ob.rows() * y.W * ob.chans()) * y.es);
          }
      }
    }
    return {};
  }

  // One SPM offset per buffer, the same on every cluster. Buffers whose lifetimes overlap
  // must not overlap in the SPM. A greedy placement fragments differently depending on the
  // order and on the gap chosen, so several are tried; when the bytes live at one step
  // exceed the SPM, none can succeed and the failure names that step's buffers.
  bool allocate() {
    const uint64_t capacity = opt.device.spm_bytes;
    int steps = 1;
    for (const SpmBuffer &b : buffers)
      steps = std::max(steps, b.last + 1);
    std::vector<uint64_t> pressure(size_t(steps), 0);
    for (const SpmBuffer &b : buffers)
      for (int t = b.first; t <= b.last; ++t)
        pressure[size_t(t)] += align_up(b.size());
    const auto worst = std::max_element(pressure.begin(), pressure.end());
    if (*worst > capacity) {
      const int step = int(worst - pressure.begin());
      failure.candidates.clear();
      for (size_t i = 0; i < buffers.size(); ++i)
        if (buffers[i].size() && buffers[i].first <= step && step <= buffers[i].last)
          failure.candidates.push_back(int(i));
      failure.message = "step " + std::to_string(step) + " needs " + std::to_string(*worst) +
                        " B of SPM buffers, more than the " + std::to_string(capacity) + " B SPM";
      return false;
    }
    AllocFailure first;
    for (int strategy = 0; strategy < 6; ++strategy) {
      if (place(strategy / 2, strategy % 2 == 1))
        return true;
      if (strategy == 0)
        first = failure;
    }
    failure = first;
    return false;
  }

  // Greedy placement. order 0: largest size x lifetime first, 1: largest first, 2: by first
  // step (then largest). best_fit: the smallest free gap that holds the buffer, else the
  // lowest one.
  bool place(int order_kind, bool best_fit) {
    std::vector<int> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    auto area = [&](int i) {
      return buffers[i].size() * uint64_t(buffers[i].last - buffers[i].first + 1);
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (order_kind == 0)
        return area(a) > area(b);
      if (order_kind == 2 && buffers[a].first != buffers[b].first)
        return buffers[a].first < buffers[b].first;
      return buffers[a].size() > buffers[b].size();
    });
    const uint64_t capacity = opt.device.spm_bytes;
    std::vector<int> placed;
    uint64_t high = 0;
    for (int i : order) {
      SpmBuffer &b = buffers[i];
      if (b.size() == 0)
        continue;
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      std::vector<int> live;
      for (int j : placed) {
        const SpmBuffer &o = buffers[j];
        if (o.first <= b.last && b.first <= o.last) {
          busy.push_back({o.offset, o.offset + align_up(o.size())});
          live.push_back(j);
        }
      }
      std::sort(busy.begin(), busy.end());
      busy.push_back({capacity, capacity}); // the end of the SPM closes the last gap
      uint64_t at = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
      for (auto [lo, hi] : busy) {
        if (lo > cursor && lo - cursor >= b.size()) {
          const uint64_t gap = lo - cursor;
          if (!best_fit) {
            at = cursor;
            break;
          }
          if (gap < best_gap)
            best_gap = gap, at = cursor;
        }
        cursor = std::max(cursor, hi);
      }
      if (at == UINT64_MAX) {
        uint64_t used = 0, end = 0;
        for (auto [lo, hi] : busy) { // union of the live intervals
          used += hi > std::max(lo, end) ? hi - std::max(lo, end) : 0;
          end = std::max(end, hi);
        }
        failure.message = "buffer '" + b.name + "' (" + std::to_string(b.size()) +
                          " B) does not fit in the " + std::to_string(capacity) +
                          " B SPM next to " + std::to_string(used) + " B of live buffers";
        failure.candidates = live;
        failure.candidates.push_back(i);
        return false;
      }
      b.offset = at;
      high = std::max(high, at + b.size());
      placed.push_back(i);
    }
    prog.spm_required = std::max<uint64_t>(high, 64);
    return true;
  }

  // ---------------- emission ----------------
  // A tile of activation `a` for `box` on cluster c: in its SPM buffer, or (DDR-homed) in
  // the staging buffer `stage`, which holds exactly that box densely.
  mcl_tile tile_of(const Act &a, unsigned c, const Box &box, int stage = -1) const {
    mcl_tile t{};
    uint64_t pc;
    if (a.in_ddr) {
      pc = box.chans();
      t.offset = uint32_t(buffers[stage].offset);
    } else {
      const Box &b = a.buf[c];
      pc = b.chans();
      t.offset = uint32_t(buffers[a.buffer].offset +
                          (uint64_t(box.y0 - b.y0) * a.W * pc + uint64_t(box.c0 - b.c0)) * a.es);
    }
    t.h = uint32_t(box.rows());
    t.w = uint32_t(a.W);
    t.c = uint32_t(box.chans());
    t.row_stride = uint32_t(a.W * pc);
    t.pixel_stride = uint32_t(pc);
    t.channel_stride = 1;
    t.dtype = a.dtype;
    return t;
  }

  uint64_t add_blob(const std::vector<uint8_t> &bytes) {
    uint64_t at = align_up(prog.params.size());
    prog.params.resize(at);
    prog.params.insert(prog.params.end(), bytes.begin(), bytes.end());
    return at;
  }

  template <class T> static std::vector<uint8_t> to_bytes(const T *p, size_t n) {
    std::vector<uint8_t> v(n * sizeof(T));
    std::memcpy(v.data(), p, v.size());
    return v;
  }

  // Packs every operator's weights into the blob (before emission: prefetches need them).
  Result<void> pack_params() {
    for (size_t s = 0; s < ops.size(); ++s) {
      if (opt.progress)
        opt.progress("packing parameters", s, ops.size());
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      if (op.kind == Kind::Conv) {
        // Spatial split: one set of slices multicast to all. Channel split: each cluster's
        // slice of output channels ([cout][cin/groups][kh][kw] rows are contiguous).
        op.params.shared = op.split == "rows";
        op.params.slots.assign(op.params.shared ? 1 : K, {});
        for (unsigned c = 0; c < K; ++c) {
          auto &slot = op.params.slots[op.params.shared ? 0 : c];
          if (op.out_box[c].empty() || !slot.empty())
            continue;
          for (const Box &part : weight_slices(op, op.out_box[c])) {
            auto packed = pack_conv_slice(op, n, c, part);
            if (!packed)
              return packed.error();
            slot.push_back({part, std::move(packed.value()), 0});
          }
        }
      } else if (op.kind == Kind::Gemm) {
        op.params.slots.assign(K, {});
        for (unsigned c = 0; c < K; ++c)
          for (const Box &part : weight_slices(op, op.out_box[c])) {
            auto packed = pack_gemm_slice(op, n, part);
            if (!packed)
              return packed.error();
            op.params.slots[c].push_back({part, std::move(packed.value()), 0});
          }
      } else if (op.kind == Kind::ScaleShift) {
        op.params.slots.assign(K, {});
        const auto &sc = g.tensors[n.inputs[1]].data, &sh = g.tensors[n.inputs[2]].data;
        for (unsigned c = 0; c < K; ++c) {
          const Box &ob = op.out_box[c];
          if (ob.empty())
            continue;
          std::vector<float> p(sc.begin() + ob.c0, sc.begin() + ob.c1);
          p.insert(p.end(), sh.begin() + ob.c0, sh.begin() + ob.c1);
          op.params.slots[c].push_back({ob, to_bytes(p.data(), p.size()), 0});
        }
      }
      for (auto &slot : op.params.slots)
        for (ParamSlice &ps : slot)
          ps.blob_offset = add_blob(ps.bytes);
    }
    return {};
  }

  // Packed parameters of output channels `part` of a convolution (geometry of cluster c).
  Result<std::vector<uint8_t>> pack_conv_slice(const Op &op, const Node &n, unsigned c,
                                               const Box &part) const {
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    const Tensor &w = g.tensors[n.inputs[1]];
    std::vector<float> bias(out_c(op), 0.0f);
    if (n.inputs.size() > 2 && n.inputs[2] >= 0)
      bias = g.tensors[n.inputs[2]].data;
    const size_t per_out = w.data.size() / size_t(out_c(op));
    Box ob = chunk_boxes(op, c)[0];
    ob.c0 = part.c0, ob.c1 = part.c1;
    mcl_conv_args a = conv_args_shape(op, need_for(op, 0, ob), ob);
    std::vector<uint8_t> packed(mcl_native_conv_params_size(op.conv_fn(), &a));
    const float *wslice = w.data.data() + size_t(ob.c0) * per_out;
    std::vector<float> transposed_slice;
    if (op.transposed) { // [cin][cout][kh][kw]: gather the slice's output channels
      const size_t cin = size_t(x.C), cout = size_t(out_c(op)), taps = size_t(op.kh * op.kw);
      for (size_t ci = 0; ci < cin; ++ci)
        for (size_t co = size_t(ob.c0); co < size_t(ob.c1); ++co)
          for (size_t t = 0; t < taps; ++t)
            transposed_slice.push_back(w.data[(ci * cout + co) * taps + t]);
      wslice = transposed_slice.data();
    }
    std::vector<uint16_t> half;
    const void *weights = wslice;
    const void *bias_ptr = bias.data() + ob.c0;
    const mcl_weight_quant *quant = nullptr;
    Int8Weights q8;
    if (x.dtype == MCL_DTYPE_F16) {
      for (size_t i = 0; i < size_t(ob.chans()) * per_out; ++i)
        half.push_back(passes::float_to_half(wslice[i]));
      weights = half.data();
    } else if (n.ints.count("int8")) {
      q8 = int8_weights(n, x, y, ob.c0, ob.c1, nullptr);
      weights = q8.values.data();
      bias_ptr = q8.bias.data();
      quant = &q8.quant;
    }
    if (mcl_native_pack_conv(op.conv_fn(), &a, weights, bias_ptr, quant, packed.data(),
                             packed.size()) != MCL_NATIVE_OK)
      return make_error(where(n) + ": packing the weights failed");
    return packed;
  }

  // Packed B slice (output channels `part`) of a Gemm / MatMul, as [n][k] in the SPM order
  // of the input (HWC for a flattened image).
  Result<std::vector<uint8_t>> pack_gemm_slice(const Op &op, const Node &n, const Box &ob) const {
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    const uint32_t k_total = uint32_t(x.H * x.W * x.C);
    mcl_gemm_args a{};
    a.input = {0, 1, 1, k_total, k_total, k_total, 1, x.dtype};
    a.output = {0, 1,      1, uint32_t(ob.chans()), uint32_t(ob.chans()), uint32_t(ob.chans()),
                1, y.dtype};
    const Tensor &b = g.tensors[n.inputs[1]];
    const bool tb = n.op == "Gemm" && n.attr("transB", 0) != 0;
    const float alpha = n.op == "Gemm" ? n.attrf("alpha", 1.0f) : 1.0f;
    const float beta = n.op == "Gemm" ? n.attrf("beta", 1.0f) : 1.0f;
    const int64_t N = y.C;
    std::vector<int64_t> order(k_total); // SPM position -> ONNX K index
    auto it = view_src_shape.find(n.inputs[0]);
    for (int64_t m = 0; m < k_total; ++m) {
      order[m] = m;
      if (it != view_src_shape.end()) {
        const int64_t C = it->second[0], H = it->second[1], W = it->second[2];
        const int64_t ch = m % C, pix = m / C;
        order[m] = ch * H * W + (pix / W) * W + pix % W;
      }
    }
    std::vector<uint8_t> packed(mcl_native_gemm_params_size(&a));
    std::vector<float> bt, bias(ob.chans(), 0.0f);
    std::vector<uint16_t> half;
    const void *bmat = nullptr;
    const void *bias_ptr = bias.data();
    const mcl_weight_quant *quant = nullptr;
    Int8Weights q8;
    if (n.ints.count("int8")) {
      q8 = int8_weights(n, x, y, ob.c0, ob.c1, &order);
      bmat = q8.values.data();
      bias_ptr = q8.bias.data();
      quant = &q8.quant;
    } else {
      bt.resize(size_t(ob.chans()) * k_total);
      for (int64_t j = 0; j < ob.chans(); ++j) {
        const int64_t nn = ob.c0 + j;
        for (int64_t m = 0; m < k_total; ++m) {
          const int64_t kk = order[m];
          bt[j * k_total + m] = alpha * b.data[tb ? nn * k_total + kk : kk * N + nn];
        }
        if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
          const auto &cd = g.tensors[n.inputs[2]].data;
          bias[j] = beta * cd[cd.size() == 1 ? 0 : nn];
        }
      }
      bmat = bt.data();
      if (x.dtype == MCL_DTYPE_F16) {
        for (float v : bt)
          half.push_back(passes::float_to_half(v));
        bmat = half.data();
      }
    }
    if (mcl_native_pack_gemm(&a, bmat, 1, bias_ptr, quant, packed.data(), packed.size()) !=
        MCL_NATIVE_OK)
      return make_error(where(n) + ": packing the weights failed");
    return packed;
  }

  // INT8 output clamp of a fused activation, in the output's quantized domain.
  static void int8_clamp(const Act &y, const mcl_activation &act, int32_t &lo, int32_t &hi) {
    lo = y.dtype == MCL_DTYPE_U8 ? 0 : -128;
    hi = y.dtype == MCL_DTYPE_U8 ? 255 : 127;
    auto q = [&](float v) {
      const double r = std::nearbyint(double(v) / y.scale) + y.zero_point;
      return int32_t(std::clamp<double>(r, lo, hi));
    };
    if (act.kind == MCL_ACT_RELU)
      lo = std::max(lo, y.zero_point);
    if (act.kind == MCL_ACT_CLIP)
      lo = std::max(lo, q(act.alpha)), hi = std::min(hi, q(act.beta));
  }

  // INT8 weights of output channels [c0, c1) of a Conv ([cout][...]) or transposed Gemm
  // ([n][k]): integer values, int32 bias requantized to input_scale * weight_scale, and the
  // quantization block for the packers.
  struct Int8Weights {
    std::vector<int8_t> values;
    std::vector<int32_t> bias;
    std::vector<float> scales;
    std::vector<int32_t> zeros;
    mcl_weight_quant quant{};
  };
  Int8Weights int8_weights(const Node &n, const Act &x, const Act &y, int64_t c0, int64_t c1,
                           const std::vector<int64_t> *k_order) const {
    const Tensor &w = g.tensors[n.inputs[1]];
    const int64_t cout = w.shape[0];
    const size_t per_out = w.qvalues.size() / size_t(cout);
    Int8Weights r;
    for (int64_t o = c0; o < c1; ++o) {
      for (size_t k = 0; k < per_out; ++k) {
        const size_t src = k_order ? size_t((*k_order)[k]) : k;
        r.values.push_back(int8_t(std::clamp(w.qvalues[size_t(o) * per_out + src], -128, 127)));
      }
      const float ws = w.qscales[w.qscales.size() == 1 ? 0 : size_t(o)];
      r.scales.push_back(ws);
      r.zeros.push_back(w.qzeros[w.qzeros.size() == 1 ? 0 : size_t(o)]);
      float b = 0.0f;
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        const auto &bd = g.tensors[n.inputs[2]].data;
        b = bd[bd.size() == 1 ? 0 : size_t(o)] * (n.op == "Gemm" ? n.attrf("beta", 1.0f) : 1.0f);
      }
      r.bias.push_back(int32_t(std::nearbyint(double(b) / (double(x.scale) * ws))));
    }
    r.quant.input_scale = x.scale;
    r.quant.output_scale = y.scale;
    r.quant.weight_scales = r.scales.data();
    r.quant.weight_zero_points = r.zeros.data();
    r.quant.weight_scale_count = uint32_t(r.scales.size());
    return r;
  }

  // One compute call: argument blocks (several for Concat).
  struct Call {
    std::vector<format::Record> records;
    uint64_t cost = 0;
    mcl_native_cost_breakdown lanes{}; // summed over the call's records
  };

  // `params_spm`: where the parameters (of ob's output channels) are in the SPM.
  Result<Call> make_call(const Op &op, unsigned c, const Box &ob, uint64_t params_spm) const {
    const Node &n = g.nodes[op.node];
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    const Box ib = need_for(op, 0, ob);
    const mcl_tile in0 = tile_of(x, c, ib, op.stage_in[0]);
    const mcl_tile out_tile = tile_of(y, c, stored(op, ob), op.stage_out);
    Call call;
    auto add = [&](uint32_t fn, const auto &block) {
      call.records.push_back(format::Record::make(fn, block));
      mcl_native_cost_breakdown b{};
      mcl_native_cost_detail(fn, &block, opt.device.pes_per_cluster, &b);
      call.cost += b.total;
      call.lanes.matrix += b.matrix;
      call.lanes.load_store += b.load_store;
      call.lanes.vliw += b.vliw;
      call.lanes.overhead += b.overhead;
      call.lanes.macs += b.macs;
      call.lanes.padded_macs += b.padded_macs;
    };
    switch (op.kind) {
    case Kind::Conv: {
      mcl_conv_args a = conv_args_shape(op, ib, ob);
      a.input = in0;
      a.output = out_tile;
      a.params_offset = uint32_t(params_spm);
      a.pad_row_offset = uint32_t(buffers[op.pad_row].offset);
      a.act = n.act;
      if (n.ints.count("int8")) {
        a.input_zero_point = x.zero_point;
        a.output_zero_point = y.zero_point;
        int8_clamp(y, n.act, a.output_min, a.output_max);
        a.act = {MCL_ACT_NONE, 0.0f, 0.0f};
      }
      // No address table is stored (no blob bytes, no DMA, no SPM): the call derives it from
      // the geometry; only tiles with taps in the padding need the pad row for that.
      const int64_t last_y = int64_t(a.origin_y) + int64_t(a.output.h - 1) * a.stride_h +
                             int64_t(a.kernel_h - 1) * a.dilation_h;
      const int64_t last_x = int64_t(a.origin_x) + int64_t(a.output.w - 1) * a.stride_w +
                             int64_t(a.kernel_w - 1) * a.dilation_w;
      if (!op.transposed && a.origin_y >= 0 && a.origin_x >= 0 && last_y < int64_t(a.input.h) &&
          last_x < int64_t(a.input.w)) {
        a.flags = MCL_CONV_NO_TABLE;
      } else {
        a.flags = MCL_CONV_IMPLICIT_TABLE;
      }
      add(op.conv_fn(), a);
      break;
    }
    case Kind::Pool:
    case Kind::GlobalPool: {
      mcl_pool_args a{};
      a.input = in0;
      a.output = out_tile;
      a.kind = (n.op == "MaxPool" || n.op == "GlobalMaxPool") ? MCL_POOL_MAX : MCL_POOL_AVG;
      a.in_quant = {x.scale, x.zero_point};
      a.out_quant = {y.scale, y.zero_point};
      if (op.kind == Kind::GlobalPool) {
        a.kernel_h = uint16_t(x.H), a.kernel_w = uint16_t(x.W);
        a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
        a.count_y1 = int32_t(x.H), a.count_x1 = int32_t(x.W);
      } else {
        a.kernel_h = uint16_t(op.kh), a.kernel_w = uint16_t(op.kw);
        a.stride_h = uint16_t(op.sh), a.stride_w = uint16_t(op.sw);
        a.dilation_h = uint16_t(op.dh), a.dilation_w = uint16_t(op.dw);
        a.origin_y = int32_t(ob.y0 * op.sh - op.pt - ib.y0);
        a.origin_x = int32_t(-op.pl);
        if (n.attr("count_include_pad", 0)) {
          a.count_y0 = int32_t(-op.pt - ib.y0), a.count_y1 = int32_t(x.H + op.pb - ib.y0);
          a.count_x0 = int32_t(-op.pl), a.count_x1 = int32_t(x.W + op.pr);
        } else {
          a.count_y0 = int32_t(-ib.y0), a.count_y1 = int32_t(x.H - ib.y0);
          a.count_x0 = 0, a.count_x1 = int32_t(x.W);
        }
      }
      add(MCL_NATIVE_FN_POOL2D, a);
      break;
    }
    case Kind::Gemm: {
      mcl_gemm_args a{};
      const uint32_t k_total = uint32_t(x.H * x.W * x.C);
      a.input = in0;
      a.input.h = a.input.w = 1;
      a.input.c = k_total;
      a.input.row_stride = a.input.pixel_stride = k_total;
      a.output = out_tile;
      a.params_offset = uint32_t(params_spm);
      a.act = n.act;
      if (n.ints.count("int8")) {
        a.input_zero_point = x.zero_point;
        a.output_zero_point = y.zero_point;
        int8_clamp(y, n.act, a.output_min, a.output_max);
        a.act = {MCL_ACT_NONE, 0.0f, 0.0f};
      }
      add(MCL_NATIVE_FN_GEMM, a);
      break;
    }
    case Kind::Eltwise: {
      // A broadcast operand's tile takes the output's extent with 0 strides.
      auto repeat = [&](mcl_tile t) {
        if (t.h != out_tile.h || t.w != out_tile.w) {
          t.h = out_tile.h, t.w = out_tile.w;
          t.row_stride = t.pixel_stride = 0;
        }
        if (t.c != out_tile.c) {
          t.c = out_tile.c;
          t.channel_stride = 0;
        }
        return t;
      };
      mcl_eltwise_args a{};
      a.a = repeat(in0);
      a.b = repeat(tile_of(acts[op.ins[1]], c, need_for(op, 1, ob), op.stage_in[1]));
      a.output = out_tile;
      a.op = n.op == "Add"   ? MCL_ELTWISE_ADD
             : n.op == "Sub" ? MCL_ELTWISE_SUB
             : n.op == "Mul" ? MCL_ELTWISE_MUL
                             : MCL_ELTWISE_DIV;
      a.act = n.act;
      a.a_quant = a.b_quant = a.out_quant = {1.0f, 0};
      if (n.ints.count("int8")) { // requantizing INT8 add: each operand its own quantization
        const Act &xb = acts[op.ins[1]];
        a.a_quant = {x.scale, x.zero_point};
        a.b_quant = {xb.scale, xb.zero_point};
        a.out_quant = {y.scale, y.zero_point};
      }
      add(MCL_NATIVE_FN_ELTWISE, a);
      break;
    }
    case Kind::ScaleShift: {
      mcl_scale_shift_args a{};
      a.input = in0;
      a.output = out_tile;
      a.act = n.act;
      a.in_quant = a.out_quant = {1.0f, 0};
      a.params_offset = uint32_t(params_spm);
      add(MCL_NATIVE_FN_SCALE_SHIFT, a);
      break;
    }
    case Kind::Activation:
    case Kind::Softmax:
    case Kind::Convert: {
      mcl_unary_args a{};
      a.input = in0;
      a.output = out_tile;
      if (op.kind == Kind::Activation)
        passes::activation_of(g, n, a.act);
      a.in_quant = {x.scale, x.zero_point};
      a.out_quant = {y.scale, y.zero_point};
      add(op.kind == Kind::Softmax   ? MCL_NATIVE_FN_SOFTMAX
          : op.kind == Kind::Convert ? MCL_NATIVE_FN_COPY
                                     : MCL_NATIVE_FN_ACTIVATION,
          a);
      break;
    }
    case Kind::Shuffle: {
      // Output channel b*G + a is input channel a*(C/G) + b: group a's contiguous channels
      // are copied to every G-th output channel starting at a.
      const int64_t G = op.shuffle_groups, per = x.C / G;
      for (int64_t grp = 0; grp < G; ++grp) {
        mcl_unary_args a{};
        a.input = tile_of(x, c, {ib.y0, ib.y1, grp * per, (grp + 1) * per}, op.stage_in[0]);
        a.output = out_tile;
        a.output.offset += uint32_t(grp * y.es);
        a.output.c = uint32_t(per);
        a.output.channel_stride = uint32_t(G);
        a.in_quant = {x.scale, x.zero_point};
        a.out_quant = {y.scale, y.zero_point};
        add(MCL_NATIVE_FN_COPY, a);
      }
      break;
    }
    case Kind::Resize: {
      mcl_resize_args a{};
      a.input = in0;
      a.output = out_tile;
      const std::string mode = n.strings.count("mode") ? n.strings.at("mode") : "nearest";
      const std::string coord = n.strings.count("coordinate_transformation_mode")
                                    ? n.strings.at("coordinate_transformation_mode")
                                    : "half_pixel";
      const std::string nearest =
          n.strings.count("nearest_mode") ? n.strings.at("nearest_mode") : "round_prefer_floor";
      a.mode = mode == "linear" ? MCL_RESIZE_BILINEAR : MCL_RESIZE_NEAREST;
      a.coord_mode = coord == "asymmetric"           ? MCL_COORD_ASYMMETRIC
                     : coord == "align_corners"      ? MCL_COORD_ALIGN_CORNERS
                     : coord == "pytorch_half_pixel" ? MCL_COORD_PYTORCH_HALF_PIXEL
                                                     : MCL_COORD_HALF_PIXEL;
      a.nearest_mode = nearest == "round_prefer_ceil" ? MCL_NEAREST_ROUND_PREFER_CEIL
                       : nearest == "floor"           ? MCL_NEAREST_FLOOR
                       : nearest == "ceil"            ? MCL_NEAREST_CEIL
                                                      : MCL_NEAREST_ROUND_PREFER_FLOOR;
      a.scale_h = n.attrf("scale_h", 1.0f);
      a.scale_w = n.attrf("scale_w", 1.0f);
      a.full_in_h = uint32_t(x.H), a.full_in_w = uint32_t(x.W);
      a.full_out_h = uint32_t(y.H), a.full_out_w = uint32_t(y.W);
      a.in_y0 = int32_t(ib.y0), a.in_x0 = 0;
      a.out_y0 = int32_t(ob.y0), a.out_x0 = 0;
      a.in_quant = {x.scale, x.zero_point};
      a.out_quant = {y.scale, y.zero_point};
      add(MCL_NATIVE_FN_RESIZE, a);
      break;
    }
    case Kind::Concat: {
      int64_t ch = 0;
      for (size_t i = 0; i < op.ins.size(); ++i) {
        const Act &xi = acts[op.ins[i]];
        mcl_unary_args a{};
        a.input = tile_of(xi, c, need_for(op, i, ob), op.stage_in[i]);
        a.output = out_tile;
        a.output.offset += uint32_t(ch * y.es);
        a.output.c = uint32_t(xi.C);
        a.in_quant = a.out_quant = {1.0f, 0};
        if (n.ints.count("int8")) // INT8 inputs of other scales are requantized
          a.in_quant = {xi.scale, xi.zero_point}, a.out_quant = {y.scale, y.zero_point};
        ch += xi.C;
        add(MCL_NATIVE_FN_COPY, a);
      }
      break;
    }
    }
    char msg[256];
    for (const auto &r : call.records)
      if (mcl_native_validate(r.function_id, r.args.data(), r.args.size(), opt.device.spm_bytes,
                              msg, sizeof msg) != MCL_NATIVE_OK)
        return make_error(where(n) + ": internal error, invalid arguments: " + msg);
    return call;
  }

  // DMA helpers ---------------------------------------------------------
  static kbin_dma_args dma(uint32_t kind) {
    kbin_dma_args d{};
    d.kind = kind;
    d.notify_signal = -1;
    return d;
  }
  static kbin_dma_shape linear(uint64_t bytes) { return {bytes, 1, 1, bytes, bytes, bytes, bytes}; }
  static uint64_t bytes_of(const kbin_dma_args &d) {
    return d.shape.row_bytes * d.shape.rows * d.shape.planes;
  }

  // Transfer of `box` between an activation's DDR home (or its network argument, for SPM
  // homed inputs/outputs) and an SPM tile (offset, pixel stride pc in elements).
  kbin_dma_args ddr_transfer(const Act &a, kbin_ddr_ref home, bool onnx_layout, const Box &box,
                             uint64_t spm_offset, uint64_t pc, bool to_spm) const {
    kbin_dma_args d = dma(to_spm ? KBIN_DMA_LOAD : KBIN_DMA_STORE);
    d.spm_offset = spm_offset;
    d.ddr = home;
    const uint64_t es = a.es, pixels = uint64_t(box.rows()) * a.W;
    kbin_dma_shape &s = d.shape;
    uint64_t ddr_row, ddr_plane, spm_row, spm_plane;
    if (onnx_layout) {
      d.ddr.offset += (uint64_t(box.c0) * a.H * a.W + uint64_t(box.y0) * a.W) * es;
      if (a.H * a.W == 1 || a.C == 1) { // channel-last and NCHW orders coincide
        s = linear((a.H * a.W == 1 ? uint64_t(box.chans()) : pixels) * es);
        return d;
      }
      // planes = channels, rows = pixels of one channel, row = one element.
      s.row_bytes = es, s.rows = pixels, s.planes = uint64_t(box.chans());
      ddr_row = es, ddr_plane = uint64_t(a.H) * a.W * es;
      spm_row = pc * es, spm_plane = es;
    } else {
      d.ddr.offset += (uint64_t(box.y0) * a.W * a.C + uint64_t(box.c0)) * es;
      s.row_bytes = uint64_t(box.chans()) * es, s.rows = uint64_t(a.W),
      s.planes = uint64_t(box.rows());
      ddr_row = uint64_t(a.C) * es, ddr_plane = uint64_t(a.W) * a.C * es;
      spm_row = pc * es, spm_plane = uint64_t(a.W) * pc * es;
      if (box.chans() == a.C && int64_t(pc) == a.C) { // whole rows: one contiguous block
        s = linear(pixels * a.C * es);
        return d;
      }
    }
    if (to_spm) {
      s.src_row_stride = ddr_row, s.src_plane_stride = ddr_plane;
      s.dst_row_stride = spm_row, s.dst_plane_stride = spm_plane;
    } else {
      s.src_row_stride = spm_row, s.src_plane_stride = spm_plane;
      s.dst_row_stride = ddr_row, s.dst_plane_stride = ddr_plane;
    }
    return d;
  }

  // SPM box of cluster `from` -> the same tensor box in cluster `to`'s buffer.
  kbin_dma_args exchange(const Act &a, unsigned from, unsigned to, const Box &box) const {
    kbin_dma_args d = dma(KBIN_DMA_EXCHANGE);
    d.dst_cluster = to;
    const mcl_tile src = tile_of(a, from, box), dst = tile_of(a, to, box);
    d.spm_offset = src.offset;
    d.spm_dst_offset = dst.offset;
    const uint64_t es = a.es;
    d.shape.row_bytes = uint64_t(box.chans()) * es;
    d.shape.rows = uint64_t(a.W);
    d.shape.planes = uint64_t(box.rows());
    d.shape.src_row_stride = uint64_t(src.pixel_stride) * es;
    d.shape.src_plane_stride = uint64_t(src.row_stride) * es;
    d.shape.dst_row_stride = uint64_t(dst.pixel_stride) * es;
    d.shape.dst_plane_stride = uint64_t(dst.row_stride) * es;
    if (src.pixel_stride == box.chans() && dst.pixel_stride == box.chans()) {
      // whole pixels: rows of a band are contiguous on both sides
      d.shape.row_bytes *= uint64_t(a.W);
      d.shape.rows = 1;
      d.shape.src_row_stride = d.shape.row_bytes;
      d.shape.dst_row_stride = d.shape.row_bytes;
    }
    return d;
  }

  uint64_t dma_cycles(uint64_t bytes, bool ddr) const {
    if (bytes == 0)
      return 0;
    const auto &d = opt.device;
    const double bw = ddr ? d.ddr_bytes_per_cycle : d.noc_bytes_per_cycle;
    return d.dma_latency_cycles + uint64_t(std::ceil(double(bytes) / std::max(bw, 1e-9)));
  }

  void push(unsigned c, const kbin_dma_args &d) {
    prog.streams[c].push_back(format::Record::make(KBIN_FN_DMA, d));
  }
  void wait(unsigned c) {
    prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{0, 0}));
  }

  // Loads slice j of op s's parameters into the SPM at `spm`: one multicast (shared
  // parameters; the issuing cluster rotates between operators to spread the RDMA work) or
  // one load per cluster. With `notify`, each destination's weight signal counts the arrival.
  void emit_slice_load(size_t s, size_t j, uint64_t spm, bool notify, std::vector<uint64_t> &ddr) {
    const Op &op = ops[s];
    const ParamBlock &pb = op.params;
    auto load = [&](unsigned issuer, const ParamSlice &ps, uint32_t mask) {
      kbin_dma_args d = dma(mask ? KBIN_DMA_MULTICAST : KBIN_DMA_LOAD);
      d.cluster_mask = mask;
      d.ddr = {KBIN_DDR_PARAMS, 0, ps.blob_offset};
      d.spm_offset = spm;
      d.shape = linear(ps.bytes.size());
      if (notify)
        d.notify_signal = kWeightSignal;
      push(issuer, d);
      ddr[issuer] += ps.bytes.size();
    };
    if (pb.shared) {
      if (pb.slots.empty() || pb.slots[0].size() <= j)
        return;
      uint32_t mask = 0;
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          mask |= 1u << c;
      load(unsigned(s % K), pb.slots[0][j], mask);
      if (notify)
        for (unsigned c = 0; c < K; ++c)
          if (mask & (1u << c))
            ++weight_signals[c];
      return;
    }
    for (unsigned c = 0; c < K && c < pb.slots.size(); ++c)
      if (pb.slots[c].size() > j) {
        load(c, pb.slots[c][j], 0);
        if (notify)
          ++weight_signals[c];
      }
  }

  // Slice 0 of op s's parameters (issued during step s, used in step s + 1).
  void emit_param_loads(size_t s, std::vector<uint64_t> &ddr) {
    if (ops[s].params.buffer >= 0)
      emit_slice_load(s, 0, buffers[ops[s].params.buffer].offset, false, ddr);
  }

  // SPM offset of the buffer holding slice j of op's parameters.
  uint64_t slice_spm(const Op &op, size_t j) const {
    return buffers[j % 2 == 0 ? op.params.buffer : op.params.buffer2].offset;
  }

  void end_step() {
    for (unsigned c = 0; c < K; ++c) {
      wait(c);
      if (K > 1)
        prog.streams[c].push_back(format::Record{KBIN_FN_BARRIER, {}});
    }
  }

  Result<void> emit() {
    prog.streams.assign(K, {});
    weight_signals.assign(K, 0);
    const auto &dev = opt.device;
    // Kernel arguments: inputs, then outputs.
    auto describe = [&](int t, uint32_t role, uint32_t index) {
      const Tensor &ten = g.tensors[t];
      format::TensorDesc d;
      d.name = ten.name;
      d.role = role;
      d.arg_index = index;
      d.dtype = MCL_DTYPE_F32;
      for (int64_t v : ten.shape)
        d.dims.push_back(uint64_t(v));
      d.byte_size = uint64_t(ten.elements()) * 4;
      prog.tensors.push_back(d);
    };
    for (int t : g.inputs)
      describe(t, KBIN_ROLE_INPUT, input_arg[t]);
    for (int t : g.outputs)
      describe(t, KBIN_ROLE_OUTPUT, output_arg[t]);
    prog.arg_count = uint32_t(input_arg.size() + output_arg.size());

    // Prologue: SPM-homed network inputs and the first operator's parameters.
    std::vector<uint64_t> ddr(K, 0);
    for (int t : g.inputs) {
      const Act &a = acts[act_of[t]];
      if (a.in_ddr)
        continue;
      for (unsigned c = 0; c < K; ++c) {
        if (a.need[c].empty())
          continue;
        const mcl_tile tl = tile_of(a, c, a.need[c]);
        kbin_dma_args d = ddr_transfer(a, {KBIN_DDR_ARG, input_arg[t], 0}, true, a.need[c],
                                       tl.offset, tl.pixel_stride, true);
        push(c, d);
        ddr[c] += bytes_of(d);
      }
    }
    if (!ops.empty() && !policy.no_prefetch.count(ops[0].node))
      emit_param_loads(0, ddr);
    end_step();
    std::vector<std::vector<size_t>> step_ends(1, stream_sizes()); // prologue, then each op
    uint64_t clock = dma_cycles(*std::max_element(ddr.begin(), ddr.end()), true);
    uint64_t input_bytes = std::accumulate(ddr.begin(), ddr.end(), uint64_t{0});

    for (size_t s = 0; s < ops.size(); ++s) {
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      const Act &y = acts[op.out];
      OpReport rep;
      rep.name = n.name;
      rep.op = n.op + (n.act.kind != MCL_ACT_NONE ? "+act" : "");
      rep.split = op.split + (op.chunks > 1 ? " x" + std::to_string(op.chunks) : "") +
                  (op.params.slices() > 1 ? " w" + std::to_string(op.params.slices()) : "");
      rep.start_cycle = clock;
      std::vector<uint64_t> pddr(K, 0), stream_ddr(K, 0), compute(K, 0);
      uint64_t own_load_cycles = 0, slice_barriers = 0;
      mcl_native_cost_breakdown lanes{};
      if (op.kind == Kind::Conv) {
        const mcl_conv_args a = conv_args_shape(op, need_for(op, 0, op.out_box[0]), op.out_box[0]);
        rep.shape = std::to_string(a.kernel_h) + "x" + std::to_string(a.kernel_w) + "/" +
                    std::to_string(a.stride_h) + " " + std::to_string(acts[op.ins[0]].C) + "->" +
                    std::to_string(y.C) + (a.groups > 1 ? " g" + std::to_string(a.groups) : "");
      }
      if (policy.no_prefetch.count(op.node)) { // load own parameters first, then meet
        std::vector<uint64_t> own(K, 0);
        emit_param_loads(s, own);
        end_step();
        own_load_cycles = dma_cycles(*std::max_element(own.begin(), own.end()), true) +
                          (K > 1 ? dev.barrier_latency_cycles : 0);
        for (unsigned c = 0; c < K; ++c)
          pddr[c] += own[c];
      }
      if (s + 1 < ops.size() && !policy.no_prefetch.count(ops[s + 1].node))
        emit_param_loads(s + 1, pddr);
      // Parameters streamed in output-channel slices: slice j+1 loads while slice j computes;
      // slice j+2 reuses slice j's buffer once every cluster is past slice j (a barrier for
      // multicast slices; program order for a cluster's own loads).
      const size_t nslices = op.params.buffer2 >= 0 ? op.params.slices() : 1;
      std::vector<std::vector<uint64_t>> arrival(nslices, std::vector<uint64_t>(K, 0));
      std::vector<std::vector<Box>> staged(op.ins.size(), std::vector<Box>(K, Box{}));
      for (unsigned c = 0; c < K; ++c)
        rep.tiles += !op.out_box[c].empty();
      for (size_t j = 0; j < nslices; ++j) {
        if (j + 1 < nslices) {
          emit_slice_load(s, j + 1, slice_spm(op, j + 1), true, pddr);
          arrival[j + 1] = weight_signals;
        }
        for (unsigned c = 0; c < K; ++c) {
          std::vector<Box> parts = {op.out_box[c]};
          if (nslices > 1)
            parts = weight_slices(op, op.out_box[c]);
          if (op.out_box[c].empty() || j >= parts.size())
            continue;
          if (j > 0) {
            kbin_wait_signal_args w{kWeightSignal, 0, arrival[j][c]};
            prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_SIGNAL, w));
          }
          for (Box ob : chunk_boxes(op, c)) {
            ob.c0 = parts[j].c0, ob.c1 = parts[j].c1;
            auto call = make_call(op, c, ob, op.params.buffer >= 0 ? slice_spm(op, j) : 0);
            if (!call)
              return call.error();
            // Streamed operands come in first (once when the box they need is the same).
            bool loaded = false;
            for (size_t i = 0; i < op.ins.size(); ++i) {
              const Act &x = acts[op.ins[i]];
              const Box ib = need_for(op, i, ob);
              if (!x.in_ddr || (staged[i][c].y0 == ib.y0 && staged[i][c].y1 == ib.y1 &&
                                staged[i][c].c0 == ib.c0 && staged[i][c].c1 == ib.c1))
                continue;
              kbin_dma_args d = ddr_transfer(x, x.home, x.onnx_layout, ib,
                                             buffers[op.stage_in[i]].offset, ib.chans(), true);
              push(c, d);
              stream_ddr[c] += bytes_of(d);
              staged[i][c] = ib;
              loaded = true;
            }
            if (loaded || y.in_ddr)
              wait(c); // operands in place, and the previous chunk's store has left staging
            for (auto &r : call.value().records)
              prog.streams[c].push_back(r);
            compute[c] += call.value().cost;
            const mcl_native_cost_breakdown &l = call.value().lanes;
            lanes.matrix += l.matrix;
            lanes.load_store += l.load_store;
            lanes.vliw += l.vliw;
            lanes.overhead += l.overhead;
            rep.macs += l.macs;
            rep.padded_macs += l.padded_macs;
            if (y.in_ddr) {
              kbin_dma_args d = ddr_transfer(y, y.home, y.onnx_layout, stored(op, ob),
                                             buffers[op.stage_out].offset, ob.chans(), false);
              push(c, d);
              stream_ddr[c] += bytes_of(d);
            }
          }
        }
        if (op.params.shared && j + 2 < nslices && K > 1) {
          for (unsigned c = 0; c < K; ++c)
            prog.streams[c].push_back(format::Record{KBIN_FN_BARRIER, {}});
          slice_barriers += 1;
        }
      }
      rep.compute_cycles = *std::max_element(compute.begin(), compute.end());
      {
        const std::pair<uint64_t, const char *> by_lane[] = {{lanes.matrix, "matrix"},
                                                             {lanes.load_store, "load/store"},
                                                             {lanes.vliw, "vliw"},
                                                             {lanes.overhead, "overhead"}};
        const auto *top = &by_lane[0];
        for (const auto &l : by_lane)
          if (l.first > top->first)
            top = &l;
        rep.bound = top->first ? top->second : "";
      }
      // Exchanges: every other cluster's needed part of what this cluster produced.
      std::vector<uint64_t> noc(K, 0);
      if (!y.in_ddr)
        for (unsigned from = 0; from < K; ++from)
          for (unsigned to = 0; to < K; ++to) {
            if (from == to)
              continue;
            Box box = intersect(y.need[to], stored(op, op.out_box[from]));
            if (box.empty())
              continue;
            kbin_dma_args d = exchange(y, from, to, box);
            push(from, d);
            noc[from] += bytes_of(d);
            rep.exchange_bytes += bytes_of(d);
          }
      // Stores of SPM-homed network outputs produced here.
      for (auto [t, argi] : output_arg) {
        if (act_of[t] != op.out || y.in_ddr)
          continue;
        for (unsigned c = 0; c < K; ++c) {
          const Box part = stored(op, op.out_box[c]); // what this operator wrote here
          if (part.empty())
            continue;
          const mcl_tile tl = tile_of(y, c, part);
          kbin_dma_args d = ddr_transfer(y, {KBIN_DDR_ARG, argi, 0}, true, part, tl.offset,
                                         tl.pixel_stride, false);
          push(c, d);
          stream_ddr[c] += bytes_of(d);
        }
      }
      end_step();
      step_ends.push_back(stream_sizes());
      uint64_t step_cycles = 0, pmax = 0, nmax = 0;
      for (unsigned c = 0; c < K; ++c) {
        // Streaming serializes with compute; prefetch overlaps it; exchanges follow it.
        const uint64_t busy = compute[c] + dma_cycles(stream_ddr[c], true);
        step_cycles = std::max(step_cycles, std::max(busy, dma_cycles(pddr[c], true)) +
                                                dma_cycles(noc[c], false));
        pmax = std::max(pmax, pddr[c] + stream_ddr[c]);
        nmax = std::max(nmax, noc[c]);
      }
      rep.ddr_bytes = std::accumulate(pddr.begin(), pddr.end(), uint64_t{0}) +
                      std::accumulate(stream_ddr.begin(), stream_ddr.end(), uint64_t{0}) +
                      (s == 0 ? input_bytes : 0);
      rep.dma_cycles = dma_cycles(pmax, true) + dma_cycles(nmax, false);
      rep.cycles = own_load_cycles + step_cycles +
                   (K > 1 ? (1 + slice_barriers) * dev.barrier_latency_cycles : 0);
      clock += rep.cycles;
      rep.spm_peak.assign(K, 0);
      for (const SpmBuffer &b : buffers)
        if (b.first <= int(s) + 1 && int(s) + 1 <= b.last)
          for (unsigned c = 0; c < K; ++c)
            if (b.bytes[c])
              rep.spm_peak[c] = std::max(rep.spm_peak[c], b.offset + b.bytes[c]);
      out.ops.push_back(rep);
    }
    out.total_cycles = clock;
    // The per-operator figures above are the quick analytic estimate; the replay of the
    // emitted streams under the simulator's timing rules replaces the step times.
    auto timing = predict_timing(prog, dev, program_ddr_bytes_per_cycle(dev, K));
    if (!timing)
      return timing.error();
    auto step_end = [&](size_t s) {
      uint64_t t = 0;
      for (unsigned c = 0; c < K; ++c)
        if (step_ends[s][c] > 0)
          t = std::max(t, timing.value().time_after[c][step_ends[s][c] - 1]);
      return t;
    };
    for (size_t s = 0; s < out.ops.size(); ++s) {
      out.ops[s].start_cycle = step_end(s);
      out.ops[s].cycles = step_end(s + 1) - step_end(s);
    }
    out.estimated_cycles = clock;
    out.total_cycles = timing.value().total_cycles;
    return {};
  }

  std::vector<size_t> stream_sizes() const {
    std::vector<size_t> sizes(K);
    for (unsigned c = 0; c < K; ++c)
      sizes[c] = prog.streams[c].size();
    return sizes;
  }

  // Plans and allocates; false (with `failure`) when the SPM is too small for this policy.
  Result<bool> layout() {
    if (auto r = plan(); !r)
      return r.error();
    if (auto r = lifetimes(); !r)
      return r.error();
    if (auto r = plan_params(); !r)
      return r.error();
    return allocate();
  }

  Result<CompileOutput> finish() {
    if (auto r = pack_params(); !r)
      return r.error();
    if (auto r = emit(); !r)
      return r.error();
    prog.cluster_count = K;
    prog.pes_per_cluster = opt.device.pes_per_cluster;
    prog.spm_bytes = opt.device.spm_bytes;
    prog.preset = opt.device.name.substr(0, 31);
    out.params_bytes = prog.params.size();
    for (const SpmBuffer &b : buffers)
      if (b.size())
        out.buffers.push_back({b.name, b.offset, b.size(), b.first, b.last});
    for (const Act &a : acts)
      if (a.in_ddr)
        out.spilled.push_back(g.tensors[a.tensor].name);
    out.program = std::move(prog);
    out.program.report_json = out.report_json();
    if (auto r = format::validate_program(out.program); !r)
      return make_error("internal error: the emitted program is invalid: " + r.error().message);
    return std::move(out);
  }
};

// A batch of B images: the one-image program runs B times in a row, each copy reading and
// writing its own image of the argument buffers (arguments hold B images back to back).
Result<void> replicate_batch(CompileOutput &out, int64_t batch, const CompileOptions &options) {
  if (batch <= 1)
    return {};
  format::Program &p = out.program;
  std::vector<uint64_t> image_bytes(p.arg_count, 0);
  for (auto &t : p.tensors) {
    if (t.arg_index >= image_bytes.size() || t.dims.empty())
      return make_error("internal error: a batch argument without a descriptor");
    image_bytes[t.arg_index] = t.byte_size;
    t.dims[0] = uint64_t(batch);
    t.byte_size *= uint64_t(batch);
  }
  for (auto &stream : p.streams) {
    const std::vector<format::Record> one = stream;
    stream.clear();
    stream.reserve(one.size() * size_t(batch));
    for (int64_t b = 0; b < batch; ++b)
      for (format::Record r : one) {
        kbin_dma_args d;
        if (r.function_id == KBIN_FN_DMA && r.decode(d) && d.ddr.space == KBIN_DDR_ARG) {
          d.ddr.offset += uint64_t(b) * image_bytes.at(d.ddr.arg_index);
          r = format::Record::make(KBIN_FN_DMA, d);
        }
        stream.push_back(std::move(r));
      }
  }
  auto timing = predict_timing(p, options.device,
                               program_ddr_bytes_per_cycle(options.device, p.cluster_count));
  if (!timing)
    return timing.error();
  out.total_cycles = timing.value().total_cycles;
  out.estimated_cycles *= uint64_t(batch);
  p.report_json = out.report_json();
  if (auto r = format::validate_program(p); !r)
    return make_error("internal error: the batched program is invalid: " + r.error().message);
  return {};
}

// Adjusts the policy after a failed allocation: first tile the operator whose staging is
// the largest live buffer (cheap: more, smaller DMA), else spill the largest SPM-homed
// activation live at that point to DDR (costly: DDR traffic). False: nothing left to try.
bool relax(const Compiler &c, Policy &policy) {
  const uint64_t capacity = c.opt.device.spm_bytes;
  auto panels_of = [&](const Op &op) {
    int64_t widest = 0;
    for (const Box &x : op.out_box)
      widest = std::max(widest, (x.chans() + kPanel - 1) / kPanel);
    return widest;
  };
  // First, once for all operators: parameters above an eighth of the SPM stream in slices
  // of at most that (two slices live at a time), leaving the SPM to activations.
  bool sliced = false;
  for (const SpmBuffer &b : c.buffers) {
    if (b.weights_of < 0 || b.size() <= capacity / 8)
      continue;
    const Op &op = c.ops[b.weights_of];
    const int64_t want = int64_t(
        std::min<uint64_t>(uint64_t(panels_of(op)), op.wslices * (b.size() * 8 / capacity + 1)));
    if (want > op.wslices) {
      policy.wslices[op.node] = int(want);
      sliced = true;
    }
  }
  if (sliced)
    return true;
  std::vector<int> cands = c.failure.candidates;
  std::sort(cands.begin(), cands.end(),
            [&](int a, int b) { return c.buffers[a].size() > c.buffers[b].size(); });
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.op >= 0) {
      const Op &op = c.ops[b.op];
      int64_t rows = 0;
      for (const Box &x : op.out_box)
        rows = std::max(rows, x.rows());
      const bool row_split =
          op.kind == Kind::Conv || op.kind == Kind::Pool || op.kind == Kind::Concat ||
          op.kind == Kind::Resize ||
          ((op.kind == Kind::Eltwise || op.kind == Kind::ScaleShift ||
            op.kind == Kind::Activation || op.kind == Kind::Softmax || op.kind == Kind::Convert) &&
           op.split == "rows");
      if (row_split && op.chunks < rows) {
        policy.chunks[op.node] = int(std::min<int64_t>(rows, op.chunks * 2));
        return true;
      }
    }
  }
  // Then stream large parameters in output-channel slices (no extra DDR traffic: a barrier
  // per slice at most), the largest first.
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.weights_of < 0 || b.size() < c.opt.device.spm_bytes / 64)
      continue;
    const Op &op = c.ops[b.weights_of];
    const int64_t widest = panels_of(op);
    // An operator streaming DDR-homed operands reloads them per slice: not for small weights.
    const bool streams = op.stage_out >= 0 || std::any_of(op.stage_in.begin(), op.stage_in.end(),
                                                          [](int stage) { return stage >= 0; });
    if (op.wslices < widest && !streams) {
      policy.wslices[op.node] = int(std::min<int64_t>(widest, std::max(4, op.wslices * 2)));
      return true;
    }
  }
  // Then give up double buffering of the largest prefetched parameters.
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.prefetched >= 0 && !policy.no_prefetch.count(c.ops[b.prefetched].node)) {
      policy.no_prefetch.insert(c.ops[b.prefetched].node);
      return true;
    }
  }
  // Last resort: spill an activation to DDR. When steps need more bytes than the SPM, the
  // one that removes the most of that excess per byte spilled (per byte of DDR traffic):
  // often a long-lived skip connection rather than the largest tensor of one step.
  std::vector<uint64_t> excess;
  for (const SpmBuffer &b : c.buffers) {
    if (excess.size() <= size_t(b.last))
      excess.resize(size_t(b.last) + 1, 0);
    for (int t = b.first; t <= b.last; ++t)
      excess[size_t(t)] += align_up(b.size());
  }
  for (uint64_t &e : excess)
    e = e > capacity ? e - capacity : 0;
  int best = -1;
  double best_score = -1.0;
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.act < 0 || policy.spilled.count(c.acts[b.act].tensor) || b.size() == 0)
      continue;
    double relieved = 0.0;
    for (int t = b.first; t <= b.last; ++t)
      relieved += double(std::min(b.size(), excess[size_t(t)]));
    const double score = relieved / double(b.size());
    if (score > best_score + 1e-9 ||
        (std::fabs(score - best_score) <= 1e-9 && b.size() > c.buffers[best].size()))
      best = i, best_score = score;
  }
  if (best < 0)
    return false;
  policy.spilled.insert(c.acts[c.buffers[best].act].tensor);
  return true;
}
} // namespace

Result<CompileOutput> compile_graph(const Graph &graph, const CompileOptions &options) {
  if (auto r = options.device.validate(); !r)
    return r.error();
  const unsigned clusters = options.clusters ? options.clusters : options.device.clusters;
  if (clusters == 0 || clusters > options.device.clusters || clusters > KBIN_MAX_CLUSTERS)
    return make_error("--clusters " + std::to_string(clusters) + " out of range 1.." +
                      std::to_string(std::min(options.device.clusters, KBIN_MAX_CLUSTERS)) +
                      " for device '" + options.device.name + "'");
  Graph converted;
  const Graph *input = &graph;
  if (options.precision == "fp16") {
    converted = graph;
    passes::convert_to_fp16(converted);
    input = &converted;
  } else if (options.precision == "int8") {
    // INT8 kernels come from the graph (QDQ / QLinear models, or quantize::quantize_int8 on a
    // calibrated float model): a float graph here has not been quantized.
    if (std::none_of(graph.nodes.begin(), graph.nodes.end(),
                     [](const Node &n) { return !n.dead && n.ints.count("int8"); }))
      return make_error("--precision int8: the model is float; calibration data is needed to "
                        "quantize it (kann compile --calibration inputs.npy)");
  } else if (options.precision != "fp32") {
    return make_error("--precision " + options.precision + " is not supported (fp32, fp16, int8)");
  }
  // Try the all-in-SPM layout first; when it does not fit, tile operators inside the
  // clusters and, as a last resort, spill activations to DDR, until it fits.
  Policy policy;
  for (int attempt = 0; attempt < 400; ++attempt) {
    if (options.progress)
      options.progress("fitting the SPM", size_t(attempt), 0);
    auto c = std::make_unique<Compiler>(*input, options, clusters, policy);
    auto fits = c->layout();
    if (!fits)
      return fits.error();
    if (fits.value()) {
      // Spills were chosen one at a time while the SPM was short: one chosen early may have
      // become unnecessary after later ones. Bring each back on chip if it still fits.
      // (A Compiler keeps a reference to `policy`: it is edited in place and restored.)
      const std::set<int> spilled = policy.spilled;
      for (auto t = spilled.rbegin(); t != spilled.rend(); ++t) {
        const Policy kept = policy;
        policy.spilled.erase(*t);
        auto trial = std::make_unique<Compiler>(*input, options, clusters, policy);
        auto trial_fits = trial->layout();
        if (trial_fits && trial_fits.value())
          c = std::move(trial);
        else
          policy = kept;
      }
      auto done = c->finish();
      if (!done)
        return done.error();
      if (auto r = replicate_batch(done.value(), input->batch, options); !r)
        return r.error();
      return done;
    }
    if (std::getenv("KANN_DEBUG_RELAX")) {
      std::fprintf(stderr, "relax %d: %s\n", attempt, c->failure.message.c_str());
      if (std::atoi(std::getenv("KANN_DEBUG_RELAX")) > 1)
        for (int i : c->failure.candidates)
          std::fprintf(stderr, "   %-70s %9llu  %d-%d\n", c->buffers[i].name.c_str(),
                       (unsigned long long)c->buffers[i].size(), c->buffers[i].first,
                       c->buffers[i].last);
    }
    if (!relax(*c, policy)) {
      // Parameters are sliced down to one panel of output channels, two slices live.
      for (int i : c->failure.candidates) {
        const SpmBuffer &b = c->buffers[i];
        if (b.weights_of >= 0 && 2 * b.size() > options.device.spm_bytes / 2)
          return make_error(c->where(input->nodes[c->ops[b.weights_of].node]) +
                            ": the parameters of its smallest output-channel slice (" +
                            std::to_string(kPanel) + " channels, " + std::to_string(b.size()) +
                            " B, double-buffered) leave too little of the " +
                            std::to_string(options.device.spm_bytes) + " B SPM");
      }
      return make_error(c->failure.message + ", even with every activation in DDR and " +
                        "operators tiled by rows");
    }
  }
  return make_error("SPM allocation did not converge");
}

Result<CompileOutput> compile_onnx_file(const std::string &path, const CompileOptions &options) {
  auto g = import_onnx_file(path);
  if (!g)
    return g.error();
  if (auto r = passes::optimize(g.value()); !r)
    return r.error();
  return compile_graph(g.value(), options);
}

} // namespace kann
