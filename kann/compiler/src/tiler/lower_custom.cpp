// Lowering of custom operators (kann/custom_ops.h): one MCL_NATIVE_FN_CUSTOM record per output
// box naming the user's function; planned like the element-wise math operators (row bands
// on every cluster, in place when the input dies here).
#include "kann/custom_ops.h"
#include "tiler/tiler.h"

namespace kann::tiler {

Result<void> Compiler::call_custom(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const custom::Operator *custom = custom::of(n);
  if (!custom)
    return make_error(where(n) + ": custom operator no longer registered");
  if (t.in.dtype != t.out.dtype || t.in.dtype >= 32 || !(custom->dtypes & (1u << t.in.dtype)))
    return make_error(where(n) + ": custom operator " + custom->domain + "::" + custom->op_type +
                      " does not accept this element type (its mcl_custom_op.dtypes)");
  call.add(MCL_NATIVE_FN_CUSTOM,
           custom::make_args(*custom, n, t.in, t.out, opt.device.pes_per_cluster));
  return {};
}

} // namespace kann::tiler
