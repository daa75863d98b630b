/* ManyCL record-stream interpreter: runs one cluster's part of a kann program (kbin).
 *
 * Called on each cluster of a command with that cluster's current context installed
 * (manycl::device::ScopedClusterContext): it walks the cluster's records and performs them
 * through device_api.h (RDMA transfers, waits, barriers, signals) and the native compute
 * library (compute records). The stream must come from a binary that kann::format::read_kbin
 * accepted for this device; the interpreter still bounds-checks record lengths and every
 * DDR access goes through a checked DDR window, so a bad stream fails, it does not crash. */
#ifndef MANYCL_INTERPRETER_H
#define MANYCL_INTERPRETER_H

#include <stddef.h>
#include <stdint.h>

#include "manycl/device_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mcl_kbin_cluster_run {
  const uint8_t *records; /* this cluster's serialized records (kbin STREAMS bytes) */
  uint64_t records_size;
  mcl_ddr_window params;      /* the uploaded parameter blob (DDR offset + size) */
  mcl_ddr_window scratch;     /* scratch DDR of scratch_size bytes ({0,0} when none) */
  const mcl_ddr_window *args; /* DDR window of each kernel argument buffer */
  uint32_t arg_count;
  uint32_t flags; /* mcl_kbin_run_flags */
  /* While MANYCL_TRACE is on, each operator step becomes a span on the cluster's compute
   * track named step_names[step] (kann::format::step_names), or "step N" beyond
   * step_name_count / when NULL. */
  const char *const *step_names;
  uint32_t step_name_count;
  /* Custom-operator records (MCL_NATIVE_FN_CUSTOM) call resolve(resolve_user, name) for
   * their user function; NULL: such records fail with the function's name. */
  void *(*resolve)(void *resolve_user, const char *name);
  void *resolve_user;
  /* The parameter blob's host bytes and a generation naming them (0: none): the bytes never
   * change while the generation is in use, and no other bytes ever get it. Native functions
   * then cache values derived from the parameters (mcl_native_exec::stable_generation). */
  const uint8_t *params_host;
  uint64_t params_generation;
} mcl_kbin_cluster_run;

enum mcl_kbin_run_flags {
  MCL_KBIN_RUN_CHECKED = 1u << 0 /* native functions in checked mode (also MANYCL_CHECK=1) */
};

/* Runs the records; returns 0 or a negative mcl_status and writes a message to msg. On an
 * error it also marks the command failed (mcl_fail) so the other clusters stop waiting. */
int mcl_kbin_run_cluster(const mcl_kbin_cluster_run *run, char *msg, size_t msg_cap);

#ifdef __cplusplus
}
#endif
#endif
