// Lowering of Conv / ConvTranspose: call geometry and weight packing.
#include "tiler/int8_params.h"
#include "tiler/tiler.h"

#include "kann/passes.h"

namespace kann::tiler {

// Input rows (and channels) a sliding window reads for output box `o`: convolutions,
// transposed convolutions and pooling.
Box Compiler::need_window(const PlannedOp &op, const Act &in, const Box &o) const {
  if (op.kind == Lowering::Conv && op.transposed) {
    // Output row y reads input rows iy with iy*sh = y + pt - ky*dh for some tap ky.
    const int64_t lo = o.y0 + op.pt - (op.kh - 1) * op.dh, hi = o.y1 - 1 + op.pt;
    int64_t a = lo <= 0 ? 0 : (lo + op.sh - 1) / op.sh;
    int64_t b = hi < 0 ? 0 : hi / op.sh + 1;
    a = std::min<int64_t>(a, in.H - 1);
    b = std::max<int64_t>(std::min<int64_t>(b, in.H), a + 1);
    return {a, b, 0, in.C};
  }
  // Depthwise convolutions split by channels read only their channels.
  const bool depthwise_slice =
      op.kind == Lowering::Conv && op.groups > 1 && op.groups == in.C && o.chans() != out_c(op);
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

namespace {
// The groups [g0, g1) a slice of output channels `ob` of a grouped convolution (transposed
// or not; depthwise only when transposed) covers: weight_slices cuts such convolutions at
// whole groups, and each slice is a smaller grouped convolution reading only its groups'
// input channels. {0, groups} for every other operator or a whole one.
std::pair<int64_t, int64_t> slice_groups(const PlannedOp &op, int64_t in_c, int64_t out_c,
                                         const Box &ob) {
  if (op.groups <= 1 || (op.groups == in_c && !op.transposed) || ob.chans() <= 0 ||
      ob.chans() >= out_c)
    return {0, op.groups};
  const int64_t per_group = out_c / op.groups;
  return {ob.c0 / per_group, ob.c1 / per_group};
}
} // namespace

mcl_conv_args Compiler::conv_args_shape(const PlannedOp &op, const Box &ib, const Box &ob) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  mcl_conv_args a{};
  const auto [g0, g1] = slice_groups(op, x.C, out_c(op), ob);
  const bool group_slice = g1 - g0 != op.groups;
  const uint32_t ic = group_slice ? uint32_t((g1 - g0) * (x.C / op.groups))
                                  : uint32_t(ib.chans() > 0 ? ib.chans() : x.C);
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
  if (group_slice)
    a.groups = uint32_t(g1 - g0);
  else // a depthwise convolution split by channels is a smaller depthwise convolution
    a.groups = uint32_t(op.groups > 1 && ic != uint32_t(x.C) ? ic : op.groups);
  // INT8: the packer folds the input zero point into the bias (native int8_conv.h); the
  // weight-zero-point flag sizes the block. Same at plan, pack and call time.
  const Node &n = g.nodes[op.node];
  if (n.ints.count("int8")) {
    a.input_zero_point = x.zero_point;
    a.flags = int8_weight_flags(g, n);
  }
  if (op.ins.size() > 1) { // a residual: the output's shape (call_conv places it)
    a.flags |= MCL_CONV_RESIDUAL;
    a.residual = a.output;
  }
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
  if (winograd_pays(a))
    a.flags |= MCL_CONV_WINOGRAD;
  return a;
}

// Winograd F(4x4, 3x3) (MCL_CONV_WINOGRAD) for a float 3x3 stride-1 convolution call where
// the native cost model predicts it faster. "auto" also asks for enough 4x4 output blocks and
// input channels that the host simulating the device computes it faster than the direct
// convolution: per call the weights' transform costs the host about as much as nine blocks'
// products and the inputs' transform a few channels' (docs/kann.md, "Winograd").
bool Compiler::winograd_pays(const mcl_conv_args &a) const {
  constexpr uint64_t kHostMinBlocks = 12, kHostMinChannels = 32;
  if (opt.winograd == "off" || a.groups != 1 || a.kernel_h != 3 || a.kernel_w != 3 ||
      a.stride_h != 1 || a.stride_w != 1 || a.dilation_h != 1 || a.dilation_w != 1 ||
      (a.input.dtype != MCL_DTYPE_F32 && a.input.dtype != MCL_DTYPE_F16))
    return false;
  const uint64_t blocks = uint64_t(a.output.h + 3) / 4 * (uint64_t(a.output.w + 3) / 4);
  if (opt.winograd == "auto" && (blocks < kHostMinBlocks || a.input.c < kHostMinChannels))
    return false;
  mcl_conv_args direct = a;
  direct.flags |= MCL_CONV_IMPLICIT_TABLE;
  mcl_conv_args winograd = direct;
  winograd.flags |= MCL_CONV_WINOGRAD;
  const uint32_t pes = opt.device.pes_per_cluster;
  return mcl_native_cost(MCL_NATIVE_FN_CONV2D, &winograd, pes) <
         mcl_native_cost(MCL_NATIVE_FN_CONV2D, &direct, pes);
}

// Packed parameters of output channels `part` of a convolution (geometry of cluster c).
Result<std::vector<uint8_t>> Compiler::pack_conv_slice(const PlannedOp &op, const Node &n,
                                                       unsigned c, const Box &part) const {
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
  // The schedule candidates of one compile pack the same slices again and again: the bytes
  // depend on the node's weights, the slice and the fields the native packer reads.
  const std::vector<int64_t> key = {op.node,    ob.c0,      ob.c1,      op.conv_fn(),
                                    a.flags,    a.groups,   a.input.c,  a.input.dtype,
                                    a.output.c, a.kernel_h, a.kernel_w, a.input_zero_point};
  if (const std::vector<uint8_t> *hit = PackCache::find(key))
    return *hit;
  std::vector<uint8_t> packed(mcl_native_conv_params_size(op.conv_fn(), &a));
  const float *wslice = w.data.data() + size_t(ob.c0) * per_out;
  std::vector<float> transposed_slice;
  if (op.transposed) {
    // ONNX's [cin][cout/groups][kh][kw]: gather the slice's output channels, each input
    // channel's of its own group. A grouped one is sliced at whole groups (plan.cpp): the
    // gathered rows are its groups' input channels, in the native layout of the smaller
    // grouped convolution ([cin'][cout/groups][kh][kw], ONNX's).
    const size_t cin = size_t(x.C), cout = size_t(out_c(op)), taps = size_t(op.kh * op.kw);
    const size_t groups = size_t(op.groups), cin_g = cin / groups, cout_g = cout / groups;
    if (groups > 1 && (ob.c0 % int64_t(cout_g) != 0 || ob.c1 % int64_t(cout_g) != 0))
      return make_error(where(n) + ": internal error: a grouped transposed convolution sliced "
                                   "inside a group");
    for (size_t ci = 0; ci < cin; ++ci)
      for (size_t co = size_t(ob.c0); co < size_t(ob.c1); ++co)
        if (co / cout_g == ci / cin_g)
          for (size_t t = 0; t < taps; ++t)
            transposed_slice.push_back(w.data[(ci * cout_g + co % cout_g) * taps + t]);
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
  PackCache::keep(key, packed);
  return packed;
}

void Compiler::call_conv(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const Box &ob = t.out_box;
  const Box &ib = t.in_box;
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  const uint64_t params_spm = t.params_spm;
  mcl_conv_args a = conv_args_shape(op, ib, ob);
  const uint32_t sliced_c = a.input.c;
  a.input = in0;
  if (const auto [g0, g1] = slice_groups(op, x.C, out_c(op), ob); g1 - g0 != op.groups) {
    // A slice of a grouped convolution reads its groups' input channels only.
    a.input.offset += uint32_t(g0 * (x.C / op.groups) * x.es);
    a.input.c = sliced_c;
  }
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
  if (a.flags & MCL_CONV_RESIDUAL)
    a.residual = tile_of(acts[op.ins[1]], t.cluster, need_for(op, 1, ob), op.stage_in[1]);
  a.flags |= conv_table_flag(op, a);
  call.add(op.conv_fn(), a);
}

// No address table is stored (no blob bytes, no DMA, no SPM): the call derives it from the
// geometry; only tiles with taps in the padding need the pad row for that.
uint16_t Compiler::conv_table_flag(const PlannedOp &op, const mcl_conv_args &a) {
  const int64_t last_y = int64_t(a.origin_y) + int64_t(a.output.h - 1) * a.stride_h +
                         int64_t(a.kernel_h - 1) * a.dilation_h;
  const int64_t last_x = int64_t(a.origin_x) + int64_t(a.output.w - 1) * a.stride_w +
                         int64_t(a.kernel_w - 1) * a.dilation_w;
  const bool inside = !op.transposed && a.origin_y >= 0 && a.origin_x >= 0 &&
                      last_y < int64_t(a.input.h) && last_x < int64_t(a.input.w);
  return inside ? uint16_t(MCL_CONV_NO_TABLE) : uint16_t(MCL_CONV_IMPLICIT_TABLE);
}

} // namespace kann::tiler
