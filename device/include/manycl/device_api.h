/* ManyCL device API for native code running on a simulated cluster (version 1).
 *
 * Native compute functions and the OpenCL C builtins (async_work_group_copy, ...) include
 * this header. Every call acts on the *current cluster context* of the calling thread: the
 * cluster, and the command it runs, that the runtime installed (C++:
 * manycl::device::ScopedClusterContext) before calling into native code. The PE threads of
 * mcl_parallel_for inherit it. Outside a context, queries return 0, transfers and waits fail
 * with MCL_ERR_NO_CONTEXT, mcl_parallel_for runs serially and cycle accounting is ignored.
 *
 * Errors: functions returning int return MCL_OK (0) or a negative mcl_status; functions
 * returning a handle return 0 on error. mcl_last_error() then describes the failure. A
 * range error also marks the command failed (the runtime reports it on the command).
 * Nothing here throws, and no out-of-range transfer ever touches memory.
 *
 * Addresses: SPM addresses are byte offsets in a cluster's scratchpad (mcl_spm_base() turns
 * them into pointers for the calling cluster). DDR addresses are byte offsets inside an
 * mcl_ddr_window (a kernel buffer: its base offset in the device DDR and its size); a NULL
 * window means the whole DDR with absolute offsets. Either way a DDR range must lie inside
 * one allocated DDR block.
 *
 * Ordering (see docs/device-model.md): transfers issued by one cluster are performed and
 * complete in issue order; waiting for a handle waits for all earlier transfers of that
 * cluster. Data written by a transfer is visible to the issuing cluster after
 * mcl_dma_wait() returns, and to a destination cluster after it observed the transfer's
 * notify signal, or after a barrier that follows the issuer's mcl_dma_wait(). */
#ifndef MANYCL_DEVICE_API_H
#define MANYCL_DEVICE_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCL_DEVICE_API_VERSION 1
/* Signal counters per cluster and command: ids 0 .. MCL_SIGNALS_PER_CLUSTER-1. Ids from
   MCL_FIRST_PRIVATE_SIGNAL up count only the cluster's own DMA transfers into its own SPM
   (notify_signal of a load or SPM copy it issues); posting one to another cluster, or
   notifying it from a transfer to another SPM, is an error. A wait on one costs no
   synchronization with the other clusters. */
#define MCL_SIGNALS_PER_CLUSTER 64
#define MCL_FIRST_PRIVATE_SIGNAL 48
#define MCL_NO_SIGNAL (-1)

typedef enum mcl_status {
  MCL_OK = 0,
  MCL_ERR_NO_CONTEXT = -1, /* called outside a command's cluster context */
  MCL_ERR_RANGE = -2,      /* an address range outside the SPM / DDR window / allocation */
  MCL_ERR_ARGUMENT = -3,   /* a bad handle, cluster, signal or shape */
  MCL_ERR_SYNC = -4,       /* a barrier or signal wait failed (timeout, command failed) */
  MCL_ERR_FAILED = -5      /* the command already failed elsewhere */
} mcl_status;

/* Version of the API the library implements (MCL_DEVICE_API_VERSION it was built with). */
uint32_t mcl_api_version(void);

/* ---- where am I ---- */
int mcl_has_context(void);            /* 1 inside a cluster context */
uint32_t mcl_cluster_id(void);        /* index in the command's cluster group */
uint32_t mcl_cluster_count(void);     /* clusters running the command */
uint32_t mcl_device_cluster_id(void); /* index of the cluster in the device */
uint32_t mcl_pe_count(void);          /* PEs of the cluster */
uint32_t mcl_pe_id(void);             /* inside mcl_parallel_for: this PE; else 0 */
void *mcl_spm_base(void);             /* the calling cluster's scratchpad */
uint64_t mcl_spm_size(void);

/* ---- RDMA engine ---- */
typedef uint64_t mcl_dma_handle; /* 1, 2, ... per cluster and command; 0 = error */

typedef struct mcl_ddr_window {
  uint64_t base; /* offset of the window in the device DDR */
  uint64_t size; /* bytes */
} mcl_ddr_window;

/* planes × rows × row_bytes; strides in bytes, independent on each side. */
typedef struct mcl_dma_shape {
  uint64_t row_bytes;
  uint64_t rows;
  uint64_t planes;
  uint64_t src_row_stride;
  uint64_t src_plane_stride;
  uint64_t dst_row_stride;
  uint64_t dst_plane_stride;
} mcl_dma_shape;

typedef enum mcl_dma_space { MCL_DMA_DDR = 0, MCL_DMA_SPM = 1 } mcl_dma_space;

typedef struct mcl_dma_endpoint {
  uint32_t space;               /* mcl_dma_space */
  uint32_t cluster;             /* SPM: group index of the cluster */
  uint64_t offset;              /* DDR: offset in window; SPM: offset in the SPM */
  const mcl_ddr_window *window; /* DDR: NULL = whole DDR */
} mcl_dma_endpoint;

typedef struct mcl_dma_desc {
  mcl_dma_endpoint src;
  mcl_dma_endpoint dst;
  mcl_dma_shape shape;
  const uint32_t *multicast; /* src -> SPM of each listed cluster (group indices), or NULL */
  uint32_t multicast_count;
  int32_t notify_signal; /* MCL_NO_SIGNAL, or a signal of each destination cluster */
  const char *label;     /* shown in traces, may be NULL */
} mcl_dma_desc;

static inline mcl_dma_shape mcl_shape_1d(uint64_t bytes) {
  mcl_dma_shape s = {bytes, 1, 1, bytes, bytes, bytes, bytes};
  return s;
}
static inline mcl_dma_shape mcl_shape_2d(uint64_t row_bytes, uint64_t rows, uint64_t src_stride,
                                         uint64_t dst_stride) {
  mcl_dma_shape s = {row_bytes,        rows, 1, src_stride, src_stride * rows, dst_stride,
                     dst_stride * rows};
  return s;
}
static inline mcl_dma_shape mcl_shape_3d(uint64_t row_bytes, uint64_t rows, uint64_t planes,
                                         uint64_t src_row_stride, uint64_t src_plane_stride,
                                         uint64_t dst_row_stride, uint64_t dst_plane_stride) {
  mcl_dma_shape s = {row_bytes,        rows,           planes,          src_row_stride,
                     src_plane_stride, dst_row_stride, dst_plane_stride};
  return s;
}

/* The general form: any supported direction (DDR->SPM, SPM->DDR, SPM->SPM, multicast). */
mcl_dma_handle mcl_dma_start(const mcl_dma_desc *desc);
/* mcl_dma_start for a DDR source that stays unchanged until the command ends (a program's
   parameters): a contiguous DDR -> SPM transfer may be left as a deferred copy, the
   destination reading as the source until mcl_spm_materialize (docs/device-model.md,
   "Deferred copies"). The same modeled time. */
mcl_dma_handle mcl_dma_start_immutable(const mcl_dma_desc *desc);
/* Host bytes to read [offset, offset + bytes) of the calling cluster's SPM from: the source
   of the deferred copy holding the whole range, else NULL (the SPM holds the bytes then;
   deferred bytes the range overlaps have been copied into it). */
const void *mcl_spm_view(uint64_t offset, uint64_t bytes);
/* Copies the deferred bytes overlapping [offset, offset + bytes) into the calling cluster's
   SPM: required before reading or writing a range other than through mcl_spm_view. */
void mcl_spm_materialize(uint64_t offset, uint64_t bytes);
/* Forgets the deferred bytes of [offset, offset + bytes): the caller writes every byte of the
   range before anything reads it. */
void mcl_spm_overwrite(uint64_t offset, uint64_t bytes);
/* 1 when the calling cluster's SPM has deferred copies. */
int mcl_spm_has_deferred(void);
/* DDR -> the calling cluster's SPM. */
mcl_dma_handle mcl_dma_get(const mcl_ddr_window *window, uint64_t ddr_offset, uint64_t spm_offset,
                           const mcl_dma_shape *shape);
/* The calling cluster's SPM -> DDR. */
mcl_dma_handle mcl_dma_put(uint64_t spm_offset, const mcl_ddr_window *window, uint64_t ddr_offset,
                           const mcl_dma_shape *shape);
/* The calling cluster's SPM -> the SPM of cluster dst_cluster (group index). */
mcl_dma_handle mcl_dma_spm_copy(uint64_t src_spm_offset, uint32_t dst_cluster,
                                uint64_t dst_spm_offset, const mcl_dma_shape *shape);
/* One DDR read delivered to spm_offset of each listed cluster (group indices). */
mcl_dma_handle mcl_dma_multicast(const mcl_ddr_window *window, uint64_t ddr_offset,
                                 const uint32_t *clusters, uint32_t cluster_count,
                                 uint64_t spm_offset, const mcl_dma_shape *shape);
/* Waits (in modeled time) for the transfer and all earlier ones of this cluster. */
int mcl_dma_wait(mcl_dma_handle handle);
int mcl_dma_wait_all(void);
/* 1 when the transfer has completed at the current modeled time, else 0. */
int mcl_dma_done(mcl_dma_handle handle);

/* ---- synchronization ---- */
/* Barrier over all clusters of the command. Does not wait for outstanding transfers. */
int mcl_barrier(void);
/* Adds count to signal `signal` of cluster `cluster` (group index). */
int mcl_signal_post(uint32_t cluster, uint32_t signal, uint64_t count);
/* Blocks until the calling cluster's signal `signal` reached `value` (counters only grow
 * within a command). */
int mcl_signal_wait(uint32_t signal, uint64_t value);
uint64_t mcl_signal_value(uint32_t signal);

/* ---- PEs ---- */
typedef void (*mcl_task_fn)(void *arg, uint32_t index, uint32_t pe);
/* Runs body(arg, i, pe) for i in [0, count) over the cluster's PEs (contiguous slices, one
 * host thread per PE) and returns when all are done. Cycles accounted inside are per PE;
 * the cluster advances by the slowest PE. Nested calls run serially. */
int mcl_parallel_for(uint32_t count, mcl_task_fn body, void *arg);
/* Adapters with the signatures of kernels/native's mcl_native_exec callbacks (`user` is
 * ignored: they act on the current context). */
void mcl_exec_parallel_for(void *user, uint32_t count, mcl_task_fn body, void *arg);
void mcl_exec_account_cycles(void *user, uint64_t cycles);

/* ---- modeled time ---- */
typedef enum mcl_elem_type {
  MCL_ELEM_INT8 = 0,  /* INT8 -> INT32 MACs */
  MCL_ELEM_INT16 = 1, /* INT16 -> INT64 MACs */
  MCL_ELEM_FP16 = 2,  /* FP16 -> FP32 FMAs */
  MCL_ELEM_FP32 = 3   /* FP32 FMAs */
} mcl_elem_type;

uint64_t mcl_now_cycles(void);            /* the cluster's compute timeline */
void mcl_account_cycles(uint64_t cycles); /* compute took this long */
/* Cycles of `macs` MACs of `type` on `pes` PEs at the configured rates (ceil). */
uint64_t mcl_mac_cycles(uint32_t type, uint64_t macs, uint32_t pes);
void mcl_account_macs(uint32_t type, uint64_t macs, uint32_t pes);
/* Vector work: elements × ops_per_element FP32 operations on `pes` PEs. */
void mcl_account_elements(uint64_t elements, uint32_t ops_per_element, uint32_t pes);

/* ---- checks and diagnostics ---- */
int mcl_checked_mode(void); /* 1 when MANYCL_CHECK=1 */
/* Checked mode: MCL_OK when [ptr, ptr + size) lies inside the calling cluster's SPM, else
 * MCL_ERR_RANGE and the command fails. Unchecked mode: always MCL_OK, nothing checked. */
int mcl_check_spm_range(const void *ptr, uint64_t size);
/* Reports SPM bytes in use up to `end_offset` (for the SPM high-water statistic). */
void mcl_note_spm_used(uint64_t end_offset);
/* Marks the command failed with this message. */
void mcl_fail(const char *message);
/* printf-style log line: an instant event in the trace, and a line on stderr when
 * MANYCL_DEVICE_LOG=1. */
void mcl_log(const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* The message of the calling thread's last failed call ("" if none). */
const char *mcl_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
