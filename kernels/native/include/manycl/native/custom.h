/* ManyCL custom operators: ONNX nodes of a user's own domain computed by a user's native
 * function (docs/kann.md, "Custom operators").
 *
 * A user's shared library provides, for each custom operator,
 *   - the function that computes it, called once per output tile on a cluster:
 *       int my_function(const mcl_custom_call *call);   (0: success, anything else fails
 *       the command with the function's name in the error)
 *   - an entry of the table returned by the exported descriptor function
 *       const mcl_custom_op *mcl_custom_operators(uint32_t *count);
 *     which `kann compile --custom-ops LIB.so` reads: the ONNX domain and op_type it
 *     implements, the function's name, the float attributes it takes, its cost.
 * At run time the same library is registered with clAddNativeLibraryMCL (or
 * MANYCL_NATIVE_PATH) before the program is created; the runtime resolves every custom
 * function a kbin names when it loads the binary (CL_INVALID_BINARY, with the missing name
 * in the build log, when one is not exported by any registered library).
 *
 * Semantics the compiler assumes, per kind:
 *   MCL_CUSTOM_ELEMENTWISE: one activation input, one output of the input's shape and
 *     element type, and every output element depends only on the input element at the same
 *     position. The compiler then splits the operator over clusters and row bands like any
 *     element-wise operator, and may run it in place (call->output == call->input).
 *   MCL_CUSTOM_WHOLE: 1 to MCL_CUSTOM_INPUT_MAX inputs (call->inputs; at least one an
 *     activation, constant ones are passed from the operator's parameters in the same
 *     geometry), one output whose shape the descriptor's output_shape callback gives (the
 *     first input's when NULL), all of one element type; the function is called once, on
 *     one cluster, with the whole tensors (never in place). A 4-D [1,C,H,W] tensor is the
 *     tile (H, W, C) (channel-last); any other is stored row-major as (elements / last
 *     dimension, last dimension, 1). */
#ifndef MANYCL_NATIVE_CUSTOM_H
#define MANYCL_NATIVE_CUSTOM_H

#include <stdint.h>

#include "manycl/native/args.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MCL_CUSTOM_FUNCTION_MAX 48 /* bytes of a function name, NUL included */
#define MCL_CUSTOM_PARAM_MAX 8     /* float attributes passed to the function */
#define MCL_CUSTOM_INPUT_MAX 4     /* inputs of an MCL_CUSTOM_WHOLE operator */
#define MCL_CUSTOM_RANK_MAX 8      /* dimensions of a tensor shape (output_shape) */

/* ---- what the user's function receives ---- */
typedef struct mcl_custom_call {
  const void *input; /* element (0,0,0) of the input tile, in the cluster's SPM */
  void *output;      /* element (0,0,0) of the output tile (may equal input) */
  /* Geometry: h, w, c, strides in ELEMENTS (mcl_tile, args.h: element (y, x, ch) is at
   * (y*row_stride + x*pixel_stride + ch*channel_stride) elements from the pointer) and
   * dtype (mcl_dtype: F32 or F16 storage). The tiles' offset fields are meaningless here. */
  mcl_tile input_tile, output_tile;
  const float *params; /* the operator's float attributes, in the descriptor's order */
  uint32_t param_count;
  uint32_t pe_count; /* processing elements of the cluster (informational) */
  /* MCL_CUSTOM_WHOLE: every input (inputs[0] == input, input_tiles[0] == input_tile);
   * ELEMENTWISE: input_count 1, the same. */
  const void *inputs[MCL_CUSTOM_INPUT_MAX];
  mcl_tile input_tiles[MCL_CUSTOM_INPUT_MAX];
  uint32_t input_count;
} mcl_custom_call;

/* An ONNX tensor shape (output_shape callback). */
typedef struct mcl_custom_shape {
  uint32_t rank;
  int64_t dims[MCL_CUSTOM_RANK_MAX];
} mcl_custom_shape;

typedef int (*mcl_custom_fn)(const mcl_custom_call *call);

/* ---- what `kann compile --custom-ops` reads ---- */
enum mcl_custom_kind {
  MCL_CUSTOM_ELEMENTWISE = 0, /* output shape = input shape, element by element */
  MCL_CUSTOM_WHOLE = 1        /* whole tensors, several inputs, any output shape */
};

typedef struct mcl_custom_op {
  const char *domain;   /* ONNX node domain, e.g. "com.example" */
  const char *op_type;  /* ONNX node op_type, e.g. "MyScale" */
  const char *function; /* exported mcl_custom_fn symbol (< MCL_CUSTOM_FUNCTION_MAX bytes) */
  uint32_t kind;        /* mcl_custom_kind */
  uint32_t dtypes;      /* bit (1 << mcl_dtype) per element type the function accepts */
  /* Float attributes passed as params[i]: names (NULL-terminated list, or NULL for none)
   * and the value when the node does not set one. INT attributes are converted to float. */
  const char *const *attributes;
  const float *attribute_defaults;
  /* Modeled cost of one call: cost(call) cycles when cost is not NULL (call->input and
   * call->output are NULL then: only the geometry and params are meaningful), otherwise
   * cycles_per_element * output elements / pe_count. */
  double cycles_per_element;
  uint64_t (*cost)(const mcl_custom_call *call);
  /* MCL_CUSTOM_WHOLE: the output's ONNX shape from the inputs' and the params (returns 0,
   * anything else is a compile error naming the node); NULL: the first input's shape. */
  int (*output_shape)(const mcl_custom_shape *inputs, uint32_t input_count, const float *params,
                      uint32_t param_count, mcl_custom_shape *output);
} mcl_custom_op;

typedef const mcl_custom_op *(*mcl_custom_operators_fn)(uint32_t *count);
#define MCL_CUSTOM_OPERATORS_SYMBOL "mcl_custom_operators"

/* ---- the record (MCL_NATIVE_FN_CUSTOM) kann writes: SPM offsets, no pointers ---- */
typedef struct mcl_custom_args {
  mcl_tile input, output;
  char function[MCL_CUSTOM_FUNCTION_MAX]; /* NUL-terminated C identifier */
  float params[MCL_CUSTOM_PARAM_MAX];
  uint32_t param_count;
  uint32_t kind;   /* mcl_custom_kind */
  uint64_t cycles; /* modeled cycles of this call, computed by the compiler */
  /* MCL_CUSTOM_WHOLE: inputs 1.. (input is the first); input_count 1 for ELEMENTWISE */
  mcl_tile more_inputs[MCL_CUSTOM_INPUT_MAX - 1];
  uint32_t input_count;
  uint32_t reserved;
} mcl_custom_args;

#ifdef __cplusplus
}
#endif
#endif
