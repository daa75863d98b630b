// Lowering of the element-wise math operators (Abs, Exp, Sin, Softplus, Elu, ...): one
// MCL_NATIVE_FN_MATH call per output box, the ONNX attributes as the function's parameters.
#include "tiler/tiler.h"

namespace kann::tiler {

namespace {

struct MathFunction {
  Op op;
  uint32_t fn;
  const char *alpha_name; // ONNX attribute giving alpha (nullptr: none)
  float alpha;
  const char *beta_name;
  float beta;
};

constexpr MathFunction kFunctions[] = {
    {Op::Abs, MCL_MATH_ABS, nullptr, 0, nullptr, 0},
    {Op::Neg, MCL_MATH_NEG, nullptr, 0, nullptr, 0},
    {Op::Exp, MCL_MATH_EXP, nullptr, 0, nullptr, 0},
    {Op::Log, MCL_MATH_LOG, nullptr, 0, nullptr, 0},
    {Op::Sqrt, MCL_MATH_SQRT, nullptr, 0, nullptr, 0},
    {Op::Reciprocal, MCL_MATH_RECIPROCAL, nullptr, 0, nullptr, 0},
    {Op::Floor, MCL_MATH_FLOOR, nullptr, 0, nullptr, 0},
    {Op::Ceil, MCL_MATH_CEIL, nullptr, 0, nullptr, 0},
    {Op::Round, MCL_MATH_ROUND, nullptr, 0, nullptr, 0},
    {Op::Sign, MCL_MATH_SIGN, nullptr, 0, nullptr, 0},
    {Op::Sin, MCL_MATH_SIN, nullptr, 0, nullptr, 0},
    {Op::Cos, MCL_MATH_COS, nullptr, 0, nullptr, 0},
    {Op::Tan, MCL_MATH_TAN, nullptr, 0, nullptr, 0},
    {Op::Asin, MCL_MATH_ASIN, nullptr, 0, nullptr, 0},
    {Op::Acos, MCL_MATH_ACOS, nullptr, 0, nullptr, 0},
    {Op::Atan, MCL_MATH_ATAN, nullptr, 0, nullptr, 0},
    {Op::Sinh, MCL_MATH_SINH, nullptr, 0, nullptr, 0},
    {Op::Cosh, MCL_MATH_COSH, nullptr, 0, nullptr, 0},
    {Op::Asinh, MCL_MATH_ASINH, nullptr, 0, nullptr, 0},
    {Op::Acosh, MCL_MATH_ACOSH, nullptr, 0, nullptr, 0},
    {Op::Atanh, MCL_MATH_ATANH, nullptr, 0, nullptr, 0},
    {Op::Erf, MCL_MATH_ERF, nullptr, 0, nullptr, 0},
    {Op::Softplus, MCL_MATH_SOFTPLUS, nullptr, 0, nullptr, 0},
    {Op::Softsign, MCL_MATH_SOFTSIGN, nullptr, 0, nullptr, 0},
    {Op::Elu, MCL_MATH_ELU, "alpha", 1.0f, nullptr, 0},
    // ONNX's Selu defaults (the float values the operator's definition gives).
    {Op::Selu, MCL_MATH_SELU, "alpha", 1.67326319217681884765625f, "gamma",
     1.05070102214813232421875f},
    {Op::Celu, MCL_MATH_CELU, "alpha", 1.0f, nullptr, 0},
    {Op::ThresholdedRelu, MCL_MATH_THRESHOLDED_RELU, "alpha", 1.0f, nullptr, 0},
    {Op::Shrink, MCL_MATH_SHRINK, "lambd", 0.5f, "bias", 0.0f},
};

} // namespace

void Compiler::call_math(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  mcl_math_args a{};
  a.input = t.in;
  a.output = t.out;
  for (const MathFunction &f : kFunctions)
    if (f.op == n.op) {
      a.op = f.fn;
      a.alpha = f.alpha_name ? n.attrf(f.alpha_name, f.alpha) : 0.0f;
      a.beta = f.beta_name ? n.attrf(f.beta_name, f.beta) : 0.0f;
    }
  call.add(MCL_NATIVE_FN_MATH, a);
}

} // namespace kann::tiler
