// Lowering of pooling: MaxPool / AveragePool windows (their input rows: need_window in
// lower_conv.cpp) and GlobalAveragePool / GlobalMaxPool (channel split).
#include "tiler/tiler.h"

namespace kann::tiler {

void Compiler::call_pool(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const Box &ob = t.out_box;
  const Box &ib = t.in_box;
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  mcl_pool_args a{};
  a.input = in0;
  a.output = out_tile;
  a.kind = ir::op_has(n.op, ir::kMaxReduction) ? MCL_POOL_MAX : MCL_POOL_AVG;
  a.in_quant = {x.scale, x.zero_point};
  a.out_quant = {y.scale, y.zero_point};
  if (op.kind == Lowering::GlobalPool) {
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
  call.add(MCL_NATIVE_FN_POOL2D, a);
}

} // namespace kann::tiler
