// The operator table (kann/ops.h): one entry per operator, generated from KANN_OPERATORS.
#include "kann/ops.h"

#include <iterator>

namespace kann::ir {

namespace {

constexpr OpInfo kOperators[] = {
#define KANN_OP_INFO(id, name, origin, shape, lowering, abilities)                                 \
  {Op::id, name, Origin::origin, ShapeRule::shape, Lowering::lowering, abilities},
    KANN_OPERATORS(KANN_OP_INFO)
#undef KANN_OP_INFO
};

// The table is indexed by the enum: both come from the same list, in the same order.
constexpr bool indexed_by_enum() {
  for (size_t i = 0; i < std::size(kOperators); ++i)
    if (size_t(kOperators[i].op) != i)
      return false;
  return true;
}
static_assert(indexed_by_enum());

} // namespace

const OpInfo &op_info(Op op) {
  return kOperators[size_t(op)];
}

std::optional<Op> op_from_onnx(std::string_view op_type) {
  for (const OpInfo &info : kOperators)
    if (info.origin == Origin::Onnx && op_type == info.name)
      return info.op;
  return std::nullopt;
}

const char *lowering_name(Lowering lowering) {
  switch (lowering) {
  case Lowering::None:
    return "none";
  case Lowering::View:
    return "view";
  case Lowering::Conv:
    return "conv";
  case Lowering::Pool:
    return "pool";
  case Lowering::GlobalPool:
    return "global-pool";
  case Lowering::Gemm:
    return "gemm";
  case Lowering::Eltwise:
    return "eltwise";
  case Lowering::ScaleShift:
    return "scale-shift";
  case Lowering::Activation:
    return "activation";
  case Lowering::Softmax:
    return "softmax";
  case Lowering::Convert:
    return "copy";
  case Lowering::Concat:
    return "concat";
  case Lowering::Shuffle:
    return "shuffle";
  case Lowering::Resize:
    return "resize";
  case Lowering::Math:
    return "math";
  case Lowering::Layout:
    return "layout";
  case Lowering::Reduce:
    return "reduce";
  }
  return "?";
}

const OpInfo *op_table_begin() {
  return std::begin(kOperators);
}
const OpInfo *op_table_end() {
  return std::end(kOperators);
}

} // namespace kann::ir
