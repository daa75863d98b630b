// The registry: argument-block sizes, the validator the program loader runs on untrusted
// blocks, dispatch, and the modeled cycle cost.
#include "call_profile.h"
#include "cost_model.h"
#include "custom_call.h"
#include "elementwise_math.h"
#include "internal.h"
#include "winograd.h"

#include <chrono>
#include <cstdio>

namespace manycl::native {

namespace {

using u128 = unsigned __int128;

constexpr uint64_t kMaxSpm = 1ull << 32; // offsets are 32-bit
constexpr uint32_t kMaxDim = 1u << 24;

enum class Role {
  Output,        // channel_stride 1, elements do not overlap
  StridedOutput, // channel_stride >= 1, elements do not overlap
  Dense,         // channel_stride 1
  Broadcast      // any strides (0 broadcasts)
};

// Collects the first error; later checks become no-ops.
class Checker {
public:
  explicit Checker(uint64_t spm, OperandRecorder *record = nullptr) : spm_(spm), record_(record) {}
  bool ok() const { return status_.ok(); }
  Status status() const { return status_; }

  bool fail(int code, std::string msg) {
    if (status_.ok())
      status_ = Status::Error(code, std::move(msg));
    return false;
  }
  bool require(bool cond, const std::string &msg) {
    return cond || fail(MCL_NATIVE_ERR_BAD_ARGS, msg);
  }

  // A byte range [offset, offset+bytes) inside the SPM with the given alignment.
  bool range(const char *what, uint64_t offset, u128 bytes, uint64_t align,
             uint32_t kind = MCL_NATIVE_OPERAND_DATA) {
    if (!ok())
      return false;
    if (align > 1 && offset % align != 0)
      return fail(MCL_NATIVE_ERR_BAD_ARGS, std::string(what) + ": offset " +
                                               std::to_string(offset) + " is not " +
                                               std::to_string(align) + "-byte aligned");
    if ((u128)offset + bytes > spm_)
      return fail(MCL_NATIVE_ERR_OUT_OF_RANGE, std::string(what) + ": range at offset " +
                                                   std::to_string(offset) + " exceeds the SPM (" +
                                                   std::to_string(spm_) + " bytes)");
    if (record_)
      record_->add(offset, (uint64_t)bytes, kind);
    return true;
  }

  bool tile(const char *what, const mcl_tile &t, Role role) {
    if (!ok())
      return false;
    const std::string name(what);
    const uint32_t es = dtype_size(t.dtype);
    if (es == 0 || t.dtype == MCL_DTYPE_S32)
      return fail(MCL_NATIVE_ERR_BAD_ARGS, name + ": invalid dtype " + std::to_string(t.dtype));
    if (t.h == 0 || t.w == 0 || t.c == 0 || t.h > kMaxDim || t.w > kMaxDim || t.c > kMaxDim)
      return fail(MCL_NATIVE_ERR_BAD_ARGS, name + ": dimensions must be in [1, 2^24]");
    if (role == Role::StridedOutput ? t.channel_stride == 0
                                    : role != Role::Broadcast && t.channel_stride != 1)
      return fail(MCL_NATIVE_ERR_BAD_ARGS, name + ": channel_stride must be 1");
    if (role == Role::Output || role == Role::StridedOutput) {
      // Span of one pixel's channels: with a channel stride s, (c - 1) * s + 1 elements.
      const uint64_t span = (uint64_t)(t.c - 1) * t.channel_stride + 1;
      if (t.w > 1 && t.pixel_stride < span)
        return fail(MCL_NATIVE_ERR_BAD_ARGS, name + ": pixels overlap (pixel_stride < c)");
      if (t.h > 1 && (uint64_t)t.row_stride < (uint64_t)(t.w - 1) * t.pixel_stride + span)
        return fail(MCL_NATIVE_ERR_BAD_ARGS, name + ": rows overlap");
    }
    const u128 last = (u128)(t.h - 1) * t.row_stride + (u128)(t.w - 1) * t.pixel_stride +
                      (u128)(t.c - 1) * t.channel_stride;
    if (last >= (1u << 31))
      return fail(MCL_NATIVE_ERR_OUT_OF_RANGE, name + ": extent exceeds 2^31 elements");
    // An output tile without gaps has every byte of its range written.
    const bool whole = role == Role::Output && (t.w == 1 || t.pixel_stride == t.c) &&
                       (t.h == 1 || (uint64_t)t.row_stride == (uint64_t)t.w * t.pixel_stride);
    return range(what, t.offset, (last + 1) * es, es,
                 whole ? MCL_NATIVE_OPERAND_WRITTEN : MCL_NATIVE_OPERAND_DATA);
  }

  bool activation(const mcl_activation &a) {
    if (!require(a.kind < MCL_ACT_COUNT_, "activation: unknown kind " + std::to_string(a.kind)))
      return false;
    if (a.kind == MCL_ACT_CLIP)
      return require(!(a.alpha > a.beta), "activation: clip min > max");
    return true;
  }

  bool quant(const char *what, const mcl_quant &q, uint32_t dtype) {
    if (!is_int8(dtype))
      return true;
    return require(std::isfinite(q.scale) && q.scale > 0.0f,
                   std::string(what) + ": scale must be finite and > 0") &&
           require(q.zero_point >= qmin(dtype) && q.zero_point <= qmax(dtype),
                   std::string(what) + ": zero point out of range");
  }

  bool same_shape(const char *what, const mcl_tile &a, const mcl_tile &b) {
    return require(a.h == b.h && a.w == b.w && a.c == b.c, std::string(what) + ": shapes differ");
  }

private:
  uint64_t spm_;
  OperandRecorder *record_;
  Status status_;
};

bool float_type(uint32_t d) {
  return d == MCL_DTYPE_F32 || d == MCL_DTYPE_F16;
}

// A custom-operator record: its tiles, and a function name that is a C identifier, so a
// loader only ever looks up plain symbol names.
void check_custom(Checker &ck, const mcl_custom_args &a) {
  ck.tile("input", a.input, Role::Broadcast);
  ck.tile("output", a.output, Role::Output);
  if (!ck.ok())
    return;
  ck.require(a.input.dtype == a.output.dtype && float_type(a.input.dtype),
             "custom: input and output must both be F32 or both F16");
  if (a.kind == MCL_CUSTOM_WHOLE) { // whole tensors: any shapes, 1..MCL_CUSTOM_INPUT_MAX inputs
    if (!ck.require(a.input_count >= 1 && a.input_count <= MCL_CUSTOM_INPUT_MAX,
                    "custom: input_count out of range"))
      return;
    for (uint32_t i = 1; i < a.input_count; ++i) {
      ck.tile("input", a.more_inputs[i - 1], Role::Broadcast);
      ck.require(a.more_inputs[i - 1].dtype == a.output.dtype,
                 "custom: inputs and output must have one element type");
    }
  } else {
    ck.require(a.kind == MCL_CUSTOM_ELEMENTWISE, "custom: unknown kind");
    ck.require(a.input_count <= 1, "custom: an element-wise operator has one input");
    ck.same_shape("custom", a.input, a.output);
  }
  ck.require(a.param_count <= MCL_CUSTOM_PARAM_MAX, "custom: too many parameters");
  size_t length = 0;
  while (length < MCL_CUSTOM_FUNCTION_MAX && a.function[length] != 0)
    ++length;
  if (!ck.require(length > 0 && length < MCL_CUSTOM_FUNCTION_MAX,
                  "custom: function name is empty or not NUL-terminated"))
    return;
  bool identifier = !(a.function[0] >= '0' && a.function[0] <= '9');
  for (size_t i = 0; i < length; ++i) {
    const char ch = a.function[i];
    identifier = identifier && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                                (ch >= '0' && ch <= '9') || ch == '_');
  }
  for (size_t i = length; i < MCL_CUSTOM_FUNCTION_MAX; ++i)
    identifier = identifier && a.function[i] == 0;
  ck.require(identifier, "custom: function name is not a C identifier padded with NULs");
}

void check_conv(Checker &ck, uint32_t fn, const mcl_conv_args &a, bool from_gemm) {
  const char *what = from_gemm ? "gemm" : "conv";
  ck.tile("input", a.input, Role::Dense);
  ck.tile("output", a.output, Role::Output);
  if (!ck.ok())
    return;
  const uint32_t in = a.input.dtype, out = a.output.dtype;
  ck.require((float_type(in) && out == in) || (is_int8(in) && is_int8(out)),
             std::string(what) + ": unsupported input/output types");
  ck.require(a.groups >= 1 && a.input.c % a.groups == 0 && a.output.c % a.groups == 0,
             std::string(what) + ": channels not divisible by groups");
  ck.require(a.kernel_h >= 1 && a.kernel_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1 &&
                 a.dilation_h >= 1 && a.dilation_w >= 1,
             std::string(what) + ": kernel, stride and dilation must be >= 1");
  const uint32_t table_flags = MCL_CONV_NO_TABLE | MCL_CONV_IMPLICIT_TABLE;
  const uint32_t known_flags =
      table_flags | (is_int8(a.input.dtype) ? (uint32_t)MCL_CONV_WEIGHT_ZERO_POINTS
                                            : (uint32_t)(MCL_CONV_RESIDUAL | MCL_CONV_WINOGRAD));
  ck.require((a.flags & ~known_flags) == 0 && (a.flags & table_flags) != table_flags &&
                 a.reserved0 == 0,
             std::string(what) + ": unknown flags");
  ck.require(!(a.flags & MCL_CONV_WINOGRAD) || winograd_applies(fn, a),
             std::string(what) + ": Winograd needs a 3x3 convolution with stride 1, dilation 1, "
                                 "one group and no stored table");
  ck.activation(a.act);
  if (!ck.ok())
    return;
  if (a.flags & MCL_CONV_RESIDUAL) {
    // Read element by element where the output is written: the same shape and type.
    if (!ck.tile("residual", a.residual, Role::Dense))
      return;
    ck.require(a.residual.dtype == out, std::string(what) + ": residual type differs from output");
    ck.same_shape("conv residual", a.residual, a.output);
    // Kernels may compute an output pixel twice (blocks overlapping at a row's end): the
    // residual must still be there the second time.
    auto end_of = [](const mcl_tile &t) {
      return (u128)t.offset +
             ((u128)(t.h - 1) * t.row_stride + (u128)(t.w - 1) * t.pixel_stride + t.c) *
                 dtype_size(t.dtype);
    };
    ck.require(end_of(a.output) <= a.residual.offset || end_of(a.residual) <= a.output.offset,
               std::string(what) + ": residual overlaps the output");
  } else {
    static const mcl_tile kNoTile{};
    ck.require(std::memcmp(&a.residual, &kNoTile, sizeof kNoTile) == 0,
               std::string(what) + ": residual set without MCL_CONV_RESIDUAL");
  }
  if (!ck.ok())
    return;
  if (is_int8(in)) {
    ck.require(a.input_zero_point >= qmin(in) && a.input_zero_point <= qmax(in),
               "conv: input zero point out of range");
    ck.require(a.output_zero_point >= qmin(out) && a.output_zero_point <= qmax(out),
               "conv: output zero point out of range");
    ck.require(a.output_min <= a.output_max && a.output_min >= qmin(out) &&
                   a.output_max <= qmax(out),
               "conv: output clamp range invalid");
  }
  const uint64_t taps = (uint64_t)a.kernel_h * a.kernel_w;
  const uint64_t m = (uint64_t)a.output.h * a.output.w;
  const uint64_t cin_g = a.input.c / a.groups;
  ck.require(taps * cin_g * 32 <= 0xffffffffull, "conv: kernel too large");
  // A stored address table must fit in the SPM (the other modes build it per call).
  const bool stored_table = (a.flags & (MCL_CONV_NO_TABLE | MCL_CONV_IMPLICIT_TABLE)) == 0;
  if (!ck.ok() ||
      (stored_table && !ck.range("address table", a.table_offset, (u128)m * taps * 4, 4)))
    return;
  // Packed parameters: compute the size only once its factors are known to be small.
  if (!ck.range("params", a.params_offset, conv_params_size(fn, a), 4, MCL_NATIVE_OPERAND_PARAMS))
    return;
  if (a.flags & MCL_CONV_NO_TABLE) {
    ck.require(fn == MCL_NATIVE_FN_CONV2D, "conv: transposed convolution needs a table");
    const int64_t last_y = (int64_t)a.origin_y + (int64_t)(a.output.h - 1) * a.stride_h +
                           (int64_t)(a.kernel_h - 1) * a.dilation_h;
    const int64_t last_x = (int64_t)a.origin_x + (int64_t)(a.output.w - 1) * a.stride_w +
                           (int64_t)(a.kernel_w - 1) * a.dilation_w;
    ck.require(a.origin_y >= 0 && a.origin_x >= 0 && last_y < a.input.h && last_x < a.input.w,
               std::string(what) + ": without a table every tap must lie inside the input");
  } else {
    const uint32_t es = dtype_size(in);
    ck.range("pad row", a.pad_row_offset, (u128)a.input.c * es, es);
    if (!stored_table)
      return;
    // The table is the one operand whose content decides addresses: an output overlapping it
    // would rewrite it while other PEs read it (and after checked mode looked at it).
    const u128 out_begin = a.output.offset;
    const u128 out_end = out_begin + ((u128)(a.output.h - 1) * a.output.row_stride +
                                      (u128)(a.output.w - 1) * a.output.pixel_stride + a.output.c) *
                                         dtype_size(out);
    const u128 tab_begin = a.table_offset, tab_end = tab_begin + (u128)m * taps * 4;
    ck.require(out_end <= tab_begin || tab_end <= out_begin,
               std::string(what) + ": output overlaps the address table");
  }
}

const size_t kArgsSize[MCL_NATIVE_FN_COUNT_] = {
    0,
    sizeof(mcl_conv_args),
    sizeof(mcl_conv_args),
    sizeof(mcl_gemm_args),
    sizeof(mcl_matmul_args),
    sizeof(mcl_pool_args),
    sizeof(mcl_eltwise_args),
    sizeof(mcl_scale_shift_args),
    sizeof(mcl_unary_args),
    sizeof(mcl_unary_args),
    sizeof(mcl_resize_args),
    sizeof(mcl_unary_args),
    sizeof(mcl_pad_args),
    sizeof(mcl_math_args),
    sizeof(mcl_reduce_args),
    sizeof(mcl_custom_args),
};

const char *const kNames[MCL_NATIVE_FN_COUNT_] = {
    "invalid", "conv2d",      "conv_transpose2d", "gemm",    "matmul", "pool2d",
    "eltwise", "scale_shift", "activation",       "softmax", "resize", "copy",
    "pad",     "math",        "reduce",           "custom"};

// Copies the block so it is aligned and cannot change while being checked.
template <class T> T load_block(const void *p) {
  T t;
  std::memcpy(&t, p, sizeof(T));
  return t;
}

} // namespace

Status validate(uint32_t fn, const void *args, size_t size, uint64_t spm_size,
                OperandRecorder *record) {
  if (fn == 0 || fn >= MCL_NATIVE_FN_COUNT_)
    return Status::Error(MCL_NATIVE_ERR_UNKNOWN_FUNCTION,
                         "unknown native function id " + std::to_string(fn));
  if (!args || size != kArgsSize[fn])
    return Status::Error(MCL_NATIVE_ERR_BAD_SIZE, std::string(kNames[fn]) + ": argument block is " +
                                                      std::to_string(size) + " bytes, expected " +
                                                      std::to_string(kArgsSize[fn]));
  if (spm_size > kMaxSpm)
    return Status::Error(MCL_NATIVE_ERR_BAD_ARGS, "SPM larger than 4 GiB is not addressable");
  Checker ck(spm_size, record);
  switch (fn) {
  case MCL_NATIVE_FN_CONV2D:
  case MCL_NATIVE_FN_CONV_TRANSPOSE2D:
    check_conv(ck, fn, load_block<mcl_conv_args>(args), false);
    break;
  case MCL_NATIVE_FN_GEMM: {
    const auto g = load_block<mcl_gemm_args>(args);
    ck.require((g.flags & ~(uint32_t)MCL_CONV_WEIGHT_ZERO_POINTS) == 0, "gemm: unknown flags");
    ck.require(g.input.h == g.output.h && g.input.w == g.output.w,
               "gemm: input and output rows differ");
    check_conv(ck, MCL_NATIVE_FN_CONV2D, gemm_as_conv(g), true);
    break;
  }
  case MCL_NATIVE_FN_MATMUL: {
    const auto a = load_block<mcl_matmul_args>(args);
    ck.tile("a", a.a, Role::Broadcast);
    ck.tile("b", a.b, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    ck.activation(a.act);
    if (!ck.ok())
      break;
    ck.require(float_type(a.output.dtype) && a.a.dtype == a.output.dtype &&
                   a.b.dtype == a.output.dtype,
               "matmul: float types only, all the same");
    ck.require(a.a.h == a.output.h && a.a.w == a.output.w, "matmul: rows of a and output differ");
    ck.require(a.b.h == 1 && a.b.w == a.a.c && a.b.c == a.output.c, "matmul: b must be 1 x K x N");
    break;
  }
  case MCL_NATIVE_FN_POOL2D: {
    const auto a = load_block<mcl_pool_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.require(a.input.dtype == a.output.dtype, "pool: input and output types differ");
    ck.require(a.input.c == a.output.c, "pool: channel counts differ");
    ck.require(a.kind == MCL_POOL_MAX || a.kind == MCL_POOL_AVG, "pool: unknown kind");
    ck.require(a.kernel_h >= 1 && a.kernel_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1 &&
                   a.dilation_h >= 1 && a.dilation_w >= 1,
               "pool: kernel, stride and dilation must be >= 1");
    ck.quant("pool input", a.in_quant, a.input.dtype);
    ck.quant("pool output", a.out_quant, a.output.dtype);
    break;
  }
  case MCL_NATIVE_FN_ELTWISE: {
    const auto a = load_block<mcl_eltwise_args>(args);
    ck.tile("a", a.a, Role::Broadcast);
    ck.tile("b", a.b, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.same_shape("eltwise a", a.a, a.output);
    ck.same_shape("eltwise b", a.b, a.output);
    ck.require(a.a.dtype == a.output.dtype && a.b.dtype == a.output.dtype,
               "eltwise: operand types differ");
    ck.require(a.op < MCL_ELTWISE_COUNT_, "eltwise: unknown op");
    ck.activation(a.act);
    ck.quant("eltwise a", a.a_quant, a.a.dtype);
    ck.quant("eltwise b", a.b_quant, a.b.dtype);
    ck.quant("eltwise output", a.out_quant, a.output.dtype);
    break;
  }
  case MCL_NATIVE_FN_SCALE_SHIFT: {
    const auto a = load_block<mcl_scale_shift_args>(args);
    ck.tile("input", a.input, Role::Dense);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.same_shape("scale_shift", a.input, a.output);
    ck.require(a.input.dtype == a.output.dtype, "scale_shift: types differ");
    ck.require(a.reserved0 == 0, "scale_shift: reserved field must be 0");
    ck.activation(a.act);
    ck.quant("scale_shift input", a.in_quant, a.input.dtype);
    ck.quant("scale_shift output", a.out_quant, a.output.dtype);
    ck.range("scale_shift params", a.params_offset, (u128)a.input.c * 8, 4,
             MCL_NATIVE_OPERAND_PARAMS);
    break;
  }
  case MCL_NATIVE_FN_ACTIVATION:
  case MCL_NATIVE_FN_SOFTMAX:
  case MCL_NATIVE_FN_COPY: {
    const auto a = load_block<mcl_unary_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    // COPY may scatter channels (channel shuffles write every G-th channel).
    ck.tile("output", a.output, fn == MCL_NATIVE_FN_COPY ? Role::StridedOutput : Role::Output);
    if (!ck.ok())
      break;
    ck.same_shape(kNames[fn], a.input, a.output);
    ck.activation(a.act);
    ck.quant("input", a.in_quant, a.input.dtype);
    ck.quant("output", a.out_quant, a.output.dtype);
    break;
  }
  case MCL_NATIVE_FN_CUSTOM:
    check_custom(ck, load_block<mcl_custom_args>(args));
    break;
  case MCL_NATIVE_FN_MATH: {
    const auto a = load_block<mcl_math_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.same_shape("math", a.input, a.output);
    ck.require(a.input.dtype == a.output.dtype &&
                   (a.input.dtype == MCL_DTYPE_F32 || a.input.dtype == MCL_DTYPE_F16),
               "math: input and output must both be F32 or both F16");
    ck.require(a.op < MCL_MATH_COUNT_, "math: unknown function");
    ck.require(a.reserved0 == 0, "math: reserved field must be 0");
    break;
  }
  case MCL_NATIVE_FN_REDUCE: {
    const auto a = load_block<mcl_reduce_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    ck.tile("output", a.output, Role::StridedOutput);
    if (!ck.ok())
      break;
    ck.require(a.output.h == 1 && a.output.w == 1 && a.output.c == a.input.c,
               "reduce: the output must be 1 x 1 x input.c");
    ck.require(a.input.h >= 1 && a.input.w >= 1, "reduce: nothing to reduce");
    ck.require(a.input.dtype == a.output.dtype &&
                   (a.input.dtype == MCL_DTYPE_F32 || a.input.dtype == MCL_DTYPE_F16),
               "reduce: input and output must both be F32 or both F16");
    ck.require(a.op < MCL_REDUCE_COUNT_, "reduce: unknown reduction");
    ck.require(a.reserved0 == 0, "reduce: reserved field must be 0");
    break;
  }
  case MCL_NATIVE_FN_RESIZE: {
    const auto a = load_block<mcl_resize_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.require(a.input.dtype == a.output.dtype && a.input.c == a.output.c,
               "resize: types or channels differ");
    ck.require(a.mode <= MCL_RESIZE_BILINEAR && a.coord_mode <= MCL_COORD_PYTORCH_HALF_PIXEL &&
                   a.nearest_mode <= MCL_NEAREST_CEIL && a.reserved0 == 0,
               "resize: unknown mode");
    ck.require(std::isfinite(a.scale_h) && std::isfinite(a.scale_w) && a.scale_h > 0.0f &&
                   a.scale_w > 0.0f,
               "resize: scales must be finite and > 0");
    ck.require(a.full_in_h >= 1 && a.full_in_w >= 1 && a.full_out_h >= 1 && a.full_out_w >= 1 &&
                   a.full_in_h <= kMaxDim && a.full_in_w <= kMaxDim && a.full_out_h <= kMaxDim &&
                   a.full_out_w <= kMaxDim,
               "resize: full sizes must be in [1, 2^24]");
    ck.require(std::abs((int64_t)a.in_y0) <= kMaxDim && std::abs((int64_t)a.in_x0) <= kMaxDim &&
                   std::abs((int64_t)a.out_y0) <= kMaxDim && std::abs((int64_t)a.out_x0) <= kMaxDim,
               "resize: tile origins out of range");
    ck.quant("resize input", a.in_quant, a.input.dtype);
    ck.quant("resize output", a.out_quant, a.output.dtype);
    break;
  }
  case MCL_NATIVE_FN_PAD: {
    const auto a = load_block<mcl_pad_args>(args);
    ck.tile("input", a.input, Role::Broadcast);
    ck.tile("output", a.output, Role::Output);
    if (!ck.ok())
      break;
    ck.require(a.input.dtype == a.output.dtype, "pad: types differ");
    ck.require((uint64_t)a.pad_top + a.input.h <= a.output.h &&
                   (uint64_t)a.pad_left + a.input.w <= a.output.w &&
                   (uint64_t)a.pad_channel + a.input.c <= a.output.c,
               "pad: input does not fit inside the output");
    ck.quant("pad", a.quant, a.input.dtype);
    break;
  }
  default:
    break;
  }
  return ck.status();
}

} // namespace manycl::native

using namespace manycl::native;

namespace {

void write_message(const Status &s, char *msg, size_t cap) {
  if (!msg || cap == 0)
    return;
  std::snprintf(msg, cap, "%s", s.message.c_str());
}

} // namespace

extern "C" {

size_t mcl_native_args_size(uint32_t fn) {
  return fn < MCL_NATIVE_FN_COUNT_ ? kArgsSize[fn] : 0;
}

const char *mcl_native_fn_name(uint32_t fn) {
  return fn < MCL_NATIVE_FN_COUNT_ ? kNames[fn] : "invalid";
}

const char *mcl_native_dtype_name(uint32_t dtype) {
  switch (dtype) {
  case MCL_DTYPE_F32:
    return "f32";
  case MCL_DTYPE_F16:
    return "f16";
  case MCL_DTYPE_S8:
    return "s8";
  case MCL_DTYPE_U8:
    return "u8";
  case MCL_DTYPE_S32:
    return "s32";
  default:
    return "invalid";
  }
}

int mcl_native_validate(uint32_t fn, const void *args, size_t size, uint64_t spm_size, char *msg,
                        size_t cap) {
  Status s = validate(fn, args, size, spm_size);
  write_message(s, msg, cap);
  return s.code;
}

int mcl_native_cost_detail(uint32_t fn, const void *args, uint32_t pes,
                           mcl_native_cost_breakdown *out) {
  if (!out)
    return MCL_NATIVE_ERR_BAD_ARGS;
  *out = mcl_native_cost_breakdown{};
  if (!args || fn == 0 || fn >= MCL_NATIVE_FN_COUNT_)
    return MCL_NATIVE_ERR_UNKNOWN_FUNCTION;
  pes = pes == 0 ? 1 : pes;
  cost::Cost c;
  switch (fn) {
  case MCL_NATIVE_FN_CONV2D:
  case MCL_NATIVE_FN_CONV_TRANSPOSE2D:
    c = cost::conv_cost(fn, load_block<mcl_conv_args>(args), pes);
    break;
  case MCL_NATIVE_FN_GEMM:
    c = cost::conv_cost(MCL_NATIVE_FN_CONV2D, gemm_as_conv(load_block<mcl_gemm_args>(args)), pes);
    break;
  case MCL_NATIVE_FN_MATMUL:
    c = cost::matmul_cost(load_block<mcl_matmul_args>(args), pes);
    break;
  case MCL_NATIVE_FN_POOL2D:
    c = cost::pool_cost(load_block<mcl_pool_args>(args), pes);
    break;
  case MCL_NATIVE_FN_ELTWISE:
    c = cost::eltwise_cost(load_block<mcl_eltwise_args>(args), pes);
    break;
  case MCL_NATIVE_FN_SCALE_SHIFT:
    c = cost::scale_shift_cost(load_block<mcl_scale_shift_args>(args), pes);
    break;
  case MCL_NATIVE_FN_ACTIVATION:
  case MCL_NATIVE_FN_COPY:
  case MCL_NATIVE_FN_SOFTMAX:
    c = cost::unary_cost(fn, load_block<mcl_unary_args>(args), pes);
    break;
  case MCL_NATIVE_FN_RESIZE:
    c = cost::resize_cost(load_block<mcl_resize_args>(args), pes);
    break;
  case MCL_NATIVE_FN_PAD:
    c = cost::pad_cost(load_block<mcl_pad_args>(args), pes);
    break;
  case MCL_NATIVE_FN_MATH:
    c = cost::math_cost(load_block<mcl_math_args>(args), pes);
    break;
  case MCL_NATIVE_FN_REDUCE:
    c = cost::reduce_cost(load_block<mcl_reduce_args>(args), pes);
    break;
  case MCL_NATIVE_FN_CUSTOM:
    c = custom_cost(load_block<mcl_custom_args>(args));
    break;
  default:
    return MCL_NATIVE_ERR_UNKNOWN_FUNCTION;
  }
  *out = {c.total, c.matrix, c.load_store, c.vliw, c.overhead, c.macs, c.padded_macs, c.bound, 0};
  return MCL_NATIVE_OK;
}

uint64_t mcl_native_cost(uint32_t fn, const void *args, uint32_t pes) {
  mcl_native_cost_breakdown b;
  return mcl_native_cost_detail(fn, args, pes, &b) == MCL_NATIVE_OK ? b.total : 0;
}

int mcl_native_run(const mcl_native_exec *exec, uint32_t fn, const void *args, size_t size,
                   char *msg, size_t cap) {
  if (!exec || !exec->spm_base) {
    write_message(Status::Error(MCL_NATIVE_ERR_BAD_ARGS, "no execution context"), msg, cap);
    return MCL_NATIVE_ERR_BAD_ARGS;
  }
  // With an operand hook, the operand ranges are collected while validating and handed to
  // it once the whole block is valid (it may make SPM bytes current, or say where the
  // parameter block can be read instead).
  OperandRecorder operands;
  Status s = validate(fn, args, size, exec->spm_size, exec->operand ? &operands : nullptr);
  mcl_native_exec with_view;
  if (s.ok() && exec->operand) {
    with_view = *exec;
    with_view.params_view = nullptr;
    if (operands.overflow)
      exec->operand(exec->operand_user, 0, exec->spm_size, MCL_NATIVE_OPERAND_DATA);
    // What the call reads first, then what it only writes (an output may be an input too).
    for (const bool written : {false, true})
      for (uint32_t i = 0; i < operands.count; ++i) {
        const OperandRecorder::Range &r = operands.ranges[i];
        if ((r.kind == MCL_NATIVE_OPERAND_WRITTEN) != written)
          continue;
        const uint8_t *view = exec->operand(exec->operand_user, r.offset, r.bytes, r.kind);
        if (view && r.kind == MCL_NATIVE_OPERAND_PARAMS) {
          with_view.params_view = view;
          with_view.params_view_offset = r.offset;
          with_view.params_view_size = r.bytes;
        }
      }
    exec = &with_view;
  }
  // The modeled cost depends on the arguments only, so it is accounted before the host runs
  // the function: the cluster's clock moves to the function's end at once, and clusters
  // waiting for it at the DDR arbiter or a signal go on while the host computes (an error
  // fails the command, whose time then no longer matters).
  if (s.ok() && exec->account_cycles)
    exec->account_cycles(exec->user, mcl_native_cost(fn, args, exec->pe_count));
  const bool profiled = s.ok() && call_profile_enabled();
  const auto started =
      profiled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const uint64_t cpu_started = profiled ? call_profile_thread_cpu_ns() : 0;
  if (s.ok()) {
    switch (fn) {
    case MCL_NATIVE_FN_CONV2D:
    case MCL_NATIVE_FN_CONV_TRANSPOSE2D:
      s = run_conv(*exec, fn, load_block<mcl_conv_args>(args));
      break;
    case MCL_NATIVE_FN_GEMM:
      s = run_gemm(*exec, load_block<mcl_gemm_args>(args));
      break;
    case MCL_NATIVE_FN_MATMUL:
      s = run_matmul(*exec, load_block<mcl_matmul_args>(args));
      break;
    case MCL_NATIVE_FN_POOL2D:
      s = run_pool(*exec, load_block<mcl_pool_args>(args));
      break;
    case MCL_NATIVE_FN_ELTWISE:
      s = run_eltwise(*exec, load_block<mcl_eltwise_args>(args));
      break;
    case MCL_NATIVE_FN_SCALE_SHIFT:
      s = run_scale_shift(*exec, load_block<mcl_scale_shift_args>(args));
      break;
    case MCL_NATIVE_FN_ACTIVATION:
    case MCL_NATIVE_FN_SOFTMAX:
    case MCL_NATIVE_FN_COPY:
      s = run_unary(*exec, fn, load_block<mcl_unary_args>(args));
      break;
    case MCL_NATIVE_FN_RESIZE:
      s = run_resize(*exec, load_block<mcl_resize_args>(args));
      break;
    case MCL_NATIVE_FN_PAD:
      s = run_pad(*exec, load_block<mcl_pad_args>(args));
      break;
    case MCL_NATIVE_FN_MATH:
      s = run_math(*exec, load_block<mcl_math_args>(args));
      break;
    case MCL_NATIVE_FN_REDUCE:
      s = run_reduce(*exec, load_block<mcl_reduce_args>(args));
      break;
    case MCL_NATIVE_FN_CUSTOM:
      s = run_custom(*exec, load_block<mcl_custom_args>(args));
      break;
    default:
      break;
    }
  }
  if (profiled && s.ok()) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
    mcl_native_cost_breakdown cost{};
    mcl_native_cost_detail(fn, args, exec->pe_count, &cost);
    call_profile_record(fn, args, (uint64_t)ns, call_profile_thread_cpu_ns() - cpu_started,
                        cost.macs);
  }
  write_message(s, msg, cap);
  return s.code;
}

} // extern "C"
