// Planning: per operator, the split across clusters, the output box each cluster owns and the
// input boxes it needs; activations, their lifetimes (steps) and DDR homes; parameter and
// staging buffer sizes.
#include "tiler/int8_params.h"
#include "tiler/tiler.h"

#include <numeric>

#include "kann/custom_ops.h"

namespace kann::tiler {

namespace {
// A custom operator on whole tensors (MCL_CUSTOM_WHOLE): one call on one cluster with every
// input whole (lower_layout.cpp), never in place.
bool whole_custom(const Node &n) {
  if (n.op != Op::Custom)
    return false;
  const custom::Operator *op = custom::of(n);
  return op && op->kind == MCL_CUSTOM_WHOLE;
}
} // namespace

// Channel concats whose inputs are each read only by the concat and produced by a
// row-split operator: the producers write into the concat's buffer, no copy runs.
void Compiler::plan_concat_elimination() {
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node &n = g.nodes[ni];
    if (n.dead || n.op != Op::Concat || g.tensors[n.outputs[0]].shape.size() != 4)
      continue;
    bool ok = true;
    std::set<int> seen, nodes;
    for (int t : n.inputs) {
      const Tensor &x = g.tensors[t];
      ok = ok && x.producer >= 0 && !x.is_const && !g.is_output(t) && !seen.count(t) &&
           !chan_offset.count(t) && !eliminated.count(x.producer) &&
           ir::op_has(g.nodes[x.producer].op, ir::kWritesIntoConcat) &&
           g.consumers(t).size() == 1 && !nodes.count(x.producer) &&
           x.dtype == g.tensors[n.outputs[0]].dtype &&
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

int Compiler::new_buffer(std::string name, int first, int last) {
  SpmBuffer b;
  b.name = std::move(name);
  b.bytes.assign(K, 0);
  b.first = first;
  b.last = last;
  buffers.push_back(std::move(b));
  return int(buffers.size()) - 1;
}

Act Compiler::storage_of(const Tensor &t) {
  Act a;
  if (t.shape.size() == 4 && t.shape[0] == 1) { // an image: channel-last in SPM
    a.C = t.shape[1], a.H = t.shape[2], a.W = t.shape[3];
  } else if (t.shape.size() == 2 && t.shape[0] == 1) { // a vector: its elements as channels
    a.C = t.shape[1];
  } else {
    // Any other tensor: rows of its last dimension, one channel, so that the SPM order is
    // the ONNX (row-major) order (generic_layout()).
    a.W = t.shape.empty() ? 1 : t.shape.back();
    a.H = a.W > 0 ? t.elements() / a.W : 0;
    a.C = 1;
  }
  return a;
}

Result<int> Compiler::act_for(int tensor) {
  auto it = act_of.find(tensor);
  if (it != act_of.end())
    return it->second;
  const Tensor &t = g.tensors[tensor];
  Act a = storage_of(t);
  a.tensor = tensor;
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

std::vector<Box> Compiler::split_rows(int64_t H, int64_t C) const {
  std::vector<Box> v(K);
  for (unsigned k = 0; k < K; ++k)
    v[k] = {H * k / K, H * (k + 1) / K, 0, C};
  return v;
}

// Channel slices; with `granule` (the packing's panel width for weights) the boundaries
// fall on whole panels when there are enough, so no slice packs padding channels.
std::vector<Box> Compiler::split_channels(int64_t H, int64_t C, int64_t granule) const {
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
std::vector<Box> Compiler::weight_slices(const PlannedOp &op, const Box &b) const {
  std::vector<Box> v;
  if (b.empty())
    return v;
  if (op.kind == Lowering::Conv && op.groups > 1 &&
      (op.groups != acts[op.ins[0]].C || op.transposed) && b.chans() == out_c(op)) {
    // A grouped convolution (a depthwise one only when transposed: a depthwise convolution
    // is sliced in panels, each reading its channels), is cut at whole groups: each slice is
    // a smaller grouped (depthwise) convolution on its groups' input channels
    // (lower_conv.cpp, slice_groups).
    const int64_t n = std::clamp<int64_t>(op.wslices, 1, op.groups);
    const int64_t per_group = b.chans() / op.groups;
    for (int64_t j = 0; j < n; ++j) {
      Box x = b;
      x.c0 = b.c0 + op.groups * j / n * per_group;
      x.c1 = b.c0 + op.groups * (j + 1) / n * per_group;
      v.push_back(x);
    }
    return v;
  }
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

bool Compiler::computes_in_bands(const PlannedOp &op) const {
  switch (op.kind) {
  case Lowering::Conv:
  case Lowering::Pool:
  case Lowering::Concat:
  case Lowering::Resize:
    return true;
  case Lowering::Eltwise:
  case Lowering::ScaleShift:
  case Lowering::Activation:
  case Lowering::Math:
  case Lowering::Softmax:
  case Lowering::Convert:
    return op.split == "rows"; // not a single cluster's whole tensor (strided, custom whole)
  default:
    return false;
  }
}

// Output rows of cluster c split into op.chunks bands.
std::vector<Box> Compiler::chunk_boxes(const PlannedOp &op, unsigned c) const {
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
Result<void> Compiler::plan() {
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
    const Lowering lowering = ir::op_info(n.op).lowering;
    // Views: Flatten / Reshape share their input's storage.
    const bool input_storage = [&] {
      for (int t : g.inputs)
        if (act_of.count(n.inputs[0]) && act_of.count(t) && act_of[t] == act_of[n.inputs[0]])
          return true;
      return false;
    }();
    // A network output that is a network input reshaped, or a reshape that changes the
    // geometry of row-major storage (its readers use the storage's rows, pixels and channels,
    // e.g. a softmax its rows): copied (lower_layout.cpp).
    bool copy_view = lowering == Lowering::View && g.is_output(n.outputs[0]) && input_storage;
    if (lowering == Lowering::View && !copy_view) {
      auto src = act_for(n.inputs[0]);
      if (!src)
        return src.error();
      const Tensor &y = g.tensors[n.outputs[0]];
      const Act &s = acts[src.value()];
      // Row-major storage (one channel, or one pixel) is the ONNX order: a reshape of it keeps
      // the order. An image keeps its channel-last geometry: a following image operator reads
      // the Act's, so an image view must have the same one. A flattened image [1,N] is read
      // in the image's order by a Gemm (view_src_shape).
      const bool same_order = (s.H * s.W == 1) || (s.C == 1);
      const bool to_vector = y.shape.size() == 2 && y.shape[0] == 1;
      const bool to_image = y.shape.size() == 4 && y.shape[0] == 1;
      const bool image_fits =
          to_image && y.shape[1] == s.C && y.shape[2] == s.H && y.shape[3] == s.W;
      const bool y_row_major = !to_image || y.shape[1] == 1 || (y.shape[2] == 1 && y.shape[3] == 1);
      // The geometry y has as its own storage (act_for).
      int64_t yh = 1, yw = 1, yc = 1;
      if (to_image)
        yc = y.shape[1], yh = y.shape[2], yw = y.shape[3];
      else if (to_vector)
        yc = y.shape[1];
      else
        yw = y.shape.empty() ? 1 : y.shape.back(), yh = yw > 0 ? y.elements() / yw : 0;
      const bool same_geometry = yh == s.H && yw == s.W && yc == s.C;
      // Row-major storage reshaped to an image, or an image to a row-major tensor (not a
      // [1,N] vector, which a Gemm reads in the image's order): a strided copy between
      // the two orders.
      const bool to_row_major = !to_image && !to_vector;
      if (!same_geometry &&
          ((same_order && (y_row_major || to_image)) || (!same_order && to_row_major)))
        copy_view = true;
      else if (!to_vector && !image_fits && !(same_order && y_row_major && !to_image))
        return make_error(where(n) + ": only reshapes to [1,N] and of row-major (one-channel) "
                                     "tensors are supported (an image's channel-last order "
                                     "would need a transpose)");
    }
    if (lowering == Lowering::View && !copy_view) {
      const int src = act_of.at(n.inputs[0]);
      const Act &s = acts[src];
      const bool same_order = (s.H * s.W == 1) || (s.C == 1);
      if (g.is_output(n.outputs[0]) && g.is_output(n.inputs[0]))
        return make_error(where(n) + ": a network output viewed as another output");
      act_of[n.outputs[0]] = src;
      if (!same_order)
        view_src_shape[n.outputs[0]] = {s.C, s.H, s.W};
      if (view_src_shape.count(n.inputs[0]))
        view_src_shape[n.outputs[0]] = view_src_shape[n.inputs[0]];
      continue;
    }
    PlannedOp op;
    op.node = int(ni);
    const bool two_activations = n.op == Op::MatMul && n.ints.count("two_activations");
    op.kind = copy_view || two_activations ? Lowering::Layout : lowering;
    op.strided = op.kind == Lowering::Layout || op.kind == Lowering::Reduce || whole_custom(n);
    op.transposed = n.op == Op::ConvTranspose;
    if (n.op == Op::Slice)
      op.in_c0 = n.attrs("channels").at(0);
    if (n.op == Op::ChannelShuffle)
      op.shuffle_groups = n.attrs("group").at(0);
    // An identity passes::remove_identities kept is a plain copy, unless it changes the type.
    const Tensor &x0 = g.tensors[n.inputs[0]], &y0 = g.tensors[n.outputs[0]];
    const bool same_type =
        x0.dtype == y0.dtype && x0.scale == y0.scale && x0.zero_point == y0.zero_point;
    if ((ir::op_has(n.op, ir::kIdentity) || n.op == Op::Cast) && !same_type)
      op.kind = Lowering::None;
    if (op.kind == Lowering::None)
      return make_error(where(n) + ": not supported by the tile compiler");
    auto o = act_for(n.outputs[0]);
    if (!o)
      return o.error();
    op.out = o.value();
    // A conversion of a flattened image keeps the image's channel-last geometry (and so
    // its flatten order for a following Gemm).
    if (op.kind == Lowering::Convert && view_src_shape.count(n.inputs[0])) {
      auto src = act_for(n.inputs[0]);
      if (!src)
        return src.error();
      Act &y = acts[op.out];
      y.H = acts[src.value()].H, y.W = acts[src.value()].W, y.C = acts[src.value()].C;
      view_src_shape[n.outputs[0]] = view_src_shape[n.inputs[0]];
    }
    std::vector<int> act_inputs;
    // Concat along another axis than an image's channels: strided.
    if (op.kind == Lowering::Concat) {
      const Tensor &yt = g.tensors[n.outputs[0]];
      const int64_t axis = n.attr("axis", 1);
      op.strided = !(yt.shape.size() == 4 && yt.shape[0] == 1 && (axis == 1 || axis == -3));
    }
    if (op.kind == Lowering::Eltwise || op.kind == Lowering::Concat || whole_custom(n) ||
        two_activations) {
      const Act &y = acts[op.out];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const Tensor &kt = g.tensors[n.inputs[k]];
        if (!kt.is_const) {
          act_inputs.push_back(n.inputs[k]);
          continue;
        }
        // A constant the passes did not fold into a ScaleShift (not per channel: per
        // element, per row, ...): loaded with the operator's parameters and read in place by
        // the strided lowering, on one cluster.
        if (n.ints.count("int8") || kt.dtype != ir::DType::F32 ||
            (y.dtype != MCL_DTYPE_F32 && y.dtype != MCL_DTYPE_F16) ||
            int64_t(kt.data.size()) != kt.elements())
          return make_error(where(n) + ": constant operand '" + kt.name +
                            "' is not a float tensor of a float operator (INT8 operators take "
                            "per-channel constants only)");
        op.const_operands[k] = op.const_bytes;
        op.const_bytes = align_up(op.const_bytes + uint64_t(kt.elements()) * y.es);
        op.strided = true;
      }
      if (act_inputs.empty())
        return make_error(where(n) + ": every operand is constant (not folded: not supported)");
    } else {
      act_inputs.push_back(n.inputs[0]);
      if (op.kind == Lowering::Conv && n.inputs.size() > kResidualInput) // fuse_residual_adds
        act_inputs.push_back(n.inputs[kResidualInput]);
    }
    for (int i : act_inputs) {
      auto a = act_for(i);
      if (!a)
        return a.error();
      op.ins.push_back(a.value());
    }
    if (op.kind != Lowering::Convert && !n.ints.count("int8"))
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
    if (ws != policy.wslices.end() && (op.kind == Lowering::Conv || op.kind == Lowering::Gemm) &&
        !in_group_node(int(ni))) // a layer group keeps its operators' parameters whole
      op.wslices = ws->second;
    if (auto r = plan_op(op, n); !r)
      return r;
    ops.push_back(std::move(op));
  }
  plan_groups(); // group.cpp
  for (int t : g.outputs) {
    if (!act_of.count(t))
      return make_error("output '" + g.tensors[t].name + "' is not computed");
    // Network arguments are float32 (the kbin's tensor descriptors).
    if (g.tensors[t].dtype == ir::DType::S8 || g.tensors[t].dtype == ir::DType::U8)
      return make_error("output '" + g.tensors[t].name +
                        "' is INT8 (a QuantizeLinear's): network outputs are float");
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
bool Compiler::choose_channel_split(const PlannedOp &op) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const int64_t yc = out_c(op);
  const bool depthwise = op.groups > 1 && op.groups == x.C && op.groups == yc;
  // A grouped transposed convolution reads every input channel: rows only (lower_conv.cpp).
  if ((op.groups != 1 && (!depthwise || op.transposed)) || yc < int64_t(K) || out_off(op) != 0 ||
      chan_offset.count(g.nodes[op.node].outputs[0]))
    return false;
  // Every cluster would hold the whole input (a depthwise one reads only its channels, but
  // the buffer spans all of them when the producer split rows): not when that takes a
  // large part of the SPM.
  if (x.bytes() > opt.device.spm_bytes / 4)
    return false;
  if (tile_splits) // the native cost model's cycles and the exchanges (split_tiles.cpp)
    return split_cycles(op, split_channels(y.H, yc, channel_granule)) <
           split_cycles(op, split_rows(y.H, yc));
  if (exchange_splits) // a pipeline candidate: count the exchanges each split causes
    return channel_split_pays(op);
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

Result<void> Compiler::plan_op(PlannedOp &op, const Node &n) {
  Act &y = acts[op.out];
  const int64_t yc = out_c(op);
  const bool aliased = chan_offset.count(n.outputs[0]) != 0; // writes into a concat
  // Eltwise operands that broadcast in other ways than per channel or per pixel: strided.
  if (op.kind == Lowering::Eltwise)
    for (int i : op.ins) {
      const Act &a = acts[i];
      const bool same_pixels = a.H == y.H && a.W == y.W, one_pixel = a.H == 1 && a.W == 1;
      const bool same_channels = a.C == yc, one_channel = a.C == 1;
      if (!(same_pixels || one_pixel) || !(same_channels || one_channel))
        op.strided = true;
    }
  if (op.strided && aliased)
    return make_error(where(n) + ": internal error: a strided operator writes into a concat");
  if (op.strided) { // one cluster computes the whole tensor
    op.split = "single";
    op.out_box.assign(K, Box{});
    op.out_box[0] = full(y);
    op.chunks = 1;
  }
  switch (op.strided ? Lowering::None : op.kind) {
  case Lowering::None: // rejected by plan(), or strided
  case Lowering::View: // no operator: shares its input's storage
  case Lowering::Layout:
  case Lowering::Reduce:
    break;
  case Lowering::Conv:
  case Lowering::Pool: {
    auto k = n.attrs("kernel_shape"), s = n.attrs("strides"), d = n.attrs("dilations"),
         p = n.attrs("pads");
    op.kh = k[0], op.kw = k[1], op.sh = s[0], op.sw = s[1], op.dh = d[0], op.dw = d[1];
    op.pt = p[0], op.pl = p[1], op.pb = p[2], op.pr = p[3];
    op.groups = n.attr("group", 1);
    op.out_box = split_rows(y.H, yc);
    if (op.kind == Lowering::Conv && K > 1 && !in_group_node(op.node) &&
        !(tile_splits && choose_tile_split(op)) && choose_channel_split(op))
      op.split = "channels", op.out_box = split_channels(y.H, yc, channel_granule);
    break;
  }
  case Lowering::GlobalPool:
  case Lowering::Gemm:
    op.split = "channels";
    op.out_box = split_channels(1, yc, op.kind == Lowering::Gemm ? kPanel : 1);
    op.chunks = 1;
    break;
  case Lowering::Softmax:
    if (y.H == 1) {
      op.split = "single";
      op.out_box.assign(K, Box{});
      op.out_box[0] = full(y);
    } else {
      op.out_box = split_rows(y.H, yc);
    }
    break;
  case Lowering::Eltwise:
  case Lowering::ScaleShift:
  case Lowering::Activation:
  case Lowering::Math:
  case Lowering::Convert:
    if (y.H > 1 || aliased) {
      op.out_box = split_rows(y.H, yc);
    } else {
      op.split = "channels";
      op.out_box = split_channels(y.H, yc);
      op.chunks = 1;
    }
    break;
  case Lowering::Concat:
  case Lowering::Resize:
  case Lowering::Shuffle:
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
Result<void> Compiler::lifetimes() {
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
  group_lifetimes(); // group.cpp
  uint64_t scratch = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    Act &a = acts[i];
    a.last = std::max(a.last, a.first);
    if (policy.spilled.count(a.tensor) && a.group < 0) { // a group's intermediate stays
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
                  input_arg.count(arg_tensor) ? input_arg[arg_tensor] : output_arg[arg_tensor], 0};
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
    if (a.in_ddr || root[i] != int(i) || a.group >= 0) // group.cpp: band buffers
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
std::vector<int> Compiler::plan_in_place() const {
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
    const PlannedOp &op = ops[s];
    const int step = int(s) + 1;
    const Act &y = acts[op.out];
    const int yt = g.nodes[op.node].outputs[0];
    if ((op.kind != Lowering::Eltwise && op.kind != Lowering::ScaleShift &&
         op.kind != Lowering::Activation && op.kind != Lowering::Math) ||
        y.in_ddr || y.first != step || chan_offset.count(yt) || act_of.at(yt) != op.out ||
        is_io(op.out) || (y.dtype != MCL_DTYPE_F32 && y.dtype != MCL_DTYPE_F16) ||
        whole_custom(g.nodes[op.node]) || // the user's function may read any input element
        group_of_op[s] >= 0)              // a group writes band by band
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

// Parameter and staging buffers (sizes; contents are packed after allocation).
Result<void> Compiler::plan_params() {
  for (size_t s = 0; s < ops.size(); ++s) {
    PlannedOp &op = ops[s];
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
    if (streams && op.wslices > 1 && op.kind == Lowering::Conv) {
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
    if (op.kind == Lowering::Conv) {
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
    } else if (op.kind == Lowering::Gemm) {
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
          a.flags = int8_weight_flags(g, n); // sizes the INT8 block as pack_gemm_slice
          auto &p = buffers[op.params.buffer].bytes[c];
          p = std::max<uint64_t>(p, mcl_native_gemm_params_size(&a));
        }
      }
    } else if (op.kind == Lowering::ScaleShift) {
      op.params.buffer = new_buffer(n.name + ".params", params_first, step);
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          buffers[op.params.buffer].bytes[c] = uint64_t(op.out_box[c].chans()) * 8;
    } else if (!op.const_operands.empty()) { // strided: the cluster computing the whole
      op.params.buffer = new_buffer(n.name + ".constants", params_first, step);
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          buffers[op.params.buffer].bytes[c] = op.const_bytes;
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

// Plans and allocates; false (with `failure`) when the SPM is too small for this policy.
Result<bool> Compiler::layout() {
  if (auto r = plan(); !r)
    return r.error();
  if (auto r = lifetimes(); !r)
    return r.error();
  if (auto r = plan_params(); !r)
    return r.error();
  plan_group_buffers(); // group.cpp
  if (!step_compute.empty())
    plan_pipeline();
  return allocate();
}

} // namespace kann::tiler
