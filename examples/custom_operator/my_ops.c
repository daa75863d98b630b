/* A user's custom-operator library: the native function computing the ONNX operator
 * com.example::ScaledSoftsign, and the table `kann compile --custom-ops` reads.
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

#ifndef MY_OPS_WITHOUT_TABLE /* the tests build a copy without it to check kann's error */
static const char *const kAttributes[] = {"alpha", "beta", NULL};
static const float kDefaults[] = {1.0f, 0.0f};

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
}};

__attribute__((visibility("default"))) const mcl_custom_op *mcl_custom_operators(uint32_t *count) {
  *count = sizeof kOperators / sizeof kOperators[0];
  return kOperators;
}
#endif
