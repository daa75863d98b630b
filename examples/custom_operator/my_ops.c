/* A user's custom-operator library: the native functions computing the ONNX operators
 * com.example::ScaledSoftsign (element-wise) and com.example::ConcatScaled (two inputs,
 * another output shape), and the table `kann compile --custom-ops` reads.
 *
 *   y = alpha * x / (1 + |x|) + beta      (alpha, beta: float attributes of the node)
 *
 * The same library is registered at run time with clAddNativeLibraryMCL, which resolves
 * scaled_softsign when the program binary is loaded. */
#include <math.h>
#include <stddef.h>

#include "manycl/native/custom.h"

static float scaled_softsign_of(float v, float alpha, float beta) {
  return alpha * v / (1.0f + fabsf(v)) + beta;
}

/* Called once per output tile on a cluster: input and output are [h][w][c] tiles of the
 * cluster's SPM with element strides (they may be the same memory: the compiler may run
 * an element-wise operator in place). F32, or F16 storage (computed in float). Returns 0,
 * or non-zero to fail the command. */
__attribute__((visibility("default"))) int scaled_softsign(const mcl_custom_call *call) {
  const uint32_t dtype = call->input_tile.dtype;
  if ((dtype != MCL_DTYPE_F32 && dtype != MCL_DTYPE_F16) || call->param_count != 2)
    return 1;
  const float alpha = call->params[0], beta = call->params[1];
  const mcl_tile *in = &call->input_tile, *out = &call->output_tile;
  for (uint32_t row = 0; row < out->h; ++row)
    for (uint32_t col = 0; col < out->w; ++col)
      for (uint32_t ch = 0; ch < out->c; ++ch) {
        const size_t i = (size_t)row * in->row_stride + (size_t)col * in->pixel_stride +
                         (size_t)ch * in->channel_stride;
        const size_t o = (size_t)row * out->row_stride + (size_t)col * out->pixel_stride +
                         (size_t)ch * out->channel_stride;
        if (dtype == MCL_DTYPE_F32)
          ((float *)call->output)[o] =
              scaled_softsign_of(((const float *)call->input)[i], alpha, beta);
        else
          ((_Float16 *)call->output)[o] = (_Float16)scaled_softsign_of(
              (float)((const _Float16 *)call->input)[i], alpha, beta);
      }
  return 0;
}

/* com.example::ConcatScaled (MCL_CUSTOM_WHOLE: two inputs, another output shape): the
 * channels of image a [1,Ca,H,W], then those of image b [1,Cb,H,W] times alpha, into
 * [1,Ca+Cb,H,W]. Called once with the whole tensors (tiles (H, W, C), channel-last). */
static float load(const void *base, uint32_t dtype, size_t i) {
  return dtype == MCL_DTYPE_F32 ? ((const float *)base)[i] : (float)((const _Float16 *)base)[i];
}
static void store(void *base, uint32_t dtype, size_t i, float v) {
  if (dtype == MCL_DTYPE_F32)
    ((float *)base)[i] = v;
  else
    ((_Float16 *)base)[i] = (_Float16)v;
}

__attribute__((visibility("default"))) int concat_scaled(const mcl_custom_call *call) {
  if (call->input_count != 2 || call->param_count != 1)
    return 1;
  const mcl_tile *a = &call->input_tiles[0], *b = &call->input_tiles[1], *o = &call->output_tile;
  if (a->h != o->h || b->h != o->h || a->w != o->w || b->w != o->w || a->c + b->c != o->c)
    return 2;
  const float alpha = call->params[0];
  for (uint32_t row = 0; row < o->h; ++row)
    for (uint32_t col = 0; col < o->w; ++col) {
      const size_t at = (size_t)row * o->row_stride + (size_t)col * o->pixel_stride;
      for (uint32_t ch = 0; ch < o->c; ++ch) {
        const mcl_tile *t = ch < a->c ? a : b;
        const uint32_t k = ch < a->c ? ch : ch - a->c;
        const size_t i = (size_t)row * t->row_stride + (size_t)col * t->pixel_stride +
                         (size_t)k * t->channel_stride;
        const float v = load(call->inputs[ch < a->c ? 0 : 1], t->dtype, i);
        store(call->output, o->dtype, at + (size_t)ch * o->channel_stride,
              ch < a->c ? v : alpha * v);
      }
    }
  return 0;
}

/* Its output shape for `kann compile`: [N, Ca + Cb, H, W]; 1 (an error) unless both inputs
 * are images of one size. */
static int concat_scaled_shape(const mcl_custom_shape *inputs, uint32_t input_count,
                               const float *params, uint32_t param_count,
                               mcl_custom_shape *output) {
  (void)params;
  (void)param_count;
  if (input_count != 2 || inputs[0].rank != 4 || inputs[1].rank != 4 ||
      inputs[0].dims[0] != inputs[1].dims[0] || inputs[0].dims[2] != inputs[1].dims[2] ||
      inputs[0].dims[3] != inputs[1].dims[3])
    return 1;
  *output = inputs[0];
  output->dims[1] += inputs[1].dims[1];
  return 0;
}

#ifndef MY_OPS_WITHOUT_TABLE /* the tests build a copy without it to check kann's error */
static const char *const kAttributes[] = {"alpha", "beta", NULL};
static const float kDefaults[] = {1.0f, 0.0f};
static const char *const kConcatAttributes[] = {"alpha", NULL};
static const float kConcatDefaults[] = {1.0f};

static const mcl_custom_op kOperators[] = {{
    .domain = "com.example",
    .op_type = "ScaledSoftsign",
    .function = "scaled_softsign",
    .kind = MCL_CUSTOM_ELEMENTWISE,
    .dtypes = 1u << MCL_DTYPE_F32 | 1u << MCL_DTYPE_F16,
    .attributes = kAttributes,
    .attribute_defaults = kDefaults,
    /* a divide, an abs, a multiply-add per element on one PE lane */
    .cycles_per_element = 4.0,
    .cost = NULL,
}, {
    .domain = "com.example",
    .op_type = "ConcatScaled",
    .function = "concat_scaled",
    .kind = MCL_CUSTOM_WHOLE,
    .dtypes = 1u << MCL_DTYPE_F32 | 1u << MCL_DTYPE_F16,
    .attributes = kConcatAttributes,
    .attribute_defaults = kConcatDefaults,
    .cycles_per_element = 2.0, /* a load, a multiply, a store per element */
    .cost = NULL,
    .output_shape = concat_scaled_shape,
}};

__attribute__((visibility("default"))) const mcl_custom_op *mcl_custom_operators(uint32_t *count) {
  *count = sizeof kOperators / sizeof kOperators[0];
  return kOperators;
}
#endif
