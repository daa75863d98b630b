/* ManyCL native compute functions: THE registry header.
 *
 * Stable function ids and the argument-block layout of every native compute function.
 * Argument blocks are plain data (no host pointers): tensors are addressed by byte offsets
 * into the cluster's SPM plus shapes and element strides. The model compiler writes these
 * blocks into records; the program loader checks them with mcl_native_validate() before a
 * record is ever run (see native.h). Values of ids and enumerators never change; new ones
 * are appended.
 *
 * Layout: channel-last. A tile is a box [h][w][c] of a tensor (batch 1) in SPM. Element
 * (y, x, ch) lives at byte  offset + (y*row_stride + x*pixel_stride + ch*channel_stride)*esize.
 * A tile inside a larger buffer (halo, a channel slice of a concat output, ...) is described
 * by its offset and strides. All blocks are little-endian, naturally aligned, fixed size. */
#ifndef MANYCL_NATIVE_ARGS_H
#define MANYCL_NATIVE_ARGS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- function ids (stable) ---- */
enum mcl_native_fn_id {
  MCL_NATIVE_FN_INVALID = 0,
  MCL_NATIVE_FN_CONV2D = 1,           /* mcl_conv_args: conv, grouped, depthwise, 1x1 */
  MCL_NATIVE_FN_CONV_TRANSPOSE2D = 2, /* mcl_conv_args: transposed convolution */
  MCL_NATIVE_FN_GEMM = 3,             /* mcl_gemm_args: FC / Gemm / MatMul, constant B */
  MCL_NATIVE_FN_MATMUL = 4,           /* mcl_matmul_args: MatMul, both operands in SPM */
  MCL_NATIVE_FN_POOL2D = 5,           /* mcl_pool_args: max / average, incl. global */
  MCL_NATIVE_FN_ELTWISE = 6,          /* mcl_eltwise_args: add/sub/mul/... with broadcast */
  MCL_NATIVE_FN_SCALE_SHIFT = 7,      /* mcl_scale_shift_args: folded BatchNorm */
  MCL_NATIVE_FN_ACTIVATION = 8,       /* mcl_unary_args */
  MCL_NATIVE_FN_SOFTMAX = 9,          /* mcl_unary_args: over the channel axis */
  MCL_NATIVE_FN_RESIZE = 10,          /* mcl_resize_args: nearest / bilinear */
  MCL_NATIVE_FN_COPY = 11,            /* mcl_unary_args: slice / concat copy, type conversion */
  MCL_NATIVE_FN_PAD = 12,             /* mcl_pad_args: constant padding */
  MCL_NATIVE_FN_MATH = 13,            /* mcl_math_args: element-wise math (exp, sin, elu...) */
  MCL_NATIVE_FN_REDUCE = 14,          /* mcl_reduce_args: sum / mean / max / ... over h and w */
  MCL_NATIVE_FN_CUSTOM = 15,          /* mcl_custom_args (custom.h): a user function, by name */
  MCL_NATIVE_FN_COUNT_ = 16
};

/* ---- element types ---- */
enum mcl_dtype {
  MCL_DTYPE_INVALID = 0,
  MCL_DTYPE_F32 = 1,
  MCL_DTYPE_F16 = 2, /* IEEE binary16 storage; arithmetic in FP32 */
  MCL_DTYPE_S8 = 3,  /* quantized: real = scale * (q - zero_point) */
  MCL_DTYPE_U8 = 4,
  MCL_DTYPE_S32 = 5  /* only as conv/gemm bias inside packed parameters */
};

/* A box [h][w][c] of a channel-last tensor in SPM. Strides are in elements. Outputs and
 * convolution / GEMM inputs need channel_stride == 1; element-wise inputs may use 0 strides
 * to broadcast along any axis. */
typedef struct mcl_tile {
  uint32_t offset; /* bytes from the SPM base to element (0,0,0); aligned to the element size */
  uint32_t h, w, c;
  uint32_t row_stride;
  uint32_t pixel_stride;
  uint32_t channel_stride;
  uint32_t dtype; /* mcl_dtype */
} mcl_tile;

/* Quantization of an INT8 tensor (ignored for float tensors). */
typedef struct mcl_quant {
  float scale;
  int32_t zero_point;
} mcl_quant;

enum mcl_activation_kind {
  MCL_ACT_NONE = 0,
  MCL_ACT_RELU = 1,
  MCL_ACT_CLIP = 2,         /* min(max(x, alpha), beta): ReLU6 is alpha=0, beta=6 */
  MCL_ACT_LEAKY_RELU = 3,   /* x < 0 ? alpha*x : x */
  MCL_ACT_SIGMOID = 4,
  MCL_ACT_SILU = 5,         /* x * sigmoid(x) */
  MCL_ACT_HARD_SIGMOID = 6, /* max(0, min(1, alpha*x + beta)) (ONNX defaults 0.2, 0.5) */
  MCL_ACT_HARD_SWISH = 7,   /* x * max(0, min(1, x/6 + 1/2)) */
  MCL_ACT_TANH = 8,
  MCL_ACT_MISH = 9,         /* x * tanh(softplus(x)) */
  MCL_ACT_COUNT_ = 10
};

typedef struct mcl_activation {
  uint32_t kind; /* mcl_activation_kind */
  float alpha;
  float beta;
} mcl_activation;

/* ---- convolution (MCL_NATIVE_FN_CONV2D, MCL_NATIVE_FN_CONV_TRANSPOSE2D) ----
 * Output pixel (oy, ox) of the tile, kernel tap (ky, kx):
 *   conv:       input tile pixel (origin_y + oy*stride_h + ky*dilation_h,
 *                                 origin_x + ox*stride_w + kx*dilation_w)
 *   transposed: input pixel (iy, ix) with iy*stride_h = origin_y + oy - ky*dilation_h
 *               (same for x), where the division is exact.
 * Taps that fall outside the input tile read the padding value (0, or the input zero point
 * for INT8): that is how borders and "same" padding are expressed. The compiler chooses
 * origin = out_tile_y0*stride - pad_top - in_tile_y0 (conv) or
 * out_tile_y0 + pad_top - in_tile_y0*stride (transposed).
 * The compiled address table (mcl_native_plan_conv) holds, per output pixel and tap, the
 * element offset of that input pixel relative to input.offset, or of the pad row.
 * Precision: input F32 -> output F32; F16 -> F16 (FP32 accumulation); U8/S8 -> U8/S8 with
 * S8 weights, INT32 accumulation and requantization. Weights, bias and requantization
 * multipliers live in one packed parameter block made by mcl_native_pack_conv; INT8 weights
 * are stored as bytes, so the input dtype and input_zero_point given to the pack must be
 * those of the calls (the pack folds the zero point's contribution into the bias). */
enum mcl_conv_flags {
  MCL_CONV_NO_TABLE = 1u << 0, /* no address table: every tap must lie inside the input tile */
  /* The call derives the address table from the geometry (what mcl_native_plan_conv would
   * store): nothing is read at table_offset, taps outside the input read the pad row. */
  MCL_CONV_IMPLICIT_TABLE = 1u << 1,
  /* INT8: the parameter block also holds the weight zero points, and the kernels subtract
   * w_zero_point * sum(x) per pixel. Needed when some w - w_zero_point does not fit in int8
   * (uint8 weights of QLinearConv); without it mcl_native_pack_conv stores w - w_zero_point
   * as bytes and fails (MCL_NATIVE_ERR_BAD_ARGS) on a value outside [-128, 127]. */
  MCL_CONV_WEIGHT_ZERO_POINTS = 1u << 2,
  /* F32 / F16: out = act(conv + bias + residual) with `residual` a tile of the output's type
   * and shape (a residual Add fused into the epilogue; the sum is rounded once, in FP32).
   * Without the flag `residual` must be all zero. Not for INT8 (docs/native.md). */
  MCL_CONV_RESIDUAL = 1u << 3,
  /* F32 / F16 3x3 convolutions with stride 1, dilation 1 and one group, whose table is not
   * stored (MCL_CONV_NO_TABLE or MCL_CONV_IMPLICIT_TABLE): computed as Winograd F(4x4, 3x3),
   * 4x4 output blocks from the call's first output pixel, taps outside the input reading 0.
   * Same parameter block. Results differ from the direct convolution by rounding only
   * (docs/native.md, "Winograd"). */
  MCL_CONV_WINOGRAD = 1u << 4
};

typedef struct mcl_conv_args {
  mcl_tile input;          /* [in_h][in_w][groups*cin_per_group], with halo */
  mcl_tile output;         /* [out_h][out_w][groups*cout_per_group] */
  uint32_t params_offset;  /* packed parameters (mcl_native_conv_params_size bytes) */
  uint32_t table_offset;   /* int32 [out_h*out_w][kernel_h*kernel_w] address table */
  uint32_t pad_row_offset; /* scratch, input.c elements of input dtype; filled by the call */
  uint32_t groups;
  uint16_t kernel_h, kernel_w;
  uint16_t stride_h, stride_w;
  uint16_t dilation_h, dilation_w;
  uint16_t flags; /* mcl_conv_flags */
  uint16_t reserved0;
  int32_t origin_y, origin_x;
  mcl_activation act;        /* float outputs (INT8: use output_min/max for ReLU/Clip) */
  int32_t input_zero_point;  /* INT8 */
  int32_t output_zero_point; /* INT8 */
  int32_t output_min;        /* INT8 clamp after requantization (fused ReLU / Clip) */
  int32_t output_max;
  mcl_tile residual; /* MCL_CONV_RESIDUAL: [out_h][out_w][out_c], channel_stride 1 */
} mcl_conv_args;

/* ---- GEMM with constant B (MCL_NATIVE_FN_GEMM) ----
 * Rows of A are the pixels of `input` (h*w rows, K = input.c); rows of the result are the
 * pixels of `output` (N = output.c). B, bias and multipliers are packed by
 * mcl_native_pack_gemm. Same precisions as convolution. */
typedef struct mcl_gemm_args {
  mcl_tile input;
  mcl_tile output;
  uint32_t params_offset;
  uint32_t flags; /* 0 or MCL_CONV_WEIGHT_ZERO_POINTS (INT8, as for conv) */
  mcl_activation act;
  int32_t input_zero_point;
  int32_t output_zero_point;
  int32_t output_min;
  int32_t output_max;
} mcl_gemm_args;

/* ---- MatMul with both operands in SPM (MCL_NATIVE_FN_MATMUL), float types only ----
 * A: rows = a.h*a.w pixels, K = a.c. B: K x N as a tile with b.h == 1, b.w == K, b.c == N.
 * output: rows = output.h*output.w (== rows of A), N = output.c. */
typedef struct mcl_matmul_args {
  mcl_tile a;
  mcl_tile b;
  mcl_tile output;
  mcl_activation act;
} mcl_matmul_args;

/* ---- pooling (MCL_NATIVE_FN_POOL2D) ----
 * Window of output (oy, ox): input tile pixels (origin_y + oy*stride_h + ky*dilation_h, ...).
 * Taps outside the tile are padding (ignored by max; zero for average). Average divides by
 * the number of taps inside the count region [count_y0, count_y1) x [count_x0, count_x1)
 * (tile coordinates): the tile itself for count_include_pad=0, the padded image for 1.
 * Global pooling is kernel = input size. Types: F32, F16, U8, S8 (input and output the
 * same type; INT8 average requantizes from in_quant to out_quant). */
enum mcl_pool_kind { MCL_POOL_MAX = 0, MCL_POOL_AVG = 1 };

typedef struct mcl_pool_args {
  mcl_tile input;
  mcl_tile output;
  uint32_t kind;
  uint16_t kernel_h, kernel_w;
  uint16_t stride_h, stride_w;
  uint16_t dilation_h, dilation_w;
  int32_t origin_y, origin_x;
  int32_t count_y0, count_y1, count_x0, count_x1;
  mcl_quant in_quant, out_quant;
} mcl_pool_args;

/* ---- element-wise binary (MCL_NATIVE_FN_ELTWISE) ----
 * a, b and output have the same h, w, c; broadcasting is a 0 stride on a or b.
 * Float: out = act(a op b). INT8 (all three quantized): computed on dequantized values in
 * FP32, activation applied, then quantized (see docs/native.md for the exact formula). */
enum mcl_eltwise_op {
  MCL_ELTWISE_ADD = 0,
  MCL_ELTWISE_SUB = 1,
  MCL_ELTWISE_MUL = 2,
  MCL_ELTWISE_DIV = 3,
  MCL_ELTWISE_MAX = 4,
  MCL_ELTWISE_MIN = 5,
  MCL_ELTWISE_COUNT_ = 6
};

typedef struct mcl_eltwise_args {
  mcl_tile a, b, output;
  uint32_t op;
  mcl_activation act;
  mcl_quant a_quant, b_quant, out_quant;
} mcl_eltwise_args;

/* ---- per-channel multiply-add (MCL_NATIVE_FN_SCALE_SHIFT), folded BatchNorm ----
 * out[y][x][ch] = act(in[y][x][ch] * scale[ch] + shift[ch]); params at params_offset:
 * float scale[input.c] followed by float shift[input.c]. */
typedef struct mcl_scale_shift_args {
  mcl_tile input, output;
  uint32_t params_offset;
  uint32_t reserved0;
  mcl_activation act;
  mcl_quant in_quant, out_quant;
} mcl_scale_shift_args;

/* ---- unary functions (ACTIVATION, SOFTMAX, COPY) ----
 * input and output have the same h, w, c. ACTIVATION: out = act(in). SOFTMAX: over the
 * channel axis of every pixel. COPY: converts between any element types (F32, F16, U8, S8):
 * slices, concat parts, QuantizeLinear / DequantizeLinear, FP16 conversion. */
typedef struct mcl_unary_args {
  mcl_tile input, output;
  mcl_activation act;
  mcl_quant in_quant, out_quant;
} mcl_unary_args;

/* ---- resize (MCL_NATIVE_FN_RESIZE), ONNX Resize semantics on H and W ---- */
enum mcl_resize_mode { MCL_RESIZE_NEAREST = 0, MCL_RESIZE_BILINEAR = 1 };
enum mcl_resize_coord {
  MCL_COORD_HALF_PIXEL = 0,
  MCL_COORD_ASYMMETRIC = 1,
  MCL_COORD_ALIGN_CORNERS = 2,
  MCL_COORD_PYTORCH_HALF_PIXEL = 3
};
enum mcl_resize_nearest {
  MCL_NEAREST_ROUND_PREFER_FLOOR = 0,
  MCL_NEAREST_ROUND_PREFER_CEIL = 1,
  MCL_NEAREST_FLOOR = 2,
  MCL_NEAREST_CEIL = 3
};

typedef struct mcl_resize_args {
  mcl_tile input;  /* holds full-image rows/cols [in_y0, in_y0+input.h) x [in_x0, ...) */
  mcl_tile output; /* full-image rows/cols [out_y0, out_y0+output.h) x ... */
  uint32_t mode, coord_mode, nearest_mode, reserved0;
  float scale_h, scale_w; /* output size / input size, as in ONNX `scales` */
  uint32_t full_in_h, full_in_w, full_out_h, full_out_w;
  int32_t in_y0, in_x0, out_y0, out_x0;
  mcl_quant in_quant, out_quant; /* INT8 bilinear: computed in FP32, requantized */
} mcl_resize_args;

/* ---- constant pad (MCL_NATIVE_FN_PAD) ----
 * output = value everywhere, with input copied to [pad_top, pad_top+h) x [pad_left, ...)
 * x [pad_channel, ...). Same dtype in and out; `value` is the real value (INT8: quantized
 * with the input quantization). */
typedef struct mcl_pad_args {
  mcl_tile input, output;
  uint32_t pad_top, pad_left, pad_channel;
  float value;
  mcl_quant quant;
} mcl_pad_args;

/* ---- element-wise math (MCL_NATIVE_FN_MATH), F32 or F16 (input and output the same) ----
 * out = f(in) per element; input and output have the same h, w, c (the input may broadcast
 * with 0 strides). alpha / beta parameterize the functions that have them. */
enum mcl_math_op {
  MCL_MATH_ABS = 0,
  MCL_MATH_NEG = 1,
  MCL_MATH_EXP = 2,
  MCL_MATH_LOG = 3,
  MCL_MATH_SQRT = 4,
  MCL_MATH_RECIPROCAL = 5,
  MCL_MATH_FLOOR = 6,
  MCL_MATH_CEIL = 7,
  MCL_MATH_ROUND = 8, /* halves to even */
  MCL_MATH_SIGN = 9,
  MCL_MATH_SIN = 10,
  MCL_MATH_COS = 11,
  MCL_MATH_TAN = 12,
  MCL_MATH_ASIN = 13,
  MCL_MATH_ACOS = 14,
  MCL_MATH_ATAN = 15,
  MCL_MATH_SINH = 16,
  MCL_MATH_COSH = 17,
  MCL_MATH_ASINH = 18,
  MCL_MATH_ACOSH = 19,
  MCL_MATH_ATANH = 20,
  MCL_MATH_ERF = 21,
  MCL_MATH_SOFTPLUS = 22,         /* log(1 + e^x) */
  MCL_MATH_SOFTSIGN = 23,         /* x / (1 + |x|) */
  MCL_MATH_ELU = 24,              /* x < 0 ? alpha*(e^x - 1) : x */
  MCL_MATH_SELU = 25,             /* beta * (x > 0 ? x : alpha*(e^x - 1)) (beta = gamma) */
  MCL_MATH_CELU = 26,             /* max(0,x) + min(0, alpha*(e^(x/alpha) - 1)) */
  MCL_MATH_THRESHOLDED_RELU = 27, /* x > alpha ? x : 0 */
  MCL_MATH_SHRINK = 28,           /* x < -alpha ? x + beta : x > alpha ? x - beta : 0 */
  MCL_MATH_COUNT_ = 29
};

typedef struct mcl_math_args {
  mcl_tile input, output;
  uint32_t op; /* mcl_math_op */
  float alpha, beta;
  uint32_t reserved0;
} mcl_math_args;

/* ---- reduction (MCL_NATIVE_FN_REDUCE), F32 or F16 (input and output the same) ----
 * output[0][0][ch] = reduce over all (y, x) of input[y][x][ch]: output.h == output.w == 1,
 * output.c == input.c (strides of both free: any axes of a tensor reduce through them).
 * Accumulated in float; MEAN divides by h*w; L2 = sqrt(sum x^2); LOG_SUM = log(sum);
 * LOG_SUM_EXP = log(sum e^x) (shifted by the maximum). */
enum mcl_reduce_op {
  MCL_REDUCE_SUM = 0,
  MCL_REDUCE_MEAN = 1,
  MCL_REDUCE_MAX = 2,
  MCL_REDUCE_MIN = 3,
  MCL_REDUCE_PROD = 4,
  MCL_REDUCE_L1 = 5,
  MCL_REDUCE_L2 = 6,
  MCL_REDUCE_SUM_SQUARE = 7,
  MCL_REDUCE_LOG_SUM = 8,
  MCL_REDUCE_LOG_SUM_EXP = 9,
  MCL_REDUCE_COUNT_ = 10
};

typedef struct mcl_reduce_args {
  mcl_tile input, output;
  uint32_t op; /* mcl_reduce_op */
  uint32_t reserved0;
} mcl_reduce_args;

#ifdef __cplusplus
}
#endif
#endif
