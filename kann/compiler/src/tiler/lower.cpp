// Lowering dispatch: the input box an operator needs for an output box, and the native calls
// computing an output box, each delegated to the operator kind's lowering (lower_*.cpp).
#include "tiler/tiler.h"

namespace kann::tiler {

// Input box that input i of `op` needs to compute output box `o`.
Box Compiler::need_for(const PlannedOp &op, size_t i, const Box &o) const {
  if (o.empty())
    return {};
  const Act &in = acts[op.ins[i]];
  if (op.strided)
    return full(in);
  switch (op.kind) {
  case Lowering::Conv:
    if (i == 1) // the residual: read where the output is written
      return o;
    return need_window(op, in, o);
  case Lowering::Pool:
    return need_window(op, in, o);
  case Lowering::GlobalPool:
    return {0, in.H, o.c0, o.c1};
  case Lowering::Gemm:
    return full(in);
  case Lowering::Concat:
  case Lowering::Shuffle:
    return {o.y0, o.y1, 0, in.C};
  case Lowering::Convert:
    return {o.y0, o.y1, o.c0 + op.in_c0, o.c1 + op.in_c0};
  case Lowering::Eltwise:
    return need_eltwise(op, in, o);
  case Lowering::Resize:
    return need_resize(op, in, o);
  default:
    return o;
  }
}

Result<Call> Compiler::make_call(const PlannedOp &op, unsigned c, const Box &ob,
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
  if (op.strided) {
    if (auto r = call_strided(op, tiles, call); !r)
      return r.error();
  } else {
    switch (op.kind) {
    case Lowering::None: // never planned
    case Lowering::View:
      break;
    case Lowering::Conv:
      call_conv(op, tiles, call);
      break;
    case Lowering::Pool:
    case Lowering::GlobalPool:
      call_pool(op, tiles, call);
      break;
    case Lowering::Gemm:
      call_gemm(op, tiles, call);
      break;
    case Lowering::Eltwise:
      call_eltwise(op, tiles, call);
      break;
    case Lowering::ScaleShift:
      call_scale_shift(op, tiles, call);
      break;
    case Lowering::Activation:
    case Lowering::Softmax:
    case Lowering::Convert:
      call_unary(op, tiles, call);
      break;
    case Lowering::Shuffle:
      call_shuffle(op, tiles, call);
      break;
    case Lowering::Resize:
      call_resize(op, tiles, call);
      break;
    case Lowering::Math:
      if (n.op == Op::Custom) { // a user's native function (lower_custom.cpp)
        if (auto r = call_custom(op, tiles, call); !r)
          return r.error();
        break;
      }
      call_math(op, tiles, call);
      break;
    case Lowering::Layout: // strided only
    case Lowering::Reduce:
      break;
    case Lowering::Concat:
      call_concat(op, tiles, call);
      break;
    }
  }
  char msg[256];
  for (const auto &r : call.records)
    if (mcl_native_validate(r.function_id, r.args.data(), r.args.size(), opt.device.spm_bytes, msg,
                            sizeof msg) != MCL_NATIVE_OK)
      return make_error(where(n) + ": internal error, invalid arguments: " + msg);
  return call;
}

} // namespace kann::tiler
