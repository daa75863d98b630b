// Lowering dispatch: the input box an operator needs for an output box, and the native calls
// computing an output box, each delegated to the operator kind's lowering (lower_*.cpp).
#include "tiler/tiler.h"

namespace kann::tiler {

// Input box that input i of `op` needs to compute output box `o`.
Box Compiler::need_for(const Op &op, size_t i, const Box &o) const {
  if (o.empty())
    return {};
  const Act &in = acts[op.ins[i]];
  switch (op.kind) {
  case Kind::Conv:
  case Kind::Pool:
    return need_window(op, in, o);
  case Kind::GlobalPool:
    return {0, in.H, o.c0, o.c1};
  case Kind::Gemm:
    return full(in);
  case Kind::Concat:
  case Kind::Shuffle:
    return {o.y0, o.y1, 0, in.C};
  case Kind::Convert:
    return {o.y0, o.y1, o.c0 + op.in_c0, o.c1 + op.in_c0};
  case Kind::Eltwise:
    return need_eltwise(op, in, o);
  case Kind::Resize:
    return need_resize(op, in, o);
  default:
    return o;
  }
}

Result<Call> Compiler::make_call(const Op &op, unsigned c, const Box &ob,
                                 uint64_t params_spm) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  CallTiles tiles;
  tiles.cluster = c;
  tiles.out_box = ob;
  tiles.in_box = need_for(op, 0, ob);
  tiles.in = tile_of(x, c, tiles.in_box, op.stage_in[0]);
  tiles.out = tile_of(y, c, stored(op, ob), op.stage_out);
  tiles.params_spm = params_spm;
  Call call;
  call.pes_per_cluster = opt.device.pes_per_cluster;
  switch (op.kind) {
  case Kind::Conv:
    call_conv(op, tiles, call);
    break;
  case Kind::Pool:
  case Kind::GlobalPool:
    call_pool(op, tiles, call);
    break;
  case Kind::Gemm:
    call_gemm(op, tiles, call);
    break;
  case Kind::Eltwise:
    call_eltwise(op, tiles, call);
    break;
  case Kind::ScaleShift:
    call_scale_shift(op, tiles, call);
    break;
  case Kind::Activation:
  case Kind::Softmax:
  case Kind::Convert:
    call_unary(op, tiles, call);
    break;
  case Kind::Shuffle:
    call_shuffle(op, tiles, call);
    break;
  case Kind::Resize:
    call_resize(op, tiles, call);
    break;
  case Kind::Concat:
    call_concat(op, tiles, call);
    break;
  }
  char msg[256];
  for (const auto &r : call.records)
    if (mcl_native_validate(r.function_id, r.args.data(), r.args.size(), opt.device.spm_bytes, msg,
                            sizeof msg) != MCL_NATIVE_OK)
      return make_error(where(n) + ": internal error, invalid arguments: " + msg);
  return call;
}

} // namespace kann::tiler
