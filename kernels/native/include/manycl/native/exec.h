/* ManyCL native compute functions: execution context.
 *
 * The device's native-code API (PE parallelism, cycle accounting, SPM base) binds to this
 * C-compatible struct. A host implementation for tests and benchmarks lives in
 * manycl_native_host_exec_* below. */
#ifndef MANYCL_NATIVE_EXEC_H
#define MANYCL_NATIVE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Body of one parallel task. `pe` is the processing element running it (0 <= pe < pe_count)
 * so a body may use PE-private scratch. */
typedef void (*mcl_native_task_fn)(void *task_arg, uint32_t task_index, uint32_t pe);

/* Runs body(task_arg, i, pe) for every i in [0, task_count) and returns when all are done.
 * Tasks are independent; any order and any distribution over PEs is allowed. */
typedef void (*mcl_native_parallel_for_fn)(void *exec_user, uint32_t task_count,
                                           mcl_native_task_fn body, void *task_arg);

/* Adds modeled cycles (cluster-wide critical path of one native function call). */
typedef void (*mcl_native_account_fn)(void *exec_user, uint64_t cycles);

/* Address of a user function a custom-operator record names (MCL_NATIVE_FN_CUSTOM), or NULL
 * when none of the registered native libraries exports it. */
typedef void *(*mcl_native_resolve_fn)(void *resolve_user, const char *name);

/* Kinds of SPM operand ranges (mcl_native_exec::operand). */
enum mcl_native_operand_kind {
  MCL_NATIVE_OPERAND_DATA = 0,    /* a tile, table or pad row: read and/or written */
  MCL_NATIVE_OPERAND_PARAMS = 1,  /* the packed parameter block: only read */
  MCL_NATIVE_OPERAND_WRITTEN = 2  /* an output that writes every byte of its range (reported
                                     after the operands the call reads) */
};
typedef const uint8_t *(*mcl_native_operand_fn)(void *operand_user, uint64_t offset,
                                                 uint64_t bytes, uint32_t kind);

enum mcl_native_exec_flags {
  /* Checked mode: compute functions also verify data-dependent addresses (conv address
   * tables) against the SPM before using them, and fail instead of computing. */
  MCL_NATIVE_EXEC_CHECKED = 1u << 0
};

typedef struct mcl_native_exec {
  uint8_t *spm_base;                       /* the cluster's scratchpad */
  uint64_t spm_size;                       /* bytes */
  uint32_t pe_count;                       /* PEs available to parallel_for (>= 1) */
  uint32_t flags;                          /* mcl_native_exec_flags */
  mcl_native_parallel_for_fn parallel_for; /* NULL: run serially on the caller */
  mcl_native_account_fn account_cycles;    /* NULL: cycles are not reported */
  void *user;                              /* passed back to both callbacks */
  mcl_native_resolve_fn resolve;           /* NULL: custom-operator records fail */
  void *resolve_user;                      /* passed back to resolve */
  /* Optional (NULL: none): called by mcl_native_run for every SPM range the call reads or
   * writes, once its arguments are validated and before the function runs. For the
   * parameter block (kind MCL_NATIVE_OPERAND_PARAMS) it may return where to read those
   * bytes from instead of the SPM (e.g. the source of a deferred copy); otherwise NULL. */
  mcl_native_operand_fn operand;
  void *operand_user;
  /* Set by mcl_native_run from `operand`: the bytes of SPM range
   * [params_view_offset, +params_view_size) are read at params_view. */
  const uint8_t *params_view;
  uint64_t params_view_offset, params_view_size;
  /* Optional (generation 0: none): host bytes [stable_base, stable_base + stable_size) whose
   * values are the same at every call that passes the same nonzero stable_generation (a
   * generation is never reused for other bytes, e.g. one per upload of a program's
   * parameters). Functions may keep values derived from parameters read there (Winograd's
   * transformed weights) and reuse them while the generation lasts; retire it with
   * mcl_native_forget_generation (native.h) when the bytes are freed. */
  const uint8_t *stable_base;
  uint64_t stable_size;
  uint64_t stable_generation;
} mcl_native_exec;

/* Host implementation: a pool of `threads` std::threads (0 or 1: serial). Cycles reported
 * through account_cycles are summed into the pool and readable below. */
typedef struct mcl_native_host_pool mcl_native_host_pool;
mcl_native_host_pool *mcl_native_host_pool_create(uint32_t threads);
void mcl_native_host_pool_destroy(mcl_native_host_pool *pool);
/* Fills `exec` to run on `pool` with the given SPM; pe_count = max(threads, 1). */
void mcl_native_host_exec_init(mcl_native_exec *exec, mcl_native_host_pool *pool,
                               uint8_t *spm_base, uint64_t spm_size);
uint64_t mcl_native_host_pool_cycles(const mcl_native_host_pool *pool);
void mcl_native_host_pool_reset_cycles(mcl_native_host_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
