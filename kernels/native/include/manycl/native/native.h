/* ManyCL native compute functions: C API for the program loader, the record-stream
 * interpreter and the model compiler.
 *
 *  - loader:    mcl_native_validate()            on untrusted argument blocks
 *  - device:    mcl_native_run()                 runs a validated block on an exec context
 *  - compiler:  mcl_native_conv_table_size(), mcl_native_plan_conv()   address tables
 *               mcl_native_conv_params_size(), mcl_native_pack_conv(),
 *               mcl_native_gemm_params_size(), mcl_native_pack_gemm() packed parameters
 *               mcl_native_cost()                modeled cycles
 * No function throws; errors are a negative mcl_native_status with a message. */
#ifndef MANYCL_NATIVE_NATIVE_H
#define MANYCL_NATIVE_NATIVE_H

#include "manycl/native/args.h"
#include "manycl/native/exec.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mcl_native_status {
  MCL_NATIVE_OK = 0,
  MCL_NATIVE_ERR_UNKNOWN_FUNCTION = -1,
  MCL_NATIVE_ERR_BAD_SIZE = -2,     /* argument block size differs from the layout */
  MCL_NATIVE_ERR_BAD_ARGS = -3,     /* inconsistent shapes, enums, types */
  MCL_NATIVE_ERR_OUT_OF_RANGE = -4, /* an operand lies (partly) outside the SPM */
  MCL_NATIVE_ERR_BAD_TABLE = -5     /* checked mode: an address-table entry is out of range */
};

/* Size in bytes of the argument block of `fn_id`, 0 for an unknown id. */
size_t mcl_native_args_size(uint32_t fn_id);
/* Name of a function id ("conv2d", ...), "invalid" for unknown ids. */
const char *mcl_native_fn_name(uint32_t fn_id);
/* "f32", "f16", "s8", "u8", "s32" (mcl_dtype), or "invalid". */
const char *mcl_native_dtype_name(uint32_t dtype);

/* Checks an argument block against an SPM of spm_size bytes: block size, enums, shapes,
 * every operand range (including the conv table and packed parameters). Never reads outside
 * args[0, args_size). On failure writes a NUL-terminated message to msg (if msg_cap > 0). */
int mcl_native_validate(uint32_t fn_id, const void *args, size_t args_size, uint64_t spm_size,
                        char *msg, size_t msg_cap);

/* Validates, then runs. Reports modeled cycles through exec->account_cycles. */
int mcl_native_run(const mcl_native_exec *exec, uint32_t fn_id, const void *args,
                   size_t args_size, char *msg, size_t msg_cap);

/* Modeled cycles of one call on a cluster with pe_count PEs (see docs/native.md). The block
 * must be valid. */
uint64_t mcl_native_cost(uint32_t fn_id, const void *args, uint32_t pe_count);

/* What limits a call: the lane with the most cycles on the slowest PE. */
enum mcl_native_bound {
  MCL_NATIVE_BOUND_NONE = 0,
  MCL_NATIVE_BOUND_MATRIX = 1,     /* tensor coprocessor (FPU for FP32) issue */
  MCL_NATIVE_BOUND_LOAD_STORE = 2, /* the 32 B/cycle SMEM load/store path */
  MCL_NATIVE_BOUND_VLIW = 3,       /* vector work on the VLIW lanes */
  MCL_NATIVE_BOUND_OVERHEAD = 4    /* call, work-unit and tap overheads */
};

/* The modeled cycles of one call and their split (per lane, slowest PE). */
typedef struct mcl_native_cost_breakdown {
  uint64_t total;       /* = mcl_native_cost() */
  uint64_t matrix;      /* matrix-engine issue cycles */
  uint64_t load_store;  /* load/store cycles */
  uint64_t vliw;        /* vector cycles (loop body and epilogue) */
  uint64_t overhead;    /* call + unit + tap overheads */
  uint64_t macs;        /* multiply-accumulates the operation needs */
  uint64_t padded_macs; /* multiply-accumulates executed, partial blocks included */
  uint32_t bound;       /* mcl_native_bound */
  uint32_t reserved0;
} mcl_native_cost_breakdown;

/* Fills *out for one call (a valid block); returns 0, or MCL_NATIVE_ERR_UNKNOWN_FUNCTION. */
int mcl_native_cost_detail(uint32_t fn_id, const void *args, uint32_t pe_count,
                           mcl_native_cost_breakdown *out);

/* ---- compile-time helpers for convolution / GEMM ---- */

/* Number of int32 entries of the address table of a conv (out_h*out_w*kernel_h*kernel_w). */
size_t mcl_native_conv_table_size(const mcl_conv_args *args);
/* Fills table[] (table_entries entries) for CONV2D or CONV_TRANSPOSE2D. Uses input.offset
 * and pad_row_offset of `args`: entries are element offsets relative to input.offset. */
int mcl_native_plan_conv(uint32_t fn_id, const mcl_conv_args *args, int32_t *table,
                         size_t table_entries);

/* INT8 quantization of the constant operand, host-side, compile time only. */
typedef struct mcl_weight_quant {
  float input_scale;
  float output_scale;
  const float *weight_scales;        /* weight_scale_count entries */
  const int32_t *weight_zero_points; /* weight_scale_count entries, or NULL for 0 */
  uint32_t weight_scale_count;       /* 1 (per tensor) or output channels (per channel) */
} mcl_weight_quant;

/* Bytes of the packed parameter block of a conv. */
size_t mcl_native_conv_params_size(uint32_t fn_id, const mcl_conv_args *args);
/* Packs ONNX weights into `out`:
 *   CONV2D: weights [cout][cin/groups][kh][kw]; CONV_TRANSPOSE2D: [cin][cout/groups][kh][kw]
 *   element type: float for F32 inputs, uint16_t binary16 for F16 inputs, int8_t for INT8.
 *   bias: cout values (float for float convs, int32 for INT8) or NULL.
 *   quant: INT8 only. */
int mcl_native_pack_conv(uint32_t fn_id, const mcl_conv_args *args, const void *weights,
                         const void *bias, const mcl_weight_quant *quant, void *out,
                         size_t out_size);

size_t mcl_native_gemm_params_size(const mcl_gemm_args *args);
/* B is K x N (trans_b = 0) or N x K (trans_b = 1), element types as for conv. */
int mcl_native_pack_gemm(const mcl_gemm_args *args, const void *b, int trans_b,
                         const void *bias, const mcl_weight_quant *quant, void *out,
                         size_t out_size);

/* Which vector ISA the host kernels use: "avx512", "avx2" or "generic". The environment
 * variable MANYCL_NATIVE_ISA (same names) can lower it, for tests. */
const char *mcl_native_isa(void);
/* Selects the kernels by name ("avx512", "avx2", "generic"); returns MCL_NATIVE_OK, or
 * MCL_NATIVE_ERR_BAD_ARGS when this host cannot run them. Not thread-safe with running calls. */
int mcl_native_set_isa(const char *name);

/* ---- the cache of Winograd-transformed weights (docs/native.md, "Winograd") ---- */

/* A stable generation (mcl_native_exec::stable_generation) no caller has had before: unique in
 * the process, never 0. Thread-safe. */
uint64_t mcl_native_new_generation(void);
/* Drops the cached values derived from bytes of a retired mcl_native_exec::stable_generation
 * (their memory is freed once no running call uses them). Thread-safe. */
void mcl_native_forget_generation(uint64_t generation);

typedef struct mcl_native_cache_stats {
  uint64_t hits, misses;   /* lookups since the process started (or the last configure) */
  uint64_t evictions;      /* entries dropped to make room (not by forget_generation) */
  uint64_t refused;        /* misses computed without the cache: no room for them */
  uint64_t entries, bytes; /* held now */
  uint64_t capacity;       /* bytes at most */
} mcl_native_cache_stats;
void mcl_native_winograd_cache_stats(mcl_native_cache_stats *out);
/* Empties the cache, zeroes its counters and sets its bound (MANYCL_WINOGRAD_CACHE_MB at
 * first use otherwise) and how long a used entry is protected from eviction (below that age,
 * a newcomer that does not fit runs uncached instead). For tests and benchmarks. */
void mcl_native_winograd_cache_configure(uint64_t capacity_bytes, double protect_seconds);

/* Bytes per element of a dtype, 0 if invalid. */
uint32_t mcl_native_dtype_size(uint32_t dtype);

#ifdef __cplusplus
}
#endif
#endif
