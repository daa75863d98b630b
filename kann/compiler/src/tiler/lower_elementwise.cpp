// Lowering of element-wise operators: binary Add / Sub / Mul / Div with broadcast operands,
// ScaleShift (folded per-channel affine), and the unary calls: activations, Softmax and
// plain copies (Convert, QuantizeLinear, DequantizeLinear, channel Slice, kept identities).
#include "tiler/tiler.h"

#include "kann/passes.h"

namespace kann::tiler {

// Broadcast operands: a per-channel gate [1,C,1,1] (or a scalar) reads its one pixel, a
// per-pixel mask [1,1,H,W] its one channel; the native call repeats them (0 strides).
Box Compiler::need_eltwise(const PlannedOp &op, const Act &in, const Box &o) const {
  const Act &out = acts[op.out];
  const bool one_pixel = in.H == 1 && in.W == 1 && (out.H > 1 || out.W > 1);
  const bool one_channel = in.C == 1 && out_c(op) > 1;
  if (!one_pixel && !one_channel)
    return o;
  return {one_pixel ? 0 : o.y0, one_pixel ? 1 : o.y1, one_channel ? 0 : o.c0,
          one_channel ? 1 : o.c1};
}

void Compiler::call_eltwise(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const unsigned c = t.cluster;
  const Box &ob = t.out_box;
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
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
  a.op = n.op == Op::Add   ? MCL_ELTWISE_ADD
         : n.op == Op::Sub ? MCL_ELTWISE_SUB
         : n.op == Op::Mul ? MCL_ELTWISE_MUL
         : n.op == Op::Max ? MCL_ELTWISE_MAX
         : n.op == Op::Min ? MCL_ELTWISE_MIN
                           : MCL_ELTWISE_DIV;
  a.act = n.act;
  a.a_quant = a.b_quant = a.out_quant = {1.0f, 0};
  if (n.ints.count("int8")) { // requantizing INT8 add: each operand its own quantization
    const Act &xb = acts[op.ins[1]];
    a.a_quant = {x.scale, x.zero_point};
    a.b_quant = {xb.scale, xb.zero_point};
    a.out_quant = {y.scale, y.zero_point};
  }
  call.add(MCL_NATIVE_FN_ELTWISE, a);
}

void Compiler::call_scale_shift(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  const uint64_t params_spm = t.params_spm;
  mcl_scale_shift_args a{};
  a.input = in0;
  a.output = out_tile;
  a.act = n.act;
  a.in_quant = a.out_quant = {1.0f, 0};
  a.params_offset = uint32_t(params_spm);
  call.add(MCL_NATIVE_FN_SCALE_SHIFT, a);
}

void Compiler::call_unary(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  mcl_unary_args a{};
  a.input = in0;
  a.output = out_tile;
  if (op.kind == Lowering::Activation)
    passes::activation_of(g, n, a.act);
  a.in_quant = {x.scale, x.zero_point};
  a.out_quant = {y.scale, y.zero_point};
  if (op.kind == Lowering::Softmax && x.C == 1 && x.W > 1) {
    // A row-major tensor (one channel): the softmax runs over each row's pixels, which are
    // contiguous, so the rows are read as pixels whose channels are the row's elements.
    auto rows_as_pixels = [](mcl_tile t) {
      t.c = t.w;
      t.w = 1;
      t.channel_stride = t.pixel_stride;
      t.pixel_stride = t.row_stride;
      return t;
    };
    a.input = rows_as_pixels(a.input);
    a.output = rows_as_pixels(a.output);
  }
  call.add(op.kind == Lowering::Softmax   ? MCL_NATIVE_FN_SOFTMAX
           : op.kind == Lowering::Convert ? MCL_NATIVE_FN_COPY
                                          : MCL_NATIVE_FN_ACTIVATION,
           a);
}

} // namespace kann::tiler
