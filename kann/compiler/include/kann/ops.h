// kann's operator table: every operator the compiler knows, defined once.
//
// One line of KANN_OPERATORS per operator gives
//   - its enum name (ir::Op) and its name: the ONNX op_type, or kann's own name for the
//     operators the passes create; dumps, error messages and reports print it;
//   - where it comes from: imported from ONNX, or created by a pass;
//   - its shape rule (how onnx_import.cpp infers the output shape);
//   - its lowering (which lowering of the tile compiler runs it, kann/compiler/src/tiler/
//     lower_*.cpp), or None when the passes remove it before tiling;
//   - its abilities (INT8 kernel, fused activations, ...), which the importer, the passes,
//     quantize.cpp and the tile compiler test instead of lists of names.
// docs/kann.md's operator table lists every ONNX operator here (a test checks it). Adding an
// operator: see "Where a new operator goes" in docs/kann.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kann::ir {

// How the importer infers an operator's output shape (onnx_import.cpp, infer_node).
enum class ShapeRule : uint8_t {
  None,          // never reaches shape inference (expanded at import, or created by a pass)
  Conv,          // NCHW window with constant weights
  ConvTranspose, // transposed window
  Pad,           // constant, reflect or edge pads of up to three dimensions
  Window,        // pooling window
  Reduce,        // reduction over axes (over H and W of an image: global pooling)
  GlobalPool,    // [1,C,1,1]
  Gemm,          // [1,K] x constant -> [1,N]
  Broadcast,     // element-wise binary, NumPy broadcast
  SameShape,     // unary: the input's shape
  Transpose,     // permutation
  Slice,         // constant starts / ends / axes
  Flatten,       // [1,N]
  Reshape,       // constant shape, Squeeze, Unsqueeze
  Concat,        // along one axis
  Resize,        // constant scales or sizes
  Cast,          // the input's shape, another element type
  Quantize,      // Quantize / DequantizeLinear: the input's shape, the scale's quantization
  ConstantOnly,  // only on constants (folded as shape arithmetic)
  Movement,      // Expand, Tile, DepthToSpace, SpaceToDepth: data moved between dimensions
};

// Which lowering of the tile compiler runs an operator (kann/compiler/src/tiler/).
enum class Lowering : uint8_t {
  None,       // removed by the passes before tiling (an error if one is left)
  View,       // no computation: the output shares the input's storage
  Conv,       // lower_conv.cpp
  Pool,       // lower_pool.cpp
  GlobalPool, // lower_pool.cpp
  Gemm,       // lower_gemm.cpp
  Eltwise,    // lower_elementwise.cpp: binary with broadcast operands
  ScaleShift, // lower_elementwise.cpp: per-channel multiply-add
  Activation, // lower_elementwise.cpp: unary activation
  Softmax,    // lower_elementwise.cpp
  Convert,    // lower_elementwise.cpp: a copy (type conversion, channel slice, identity)
  Concat,     // lower_copy.cpp
  Shuffle,    // lower_copy.cpp: channel shuffle
  Resize,     // lower_resize.cpp
  Math,       // lower_math.cpp: element-wise math functions (exp, sin, elu, ...)
  Layout,     // lower_layout.cpp: strided copies of whole tensors (Transpose, reshape copies)
  Reduce,     // lower_layout.cpp: Reduce* over any axes of a whole tensor
};

enum class Origin : uint8_t { Onnx, Kann };

// Abilities (a bit set).
enum : uint32_t {
  kInt8Kernel = 1u << 0,       // has an INT8 kernel (lower_qdq_to_int8, quantize_int8)
  kFusesActivation = 1u << 1,  // an activation can be fused into it (fuse_activations)
  kActivation = 1u << 2,       // is a fusible activation (passes::activation_of)
  kWritesIntoConcat = 1u << 3, // a row-split producer that can write into a concat's buffer
  kView = 1u << 4,             // reinterprets its input's storage (Flatten / Reshape)
  kIdentity = 1u << 5,         // copies its input (removed by remove_identities)
  kMaxReduction = 1u << 6,     // reduces by max: no requantization between its INT8 operands
  kTakesResidual = 1u << 7,    // a residual Add of its float output fuses into it
  kResidualAdd = 1u << 8,      // fuses into a kTakesResidual producer (fuse_residual_adds)
};

// clang-format off
#define KANN_OPERATORS(OP)                                                                                          \
  /*  enum name           name                  origin  shape rule     lowering    abilities */                     \
  OP(Conv,                "Conv",               Onnx,   Conv,          Conv,       kInt8Kernel | kFusesActivation | kWritesIntoConcat | kTakesResidual) \
  OP(ConvTranspose,       "ConvTranspose",      Onnx,   ConvTranspose, Conv,       kFusesActivation | kWritesIntoConcat) \
  OP(MaxPool,             "MaxPool",            Onnx,   Window,        Pool,       kInt8Kernel | kWritesIntoConcat | kMaxReduction) \
  OP(AveragePool,         "AveragePool",        Onnx,   Window,        Pool,       kInt8Kernel | kWritesIntoConcat) \
  OP(GlobalAveragePool,   "GlobalAveragePool",  Onnx,   GlobalPool,    GlobalPool, kInt8Kernel)                     \
  OP(GlobalMaxPool,       "GlobalMaxPool",      Onnx,   GlobalPool,    GlobalPool, kInt8Kernel | kMaxReduction)     \
  OP(ReduceMean,          "ReduceMean",         Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceMax,           "ReduceMax",          Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceMin,           "ReduceMin",          Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceSum,           "ReduceSum",          Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceProd,          "ReduceProd",         Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceL1,            "ReduceL1",           Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceL2,            "ReduceL2",           Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceSumSquare,     "ReduceSumSquare",    Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceLogSum,        "ReduceLogSum",       Onnx,   Reduce,        Reduce,     0)                               \
  OP(ReduceLogSumExp,     "ReduceLogSumExp",    Onnx,   Reduce,        Reduce,     0)                               \
  OP(Gemm,                "Gemm",               Onnx,   Gemm,          Gemm,       kInt8Kernel | kFusesActivation)  \
  OP(MatMul,              "MatMul",             Onnx,   Gemm,          Gemm,       kFusesActivation)                \
  OP(Add,                 "Add",                Onnx,   Broadcast,     Eltwise,    kInt8Kernel | kFusesActivation | kWritesIntoConcat | kResidualAdd) \
  OP(Sub,                 "Sub",                Onnx,   Broadcast,     Eltwise,    kFusesActivation | kWritesIntoConcat) \
  OP(Mul,                 "Mul",                Onnx,   Broadcast,     Eltwise,    kFusesActivation | kWritesIntoConcat) \
  OP(Div,                 "Div",                Onnx,   Broadcast,     Eltwise,    kFusesActivation | kWritesIntoConcat) \
  OP(Max,                 "Max",                Onnx,   Broadcast,     Eltwise,    kFusesActivation | kWritesIntoConcat) \
  OP(Min,                 "Min",                Onnx,   Broadcast,     Eltwise,    kFusesActivation | kWritesIntoConcat) \
  OP(Sum,                 "Sum",                Onnx,   None,          None,       0)                               \
  OP(Mean,                "Mean",               Onnx,   None,          None,       0)                               \
  OP(Relu,                "Relu",               Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(Clip,                "Clip",               Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(LeakyRelu,           "LeakyRelu",          Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(PRelu,               "PRelu",              Onnx,   SameShape,     Activation, kActivation | kWritesIntoConcat) \
  OP(Sigmoid,             "Sigmoid",            Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(Tanh,                "Tanh",               Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(HardSigmoid,         "HardSigmoid",        Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(HardSwish,           "HardSwish",          Onnx,   SameShape,     Activation, kInt8Kernel | kActivation | kWritesIntoConcat) \
  OP(Abs,                "Abs",                Onnx,   SameShape,     Math,       0)                               \
  OP(Neg,                "Neg",                Onnx,   SameShape,     Math,       0)                               \
  OP(Exp,                "Exp",                Onnx,   SameShape,     Math,       0)                               \
  OP(Log,                "Log",                Onnx,   SameShape,     Math,       0)                               \
  OP(Sqrt,               "Sqrt",               Onnx,   SameShape,     Math,       0)                               \
  OP(Reciprocal,         "Reciprocal",         Onnx,   SameShape,     Math,       0)                               \
  OP(Floor,              "Floor",              Onnx,   SameShape,     Math,       0)                               \
  OP(Ceil,               "Ceil",               Onnx,   SameShape,     Math,       0)                               \
  OP(Round,              "Round",              Onnx,   SameShape,     Math,       0)                               \
  OP(Sign,               "Sign",               Onnx,   SameShape,     Math,       0)                               \
  OP(Sin,                "Sin",                Onnx,   SameShape,     Math,       0)                               \
  OP(Cos,                "Cos",                Onnx,   SameShape,     Math,       0)                               \
  OP(Tan,                "Tan",                Onnx,   SameShape,     Math,       0)                               \
  OP(Asin,               "Asin",               Onnx,   SameShape,     Math,       0)                               \
  OP(Acos,               "Acos",               Onnx,   SameShape,     Math,       0)                               \
  OP(Atan,               "Atan",               Onnx,   SameShape,     Math,       0)                               \
  OP(Sinh,               "Sinh",               Onnx,   SameShape,     Math,       0)                               \
  OP(Cosh,               "Cosh",               Onnx,   SameShape,     Math,       0)                               \
  OP(Asinh,              "Asinh",              Onnx,   SameShape,     Math,       0)                               \
  OP(Acosh,              "Acosh",              Onnx,   SameShape,     Math,       0)                               \
  OP(Atanh,              "Atanh",              Onnx,   SameShape,     Math,       0)                               \
  OP(Erf,                "Erf",                Onnx,   SameShape,     Math,       0)                               \
  OP(Softplus,           "Softplus",           Onnx,   SameShape,     Math,       0)                               \
  OP(Softsign,           "Softsign",           Onnx,   SameShape,     Math,       0)                               \
  OP(Elu,                "Elu",                Onnx,   SameShape,     Math,       0)                               \
  OP(Selu,               "Selu",               Onnx,   SameShape,     Math,       0)                               \
  OP(Celu,               "Celu",               Onnx,   SameShape,     Math,       0)                               \
  OP(ThresholdedRelu,    "ThresholdedRelu",    Onnx,   SameShape,     Math,       0)                               \
  OP(Shrink,             "Shrink",             Onnx,   SameShape,     Math,       0)                               \
  OP(Softmax,             "Softmax",            Onnx,   SameShape,     Softmax,    0)                               \
  OP(BatchNormalization,  "BatchNormalization", Onnx,   SameShape,     None,       0)                               \
  OP(Concat,              "Concat",             Onnx,   Concat,        Concat,     kInt8Kernel)                     \
  OP(Slice,               "Slice",              Onnx,   Slice,         Convert,    0)                               \
  OP(Transpose,           "Transpose",          Onnx,   Transpose,     Layout,     0)                               \
  OP(Expand,              "Expand",             Onnx,   Movement,      Layout,     0)                               \
  OP(Tile,                "Tile",               Onnx,   Movement,      Layout,     0)                               \
  OP(DepthToSpace,        "DepthToSpace",       Onnx,   Movement,      Layout,     0)                               \
  OP(SpaceToDepth,        "SpaceToDepth",       Onnx,   Movement,      Layout,     0)                               \
  OP(LogSoftmax,          "LogSoftmax",         Onnx,   None,          None,       0)                               \
  OP(Pad,                 "Pad",                Onnx,   Pad,           Layout,     0)                               \
  OP(Resize,              "Resize",             Onnx,   Resize,        Resize,     0)                               \
  OP(Flatten,             "Flatten",            Onnx,   Flatten,       View,       kView)                           \
  OP(Reshape,             "Reshape",            Onnx,   Reshape,       View,       kView)                           \
  OP(Squeeze,             "Squeeze",            Onnx,   Reshape,       View,       kView)                           \
  OP(Unsqueeze,           "Unsqueeze",          Onnx,   Reshape,       View,       kView)                           \
  OP(Identity,            "Identity",           Onnx,   SameShape,     Convert,    kIdentity)                       \
  OP(Dropout,             "Dropout",            Onnx,   SameShape,     Convert,    kIdentity)                       \
  OP(Cast,                "Cast",               Onnx,   Cast,          Convert,    0)                               \
  OP(Shape,               "Shape",              Onnx,   ConstantOnly,  None,       0)                               \
  OP(Gather,              "Gather",             Onnx,   ConstantOnly,  None,       0)                               \
  OP(Constant,            "Constant",           Onnx,   None,          None,       0)                               \
  OP(QuantizeLinear,      "QuantizeLinear",     Onnx,   Quantize,      Convert,    kWritesIntoConcat)               \
  OP(DequantizeLinear,    "DequantizeLinear",   Onnx,   Quantize,      Convert,    kWritesIntoConcat)               \
  OP(QLinearConv,         "QLinearConv",        Onnx,   None,          None,       0)                               \
  OP(QLinearMatMul,       "QLinearMatMul",      Onnx,   None,          None,       0)                               \
  OP(QLinearAdd,          "QLinearAdd",         Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(QLinearConcat,       "QLinearConcat",      Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(QLinearMul,          "QLinearMul",         Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(QLinearSigmoid,      "QLinearSigmoid",     Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(QLinearLeakyRelu,    "QLinearLeakyRelu",   Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(QLinearGlobalAveragePool, "QLinearGlobalAveragePool", Onnx, None, None,       0) /* com.microsoft */ \
  OP(QLinearAveragePool,  "QLinearAveragePool", Onnx,   None,          None,       0) /* com.microsoft */ \
  OP(ScaleShift,          "ScaleShift",         Kann,   SameShape,     ScaleShift, kFusesActivation | kWritesIntoConcat) \
  OP(ChannelShuffle,      "ChannelShuffle",     Kann,   None,          Shuffle,    0)                               \
  OP(Silu,                "Silu",               Kann,   None,          Activation, kInt8Kernel | kActivation | kWritesIntoConcat) /* x * Sigmoid(x) */ \
  OP(Custom,              "Custom",             Kann,   SameShape,     Math,       0) /* custom_ops.h */   \
  OP(Convert,             "Convert",            Kann,   None,          Convert,    kWritesIntoConcat) \
  OP(StridedSlice,        "StridedSlice",       Kann,   None,          Layout,     0)
// clang-format on

enum class Op : uint8_t {
#define KANN_OP_ENUM(id, ...) id,
  KANN_OPERATORS(KANN_OP_ENUM)
#undef KANN_OP_ENUM
};

struct OpInfo {
  Op op;
  const char *name;
  Origin origin;
  ShapeRule shape;
  Lowering lowering;
  uint32_t abilities;

  bool has(uint32_t ability) const { return (abilities & ability) == ability; }
};

// The table's entry of `op`.
const OpInfo &op_info(Op op);
inline const char *op_name(Op op) {
  return op_info(op).name;
}
inline bool op_has(Op op, uint32_t ability) {
  return op_info(op).has(ability);
}
// The ONNX operator of this op_type (kann's own operators are not importable).
std::optional<Op> op_from_onnx(std::string_view op_type);
// The lowering's name in dumps: "conv", "pool", ...
const char *lowering_name(Lowering lowering);
// Every operator, in table order.
const OpInfo *op_table_begin();
const OpInfo *op_table_end();

} // namespace kann::ir
