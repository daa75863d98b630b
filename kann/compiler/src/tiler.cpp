// Tile compiler and record emitter. Three phases:
//   plan      per operator: split, the box of output each cluster owns, the input boxes it
//             needs, the SPM buffers (activations, parameters, address tables) with lifetimes
//   allocate  one SPM offset per buffer, identical on every cluster (multicast needs it),
//             placed greedily (largest first, lowest free offset among overlapping lifetimes)
//   emit      parameter blob and per-cluster record streams, step by step
#include "kann/compile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/native/native.h"

namespace kann {

using manycl::make_error;
using manycl::Result;
using ir::Graph;
using ir::Node;
using ir::Tensor;

namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v, uint64_t a = kAlign) { return (v + a - 1) / a * a; }

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
  uint64_t size() const { return *std::max_element(bytes.begin(), bytes.end()); }
};

// Storage of an activation in SPM (views such as Flatten share their source's).
struct Act {
  int tensor = -1;          // the tensor that owns the storage
  int64_t H = 1, W = 1, C = 1;
  uint32_t es = 4;
  uint32_t dtype = MCL_DTYPE_F32;
  std::vector<Box> owned;   // per cluster: produced there
  std::vector<Box> need;    // per cluster: read there by consumers (bounding box)
  std::vector<Box> buf;     // per cluster: bbox(owned, need), what the buffer holds
  int buffer = -1;          // SpmBuffer index
  int input_arg = -1;       // network input: kernel argument
  int first = 0, last = 0;
};

enum class Kind { Conv, Pool, GlobalPool, Gemm, Eltwise, ScaleShift, Activation, Softmax, Concat };

struct ParamBlock {
  bool shared = false; // one block for every cluster: read once, multicast
  std::vector<std::vector<uint8_t>> per_cluster; // shared: one entry
  int buffer = -1;
  std::vector<uint64_t> blob_offset;
};

struct Op {
  int node = -1;
  Kind kind = Kind::Conv;
  std::string split = "rows";
  int out = -1;                 // Act index
  std::vector<int> ins;         // Act indices (activation inputs)
  std::vector<Box> out_box;     // per cluster
  std::vector<std::vector<Box>> in_box; // [input][cluster]
  // Conv/pool geometry
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t groups = 1;
  ParamBlock params;            // packed weights (conv: shared; gemm: per cluster)
  ParamBlock table;             // conv address tables (per cluster)
  int pad_row = -1;             // SpmBuffer for the conv pad row
  std::vector<std::vector<uint8_t>> args; // per cluster argument block (empty: idle)
  uint32_t fn = 0;
};

struct Compiler {
  const Graph &g;
  const CompileOptions &opt;
  unsigned K;
  std::vector<Act> acts;
  std::map<int, int> act_of; // tensor -> Act
  std::map<int, std::vector<int64_t>> view_src_shape; // tensor viewed as 2-D from 4-D: CHW
  std::vector<Op> ops;
  std::vector<SpmBuffer> buffers;
  format::Program prog;
  CompileOutput out;

  Compiler(const Graph &graph, const CompileOptions &o, unsigned clusters)
      : g(graph), opt(o), K(clusters) {}

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
  std::vector<Box> split_channels(int64_t H, int64_t C) const {
    std::vector<Box> v(K);
    for (unsigned k = 0; k < K; ++k)
      v[k] = {0, H, C * k / K, C * (k + 1) / K};
    return v;
  }

  // Input rows a window operator needs for output rows [y0, y1).
  Box window_need(const Op &op, const Act &in, const Box &o) const {
    if (o.empty())
      return {};
    int64_t a = o.y0 * op.sh - op.pt;
    int64_t b = (o.y1 - 1) * op.sh - op.pt + (op.kh - 1) * op.dh + 1;
    a = std::max<int64_t>(a, 0);
    b = std::min<int64_t>(b, in.H);
    if (b <= a) { // the band sees only padding: keep one real row so the tile is not empty
      a = std::min<int64_t>(std::max<int64_t>(a, 0), in.H - 1);
      b = a + 1;
    }
    return {a, b, 0, in.C};
  }

  // ---------------- planning ----------------
  Result<void> plan() {
    for (int t : g.inputs) {
      auto a = act_for(t);
      if (!a)
        return a.error();
    }
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const Node &n = g.nodes[ni];
      if (n.dead)
        continue;
      // Views: Flatten / Reshape share their input's storage.
      if (n.op == "Flatten" || n.op == "Reshape" || n.op == "Squeeze" || n.op == "Unsqueeze") {
        auto src = act_for(n.inputs[0]);
        if (!src)
          return src.error();
        const Tensor &x = g.tensors[n.inputs[0]];
        const Tensor &y = g.tensors[n.outputs[0]];
        const Act &s = acts[src.value()];
        const bool same_order = (s.H * s.W == 1) || (s.C == 1);
        if (y.shape.size() != 2 && !(y.shape.size() == 4 && same_order))
          return make_error(where(n) + ": only reshapes to [1,N] are supported");
        act_of[n.outputs[0]] = src.value();
        if (!same_order)
          view_src_shape[n.outputs[0]] = {s.C, s.H, s.W};
        if (view_src_shape.count(n.inputs[0]))
          view_src_shape[n.outputs[0]] = view_src_shape[n.inputs[0]];
        (void)x;
        continue;
      }
      Op op;
      op.node = int(ni);
      if (n.op == "Conv") op.kind = Kind::Conv;
      else if (n.op == "MaxPool" || n.op == "AveragePool") op.kind = Kind::Pool;
      else if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") op.kind = Kind::GlobalPool;
      else if (n.op == "Gemm" || n.op == "MatMul") op.kind = Kind::Gemm;
      else if (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") op.kind = Kind::Eltwise;
      else if (n.op == "ScaleShift") op.kind = Kind::ScaleShift;
      else if (n.op == "Softmax") op.kind = Kind::Softmax;
      else if (n.op == "Concat") op.kind = Kind::Concat;
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
      if (auto r = plan_op(op, n); !r)
        return r;
      ops.push_back(std::move(op));
    }
    for (int t : g.outputs)
      if (!act_of.count(t))
        return make_error("output '" + g.tensors[t].name + "' is not computed");
    return {};
  }

  Result<void> plan_op(Op &op, const Node &n) {
    Act &y = acts[op.out];
    const Act &x = acts[op.ins[0]];
    switch (op.kind) {
    case Kind::Conv:
    case Kind::Pool: {
      auto k = n.attrs("kernel_shape"), s = n.attrs("strides"), d = n.attrs("dilations"),
           p = n.attrs("pads");
      op.kh = k[0], op.kw = k[1], op.sh = s[0], op.sw = s[1], op.dh = d[0], op.dw = d[1];
      op.pt = p[0], op.pl = p[1], op.pb = p[2], op.pr = p[3];
      op.groups = n.attr("group", 1);
      op.out_box = split_rows(y.H, y.C);
      op.in_box.assign(1, std::vector<Box>(K));
      for (unsigned c = 0; c < K; ++c)
        op.in_box[0][c] = window_need(op, x, op.out_box[c]);
      break;
    }
    case Kind::GlobalPool:
      op.split = "channels";
      op.out_box = split_channels(1, y.C);
      op.in_box.assign(1, std::vector<Box>(K));
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          op.in_box[0][c] = {0, x.H, op.out_box[c].c0, op.out_box[c].c1};
      break;
    case Kind::Gemm:
      op.split = "channels";
      op.out_box = split_channels(1, y.C);
      op.in_box.assign(1, std::vector<Box>(K));
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          op.in_box[0][c] = full(x);
      break;
    case Kind::Softmax:
      if (y.H == 1) {
        op.split = "single";
        op.out_box.assign(K, Box{});
        op.out_box[0] = full(y);
      } else {
        op.out_box = split_rows(y.H, y.C);
      }
      op.in_box.assign(1, op.out_box);
      break;
    case Kind::Eltwise:
    case Kind::ScaleShift:
    case Kind::Activation:
      if (op.kind == Kind::Eltwise)
        for (int i : op.ins)
          if (acts[i].H != y.H || acts[i].W != y.W || acts[i].C != y.C)
            return make_error(where(n) + ": broadcasting between activations is not supported");
      if (y.H >= int64_t(K) || y.H > 1) {
        op.out_box = split_rows(y.H, y.C);
      } else {
        op.split = "channels";
        op.out_box = split_channels(y.H, y.C);
      }
      op.in_box.assign(op.ins.size(), op.out_box);
      break;
    case Kind::Concat: {
      op.out_box = split_rows(y.H, y.C);
      op.in_box.assign(op.ins.size(), std::vector<Box>(K));
      for (size_t i = 0; i < op.ins.size(); ++i)
        for (unsigned c = 0; c < K; ++c)
          if (!op.out_box[c].empty())
            op.in_box[i][c] = {op.out_box[c].y0, op.out_box[c].y1, 0, acts[op.ins[i]].C};
      break;
    }
    }
    for (unsigned c = 0; c < K; ++c)
      y.owned[c] = op.out_box[c];
    for (size_t i = 0; i < op.ins.size(); ++i)
      for (unsigned c = 0; c < K; ++c)
        acts[op.ins[i]].need[c] = bbox(acts[op.ins[i]].need[c], op.in_box[i][c]);
    return {};
  }

  // Steps: 0 = prologue, op s runs in step s + 1.
  Result<void> lifetimes() {
    const int steps = int(ops.size()) + 1;
    for (Act &a : acts) {
      a.first = steps;
      a.last = 0;
    }
    for (int t : g.inputs) {
      Act &a = acts[act_of[t]];
      a.first = 0;
      a.input_arg = 0;
    }
    for (size_t s = 0; s < ops.size(); ++s) {
      Act &o = acts[ops[s].out];
      o.first = std::min(o.first, int(s) + 1);
      o.last = std::max(o.last, int(s) + 1);
      for (int i : ops[s].ins)
        acts[i].last = std::max(acts[i].last, int(s) + 1);
    }
    for (size_t i = 0; i < acts.size(); ++i) {
      Act &a = acts[i];
      a.buf.assign(K, Box{});
      a.last = std::max(a.last, a.first);
      for (unsigned c = 0; c < K; ++c)
        a.buf[c] = bbox(a.owned[c], a.need[c]);
      a.buffer = new_buffer(g.tensors[a.tensor].name, a.first, a.last);
      for (unsigned c = 0; c < K; ++c)
        buffers[a.buffer].bytes[c] =
            a.buf[c].empty() ? 0 : uint64_t(a.buf[c].rows() * a.W * a.buf[c].chans() * a.es);
    }
    return {};
  }

  // Sizes of the parameter blocks (needed before allocation).
  Result<void> plan_params() {
    for (size_t s = 0; s < ops.size(); ++s) {
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      const int step = int(s) + 1;
      const Act &x = acts[op.ins[0]];
      const Act &y = acts[op.out];
      if (op.kind == Kind::Conv) {
        mcl_conv_args a = conv_args_shape(op, 0);
        const size_t psize = mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &a);
        op.params.buffer = new_buffer(n.name + ".params", step - 1, step);
        op.table.buffer = new_buffer(n.name + ".table", step - 1, step);
        op.pad_row = new_buffer(n.name + ".pad", step, step);
        for (unsigned c = 0; c < K; ++c) {
          if (op.out_box[c].empty())
            continue;
          mcl_conv_args ac = conv_args_shape(op, c);
          buffers[op.params.buffer].bytes[c] = psize;
          buffers[op.table.buffer].bytes[c] = mcl_native_conv_table_size(&ac) * 4;
          buffers[op.pad_row].bytes[c] = align_up(x.C * x.es, 16);
        }
      } else if (op.kind == Kind::Gemm) {
        op.params.buffer = new_buffer(n.name + ".params", step - 1, step);
        for (unsigned c = 0; c < K; ++c) {
          if (op.out_box[c].empty())
            continue;
          mcl_gemm_args a{};
          a.input = {0, 1, 1, uint32_t(x.H * x.W * x.C), 0, 0, 1, x.dtype};
          a.input.row_stride = a.input.pixel_stride = a.input.c;
          a.output = {0, 1, 1, uint32_t(op.out_box[c].chans()), 0, 0, 1, y.dtype};
          a.output.row_stride = a.output.pixel_stride = a.output.c;
          buffers[op.params.buffer].bytes[c] = mcl_native_gemm_params_size(&a);
        }
      } else if (op.kind == Kind::ScaleShift) {
        op.params.buffer = new_buffer(n.name + ".params", step - 1, step);
        for (unsigned c = 0; c < K; ++c)
          if (!op.out_box[c].empty())
            buffers[op.params.buffer].bytes[c] = uint64_t(y.C) * 8;
      }
    }
    return {};
  }

  Result<void> allocate() {
    std::vector<int> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      uint64_t sa = buffers[a].size() * uint64_t(buffers[a].last - buffers[a].first + 1);
      uint64_t sb = buffers[b].size() * uint64_t(buffers[b].last - buffers[b].first + 1);
      return sa > sb;
    });
    const uint64_t capacity = opt.device.spm_bytes;
    std::vector<int> placed;
    uint64_t high = 0;
    for (int i : order) {
      SpmBuffer &b = buffers[i];
      if (b.size() == 0)
        continue;
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (int j : placed) {
        const SpmBuffer &o = buffers[j];
        if (o.first <= b.last && b.first <= o.last)
          busy.push_back({o.offset, o.offset + align_up(o.size())});
      }
      std::sort(busy.begin(), busy.end());
      uint64_t at = 0;
      for (auto [lo, hi] : busy) {
        if (at + b.size() <= lo)
          break;
        at = std::max(at, hi);
      }
      if (at + b.size() > capacity) {
        uint64_t live = 0;
        for (auto [lo, hi] : busy)
          live += hi - lo;
        return make_error("buffer '" + b.name + "' (" + std::to_string(b.size()) +
                          " B) does not fit in the " + std::to_string(capacity) +
                          " B SPM next to " + std::to_string(live) +
                          " B of live buffers; intra-cluster tiling and DDR spill are not "
                          "implemented yet: use more clusters or a larger SPM");
      }
      b.offset = at;
      high = std::max(high, at + b.size());
      placed.push_back(i);
    }
    prog.spm_required = std::max<uint64_t>(high, 64);
    return {};
  }

  // ---------------- emission ----------------
  mcl_tile tile_of(const Act &a, unsigned c, const Box &box) const {
    const Box &b = a.buf[c];
    const uint64_t pc = b.chans();
    mcl_tile t{};
    t.offset = uint32_t(buffers[a.buffer].offset +
                        (uint64_t(box.y0 - b.y0) * a.W * pc + uint64_t(box.c0 - b.c0)) * a.es);
    t.h = uint32_t(box.rows());
    t.w = uint32_t(a.W);
    t.c = uint32_t(box.chans());
    t.row_stride = uint32_t(a.W * pc);
    t.pixel_stride = uint32_t(pc);
    t.channel_stride = 1;
    t.dtype = a.dtype;
    return t;
  }

  // Conv argument block with shapes only (offsets filled by emit).
  mcl_conv_args conv_args_shape(const Op &op, unsigned c) const {
    const Act &x = acts[op.ins[0]];
    const Act &y = acts[op.out];
    mcl_conv_args a{};
    const Box &ib = op.in_box[0][c];
    const Box &ob = op.out_box[c];
    a.input = {0, uint32_t(std::max<int64_t>(ib.rows(), 1)), uint32_t(x.W), uint32_t(x.C),
               uint32_t(x.W * x.C), uint32_t(x.C), 1, x.dtype};
    a.output = {0, uint32_t(std::max<int64_t>(ob.rows(), 1)), uint32_t(y.W), uint32_t(y.C),
                uint32_t(y.W * y.C), uint32_t(y.C), 1, y.dtype};
    a.groups = uint32_t(op.groups);
    a.kernel_h = uint16_t(op.kh), a.kernel_w = uint16_t(op.kw);
    a.stride_h = uint16_t(op.sh), a.stride_w = uint16_t(op.sw);
    a.dilation_h = uint16_t(op.dh), a.dilation_w = uint16_t(op.dw);
    a.origin_y = int32_t(ob.y0 * op.sh - op.pt - ib.y0);
    a.origin_x = int32_t(-op.pl);
    return a;
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

  Result<void> build_args() {
    for (size_t s = 0; s < ops.size(); ++s) {
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      const Act &x = acts[op.ins[0]];
      const Act &y = acts[op.out];
      op.args.assign(K, {});
      op.params.blob_offset.assign(K, 0);
      op.table.blob_offset.assign(K, 0);
      char msg[256];
      for (unsigned c = 0; c < K; ++c) {
        const Box &ob = op.out_box[c];
        if (ob.empty())
          continue;
        switch (op.kind) {
        case Kind::Conv: {
          op.fn = MCL_NATIVE_FN_CONV2D;
          mcl_conv_args a = conv_args_shape(op, c);
          a.input = tile_of(x, c, op.in_box[0][c]);
          a.output = tile_of(y, c, ob);
          a.params_offset = uint32_t(buffers[op.params.buffer].offset);
          a.table_offset = uint32_t(buffers[op.table.buffer].offset);
          a.pad_row_offset = uint32_t(buffers[op.pad_row].offset);
          a.act = n.act;
          if (op.params.per_cluster.empty()) { // shared: pack once
            std::vector<uint8_t> packed(mcl_native_conv_params_size(op.fn, &a));
            const Tensor &w = g.tensors[n.inputs[1]];
            std::vector<float> bias(y.C, 0.0f);
            if (n.inputs.size() > 2 && n.inputs[2] >= 0)
              bias = g.tensors[n.inputs[2]].data;
            if (mcl_native_pack_conv(op.fn, &a, w.data.data(), bias.data(), nullptr,
                                     packed.data(), packed.size()) != MCL_NATIVE_OK)
              return make_error(where(n) + ": packing the weights failed");
            op.params.per_cluster.push_back(std::move(packed));
            op.params.shared = true;
            uint64_t at = add_blob(op.params.per_cluster[0]);
            op.params.blob_offset.assign(K, at);
          }
          std::vector<int32_t> table(mcl_native_conv_table_size(&a));
          if (mcl_native_plan_conv(op.fn, &a, table.data(), table.size()) != MCL_NATIVE_OK)
            return make_error(where(n) + ": planning the address table failed");
          op.table.per_cluster.resize(K);
          op.table.per_cluster[c] = to_bytes(table.data(), table.size());
          op.table.blob_offset[c] = add_blob(op.table.per_cluster[c]);
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::Pool: {
          op.fn = MCL_NATIVE_FN_POOL2D;
          mcl_pool_args a{};
          const Box &ib = op.in_box[0][c];
          a.input = tile_of(x, c, ib);
          a.output = tile_of(y, c, ob);
          a.kind = n.op == "MaxPool" ? MCL_POOL_MAX : MCL_POOL_AVG;
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
          a.in_quant = a.out_quant = {1.0f, 0};
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::GlobalPool: {
          op.fn = MCL_NATIVE_FN_POOL2D;
          mcl_pool_args a{};
          a.input = tile_of(x, c, op.in_box[0][c]);
          a.output = tile_of(y, c, ob);
          a.kind = n.op == "GlobalMaxPool" ? MCL_POOL_MAX : MCL_POOL_AVG;
          a.kernel_h = uint16_t(x.H), a.kernel_w = uint16_t(x.W);
          a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1;
          a.count_y1 = int32_t(x.H), a.count_x1 = int32_t(x.W);
          a.in_quant = a.out_quant = {1.0f, 0};
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::Gemm: {
          op.fn = MCL_NATIVE_FN_GEMM;
          mcl_gemm_args a{};
          const uint32_t k_total = uint32_t(x.H * x.W * x.C);
          a.input = tile_of(x, c, full(x));
          a.input.h = a.input.w = 1;
          a.input.c = k_total;
          a.input.row_stride = a.input.pixel_stride = k_total;
          a.output = tile_of(y, c, ob);
          a.params_offset = uint32_t(buffers[op.params.buffer].offset);
          a.act = n.act;
          // B slice as [n][k] in the SPM order of the input (HWC for a flattened image).
          const Tensor &b = g.tensors[n.inputs[1]];
          const bool tb = n.op == "Gemm" && n.attr("transB", 0) != 0;
          const float alpha = n.op == "Gemm" ? n.attrf("alpha", 1.0f) : 1.0f;
          const float beta = n.op == "Gemm" ? n.attrf("beta", 1.0f) : 1.0f;
          const int64_t N = y.C;
          std::vector<float> bt(size_t(ob.chans()) * k_total), bias(ob.chans(), 0.0f);
          auto logical_k = [&](int64_t m) -> int64_t {
            auto it = view_src_shape.find(n.inputs[0]);
            if (it == view_src_shape.end())
              return m;
            const int64_t C = it->second[0], H = it->second[1], W = it->second[2];
            const int64_t ch = m % C, pix = m / C, yy = pix / W, xx = pix % W;
            return ch * H * W + yy * W + xx;
          };
          for (int64_t j = 0; j < ob.chans(); ++j) {
            const int64_t nn = ob.c0 + j;
            for (int64_t m = 0; m < k_total; ++m) {
              const int64_t kk = logical_k(m);
              bt[j * k_total + m] = alpha * b.data[tb ? nn * k_total + kk : kk * N + nn];
            }
            if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
              const auto &cd = g.tensors[n.inputs[2]].data;
              bias[j] = beta * cd[cd.size() == 1 ? 0 : nn];
            }
          }
          std::vector<uint8_t> packed(mcl_native_gemm_params_size(&a));
          if (mcl_native_pack_gemm(&a, bt.data(), 1, bias.data(), nullptr, packed.data(),
                                   packed.size()) != MCL_NATIVE_OK)
            return make_error(where(n) + ": packing the weights failed");
          op.params.per_cluster.resize(K);
          op.params.blob_offset[c] = add_blob(packed);
          op.params.per_cluster[c] = std::move(packed);
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::Eltwise: {
          op.fn = MCL_NATIVE_FN_ELTWISE;
          mcl_eltwise_args a{};
          a.a = tile_of(acts[op.ins[0]], c, op.in_box[0][c]);
          a.b = tile_of(acts[op.ins[1]], c, op.in_box[1][c]);
          a.output = tile_of(y, c, ob);
          a.op = n.op == "Add" ? MCL_ELTWISE_ADD : n.op == "Sub" ? MCL_ELTWISE_SUB
                 : n.op == "Mul" ? MCL_ELTWISE_MUL : MCL_ELTWISE_DIV;
          a.act = n.act;
          a.a_quant = a.b_quant = a.out_quant = {1.0f, 0};
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::ScaleShift: {
          op.fn = MCL_NATIVE_FN_SCALE_SHIFT;
          mcl_scale_shift_args a{};
          a.input = tile_of(x, c, op.in_box[0][c]);
          a.output = tile_of(y, c, ob);
          a.act = n.act;
          a.in_quant = a.out_quant = {1.0f, 0};
          // Params hold scale[input.c], shift[input.c] for this cluster's channels.
          const auto &sc = g.tensors[n.inputs[1]].data, &sh = g.tensors[n.inputs[2]].data;
          std::vector<float> p(sc.begin() + ob.c0, sc.begin() + ob.c1);
          p.insert(p.end(), sh.begin() + ob.c0, sh.begin() + ob.c1);
          a.params_offset = uint32_t(buffers[op.params.buffer].offset);
          op.params.per_cluster.resize(K);
          op.params.per_cluster[c] = to_bytes(p.data(), p.size());
          op.params.blob_offset[c] = add_blob(op.params.per_cluster[c]);
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::Activation:
        case Kind::Softmax: {
          op.fn = op.kind == Kind::Softmax ? MCL_NATIVE_FN_SOFTMAX : MCL_NATIVE_FN_ACTIVATION;
          mcl_unary_args a{};
          a.input = tile_of(x, c, op.in_box[0][c]);
          a.output = tile_of(y, c, ob);
          if (op.kind == Kind::Activation)
            passes::activation_of(g, n, a.act);
          a.in_quant = a.out_quant = {1.0f, 0};
          op.args[c] = format::Record::make(op.fn, a).args;
          break;
        }
        case Kind::Concat:
          op.fn = MCL_NATIVE_FN_COPY; // one record per input, emitted in emit()
          break;
        }
        if (!op.args[c].empty() &&
            mcl_native_validate(op.fn, op.args[c].data(), op.args[c].size(),
                                opt.device.spm_bytes, msg, sizeof msg) != MCL_NATIVE_OK)
          return make_error(where(n) + ": internal error, invalid arguments: " + msg);
      }
    }
    return {};
  }

  // DMA helpers ---------------------------------------------------------
  static kbin_dma_args dma(uint32_t kind) {
    kbin_dma_args d{};
    d.kind = kind;
    d.notify_signal = -1;
    return d;
  }
  static kbin_dma_shape linear(uint64_t bytes) {
    return {bytes, 1, 1, bytes, bytes, bytes, bytes};
  }

  // DDR (ONNX NCHW or [1,N]) <-> SPM channel-last box transfer shape. DDR side first.
  kbin_dma_shape ddr_box_shape(const Act &a, unsigned c, const Box &box, bool to_spm,
                               uint64_t &ddr_offset, uint64_t &spm_offset) const {
    const Box &b = a.buf[c];
    const uint64_t pc = b.chans(), es = a.es;
    spm_offset = buffers[a.buffer].offset +
                 (uint64_t(box.y0 - b.y0) * a.W * pc + uint64_t(box.c0 - b.c0)) * es;
    ddr_offset = (uint64_t(box.c0) * a.H * a.W + uint64_t(box.y0) * a.W) * es;
    const uint64_t pixels = uint64_t(box.rows()) * a.W;
    kbin_dma_shape s{};
    if (a.H * a.W == 1 || (a.C == 1)) { // channel-last and NCHW orders coincide
      const uint64_t bytes = (a.H * a.W == 1 ? uint64_t(box.chans()) : pixels) * es;
      return linear(bytes);
    }
    // planes = channels, rows = pixels of one channel, row = one element.
    s.row_bytes = es;
    s.rows = pixels;
    s.planes = uint64_t(box.chans());
    const uint64_t ddr_row = es, ddr_plane = uint64_t(a.H) * a.W * es;
    const uint64_t spm_row = pc * es, spm_plane = es;
    if (to_spm) {
      s.src_row_stride = ddr_row, s.src_plane_stride = ddr_plane;
      s.dst_row_stride = spm_row, s.dst_plane_stride = spm_plane;
    } else {
      s.src_row_stride = spm_row, s.src_plane_stride = spm_plane;
      s.dst_row_stride = ddr_row, s.dst_plane_stride = ddr_plane;
    }
    return s;
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
    const auto &d = opt.device;
    const double bw = ddr ? d.ddr_bytes_per_cycle : d.noc_bytes_per_cycle;
    return d.dma_latency_cycles + uint64_t(std::ceil(double(bytes) / std::max(bw, 1e-9)));
  }

  // Loads the parameter blocks of op s (issued during step s, used in step s + 1).
  void emit_param_loads(size_t s, std::vector<uint64_t> &ddr_per_cluster) {
    Op &op = ops[s];
    auto load = [&](ParamBlock &pb) {
      if (pb.buffer < 0 || pb.per_cluster.empty())
        return;
      const uint64_t spm = buffers[pb.buffer].offset;
      if (pb.shared) { // one DDR read, delivered to every cluster with work
        uint32_t mask = 0;
        for (unsigned c = 0; c < K; ++c)
          if (!op.out_box[c].empty())
            mask |= 1u << c;
        kbin_dma_args d = dma(KBIN_DMA_MULTICAST);
        d.cluster_mask = mask;
        d.ddr = {KBIN_DDR_PARAMS, 0, pb.blob_offset[0]};
        d.spm_offset = spm;
        d.shape = linear(pb.per_cluster[0].size());
        const unsigned issuer = unsigned(s % K); // spread the issuing over the RDMA engines
        prog.streams[issuer].push_back(format::Record::make(KBIN_FN_DMA, d));
        ddr_per_cluster[issuer] += pb.per_cluster[0].size();
        return;
      }
      for (unsigned c = 0; c < K; ++c) {
        if (c >= pb.per_cluster.size() || pb.per_cluster[c].empty())
          continue;
        kbin_dma_args d = dma(KBIN_DMA_LOAD);
        d.ddr = {KBIN_DDR_PARAMS, 0, pb.blob_offset[c]};
        d.spm_offset = spm;
        d.shape = linear(pb.per_cluster[c].size());
        prog.streams[c].push_back(format::Record::make(KBIN_FN_DMA, d));
        ddr_per_cluster[c] += pb.per_cluster[c].size();
      }
    };
    load(op.params);
    load(op.table);
  }

  void end_step() {
    for (unsigned c = 0; c < K; ++c) {
      prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{0, 0}));
      if (K > 1)
        prog.streams[c].push_back(format::Record{KBIN_FN_BARRIER, {}});
    }
  }

  Result<void> emit() {
    prog.streams.assign(K, {});
    const auto &dev = opt.device;
    // Kernel arguments: inputs, then outputs.
    uint32_t arg = 0;
    auto describe = [&](int t, uint32_t role) {
      const Tensor &ten = g.tensors[t];
      format::TensorDesc d;
      d.name = ten.name;
      d.role = role;
      d.arg_index = arg++;
      d.dtype = MCL_DTYPE_F32;
      for (int64_t v : ten.shape)
        d.dims.push_back(uint64_t(v));
      d.byte_size = uint64_t(ten.elements()) * 4;
      prog.tensors.push_back(d);
      return d.arg_index;
    };
    std::map<int, uint32_t> input_arg;
    for (int t : g.inputs)
      input_arg[t] = describe(t, KBIN_ROLE_INPUT);
    std::vector<std::pair<int, uint32_t>> output_arg;
    for (int t : g.outputs)
      output_arg.push_back({t, describe(t, KBIN_ROLE_OUTPUT)});
    prog.arg_count = arg;

    // Prologue: network inputs and the first operator's parameters.
    std::vector<uint64_t> ddr(K, 0);
    for (int t : g.inputs) {
      const Act &a = acts[act_of[t]];
      for (unsigned c = 0; c < K; ++c) {
        if (a.need[c].empty())
          continue;
        kbin_dma_args d = dma(KBIN_DMA_LOAD);
        uint64_t ddr_off, spm_off;
        d.shape = ddr_box_shape(a, c, a.need[c], true, ddr_off, spm_off);
        d.ddr = {KBIN_DDR_ARG, input_arg[t], ddr_off};
        d.spm_offset = spm_off;
        prog.streams[c].push_back(format::Record::make(KBIN_FN_DMA, d));
        ddr[c] += d.shape.row_bytes * d.shape.rows * d.shape.planes;
      }
    }
    if (!ops.empty())
      emit_param_loads(0, ddr);
    end_step();
    uint64_t clock = dma_cycles(*std::max_element(ddr.begin(), ddr.end()), true);
    uint64_t input_bytes = std::accumulate(ddr.begin(), ddr.end(), uint64_t{0});

    for (size_t s = 0; s < ops.size(); ++s) {
      Op &op = ops[s];
      const Node &n = g.nodes[op.node];
      OpReport rep;
      rep.name = n.name;
      rep.op = n.op + (n.act.kind != MCL_ACT_NONE ? "+act" : "");
      rep.split = op.split;
      rep.start_cycle = clock;
      std::vector<uint64_t> pddr(K, 0);
      if (s + 1 < ops.size())
        emit_param_loads(s + 1, pddr);
      for (unsigned c = 0; c < K; ++c) {
        if (op.out_box[c].empty())
          continue;
        ++rep.tiles;
        if (op.kind == Kind::Concat) {
          const Act &y = acts[op.out];
          int64_t ch = 0;
          for (size_t i = 0; i < op.ins.size(); ++i) {
            const Act &x = acts[op.ins[i]];
            mcl_unary_args a{};
            a.input = tile_of(x, c, op.in_box[i][c]);
            Box ob = op.out_box[c];
            ob.c0 = ch, ob.c1 = ch + x.C;
            a.output = tile_of(y, c, ob);
            a.in_quant = a.out_quant = {1.0f, 0};
            ch += x.C;
            prog.streams[c].push_back(format::Record::make(MCL_NATIVE_FN_COPY, a));
            rep.compute_cycles = std::max(rep.compute_cycles,
                                          mcl_native_cost(MCL_NATIVE_FN_COPY, &a, dev.pes_per_cluster));
          }
          continue;
        }
        prog.streams[c].push_back(format::Record{op.fn, op.args[c]});
        rep.compute_cycles = std::max(
            rep.compute_cycles, mcl_native_cost(op.fn, op.args[c].data(), dev.pes_per_cluster));
      }
      // Exchanges: every other cluster's needed part of what this cluster produced.
      const Act &y = acts[op.out];
      std::vector<uint64_t> noc(K, 0);
      for (unsigned from = 0; from < K; ++from)
        for (unsigned to = 0; to < K; ++to) {
          if (from == to)
            continue;
          Box box = intersect(y.need[to], y.owned[from]);
          if (box.empty())
            continue;
          kbin_dma_args d = exchange(y, from, to, box);
          prog.streams[from].push_back(format::Record::make(KBIN_FN_DMA, d));
          const uint64_t bytes = d.shape.row_bytes * d.shape.rows * d.shape.planes;
          noc[from] += bytes;
          rep.exchange_bytes += bytes;
        }
      // Stores of network outputs produced here.
      for (auto [t, argi] : output_arg) {
        if (act_of[t] != op.out)
          continue;
        for (unsigned c = 0; c < K; ++c) {
          if (y.owned[c].empty())
            continue;
          kbin_dma_args d = dma(KBIN_DMA_STORE);
          uint64_t ddr_off, spm_off;
          d.shape = ddr_box_shape(y, c, y.owned[c], false, ddr_off, spm_off);
          d.ddr = {KBIN_DDR_ARG, argi, ddr_off};
          d.spm_offset = spm_off;
          prog.streams[c].push_back(format::Record::make(KBIN_FN_DMA, d));
          const uint64_t bytes = d.shape.row_bytes * d.shape.rows * d.shape.planes;
          pddr[c] += bytes;
        }
      }
      end_step();
      const uint64_t ddr_max = *std::max_element(pddr.begin(), pddr.end());
      const uint64_t noc_max = *std::max_element(noc.begin(), noc.end());
      rep.ddr_bytes = std::accumulate(pddr.begin(), pddr.end(), uint64_t{0});
      if (s == 0)
        rep.ddr_bytes += input_bytes;
      rep.dma_cycles = (ddr_max ? dma_cycles(ddr_max, true) : 0) +
                       (noc_max ? dma_cycles(noc_max, false) : 0);
      // Prefetch overlaps compute; exchanges follow it.
      rep.cycles = std::max(rep.compute_cycles, ddr_max ? dma_cycles(ddr_max, true) : 0) +
                   (noc_max ? dma_cycles(noc_max, false) : 0) +
                   (K > 1 ? dev.barrier_latency_cycles : 0);
      clock += rep.cycles;
      // SPM occupancy during the step, per cluster.
      rep.spm_peak.assign(K, 0);
      for (const SpmBuffer &b : buffers)
        if (b.first <= int(s) + 1 && int(s) + 1 <= b.last)
          for (unsigned c = 0; c < K; ++c)
            if (b.bytes[c])
              rep.spm_peak[c] = std::max(rep.spm_peak[c], b.offset + b.bytes[c]);
      out.ops.push_back(rep);
    }
    out.total_cycles = clock;
    return {};
  }

  Result<CompileOutput> run() {
    if (auto r = plan(); !r)
      return r.error();
    if (auto r = lifetimes(); !r)
      return r.error();
    if (auto r = plan_params(); !r)
      return r.error();
    if (auto r = allocate(); !r)
      return r.error();
    if (auto r = build_args(); !r)
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
    out.program = std::move(prog);
    out.program.report_json = out.report_json();
    if (auto r = format::validate_program(out.program); !r)
      return make_error("internal error: the emitted program is invalid: " + r.error().message);
    return std::move(out);
  }
};

} // namespace

Result<CompileOutput> compile_graph(const Graph &graph, const CompileOptions &options) {
  if (auto r = options.device.validate(); !r)
    return r.error();
  const unsigned clusters = options.clusters ? options.clusters : options.device.clusters;
  if (clusters == 0 || clusters > options.device.clusters || clusters > KBIN_MAX_CLUSTERS)
    return make_error("--clusters " + std::to_string(clusters) + " out of range 1.." +
                      std::to_string(std::min(options.device.clusters, KBIN_MAX_CLUSTERS)) +
                      " for device '" + options.device.name + "'");
  if (options.precision != "fp32")
    return make_error("--precision " + options.precision +
                      " is not implemented yet (only fp32)");
  Compiler c(graph, options, clusters);
  return c.run();
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
