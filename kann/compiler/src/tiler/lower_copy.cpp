// Lowering of data movement between channels: Concat (one copy per input into its channels)
// and ChannelShuffle (one strided copy per group).
#include "tiler/tiler.h"

namespace kann::tiler {

void Compiler::call_shuffle(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const unsigned c = t.cluster;
  const Box &ib = t.in_box;
  const mcl_tile &out_tile = t.out;
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
    call.add(MCL_NATIVE_FN_COPY, a);
  }
}

void Compiler::call_concat(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &y = acts[op.out];
  const unsigned c = t.cluster;
  const Box &ob = t.out_box;
  const mcl_tile &out_tile = t.out;
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
    call.add(MCL_NATIVE_FN_COPY, a);
  }
}

} // namespace kann::tiler
