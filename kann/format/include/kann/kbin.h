/* kann program binary ("kbin"), version 2: the on-disk layout shared by the model compiler
 * (writer), the program loader (reader/validator) and the device-side record interpreter.
 *
 * Plain C so that the interpreter and the OpenCL C side can use the same definitions. All
 * integers are little-endian; every struct here is naturally aligned with no implicit
 * padding (checked by static asserts in format.cpp). docs/kbin-format.md is the normative
 * description.
 *
 * A record never holds a host pointer: SPM addresses are byte offsets in the executing
 * cluster's scratchpad, DDR addresses are {space, argument index, offset}. */
#ifndef KANN_KBIN_H
#define KANN_KBIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KBIN_MAGIC "KANNKBIN" /* 8 bytes, no terminator in the file */
/* Readers reject another major version (2: checksum; 3: INT8 weights stored as bytes;
 * 4: convolution argument blocks end with a residual tile, 32 bytes longer). */
#define KBIN_VERSION_MAJOR 4u
#define KBIN_VERSION_MINOR 2u /* readers accept any minor version of their major */
#define KBIN_MAX_CLUSTERS 32u /* multicast destinations are a 32-bit mask */
#define KBIN_MAX_SIGNALS 64u  /* = MCL_SIGNALS_PER_CLUSTER of the device API */
/* = MCL_FIRST_PRIVATE_SIGNAL: ids from here up are notified only by the cluster's own
   transfers into its own SPM (a wait on one needs no other cluster's progress) */
#define KBIN_FIRST_PRIVATE_SIGNAL 48u
#define KBIN_MAX_RANK 6u
#define KBIN_RECORD_ALIGN 8u /* record lengths are multiples of this */

typedef struct kbin_header {
  char magic[8];          /* KBIN_MAGIC */
  uint16_t version_major; /* KBIN_VERSION_MAJOR */
  uint16_t version_minor;
  uint32_t header_size;     /* sizeof(kbin_header) */
  uint64_t file_size;       /* total bytes of the binary */
  uint32_t cluster_count;   /* clusters the program was compiled for (= streams) */
  uint32_t pes_per_cluster; /* PEs per cluster assumed by the cost model (informational) */
  uint64_t spm_bytes;       /* SPM size per cluster of the target device configuration */
  uint64_t spm_required;    /* highest SPM byte used + 1; the device needs at least this */
  uint64_t params_size;     /* bytes of the PARAMS section (the parameter blob) */
  uint64_t scratch_size;    /* bytes of DDR scratch the runtime must allocate (may be 0) */
  uint32_t arg_count;       /* kernel arguments: one DDR buffer per input/output tensor */
  uint32_t section_count;   /* entries of the section table following the header */
  uint32_t flags;           /* none defined: must be 0 */
  uint32_t checksum;        /* CRC-32C of all file_size bytes, this field read as 0 */
  char preset[32];          /* device preset / configuration name, NUL padded */
} kbin_header;

enum kbin_section_kind {
  KBIN_SECTION_STRINGS = 1, /* UTF-8 bytes referenced by {offset, length} */
  KBIN_SECTION_TENSORS = 2, /* kbin_tensor_desc[] : network inputs and outputs */
  KBIN_SECTION_PARAMS = 3,  /* the parameter blob (weights, packed params, conv tables) */
  KBIN_SECTION_STREAMS = 4, /* kbin_stream_entry[cluster_count], then the record bytes */
  KBIN_SECTION_REPORT = 5   /* optional: compile report, JSON text (ignored by loaders) */
};

/* Follows the header; sections lie inside the file, 8-byte aligned, without overlap. */
typedef struct kbin_section {
  uint32_t kind; /* kbin_section_kind, each at most once */
  uint32_t reserved;
  uint64_t offset; /* from the start of the file */
  uint64_t size;
} kbin_section;

enum kbin_tensor_role { KBIN_ROLE_INPUT = 1, KBIN_ROLE_OUTPUT = 2 };
/* Layout of the tensor's bytes in its DDR buffer. ONNX: dense row-major in the order of
 * dims (NCHW for images), exactly what the ONNX model and numpy use. */
enum kbin_layout { KBIN_LAYOUT_ONNX = 1 };

typedef struct kbin_tensor_desc {
  uint32_t name_offset; /* in STRINGS */
  uint32_t name_length;
  uint32_t role;      /* kbin_tensor_role */
  uint32_t arg_index; /* kernel argument index of its DDR buffer, < arg_count, unique */
  uint32_t dtype;     /* mcl_dtype (manycl/native/args.h) */
  uint32_t layout;    /* kbin_layout */
  uint32_t rank;      /* 1 .. KBIN_MAX_RANK */
  uint32_t reserved;
  uint64_t dims[KBIN_MAX_RANK]; /* dims[rank..] are 0 */
  uint64_t byte_size;           /* product(dims) * element size: the buffer's minimum size */
  float scale;                  /* INT8: real = scale * (q - zero_point); else 1, 0 */
  int32_t zero_point;
} kbin_tensor_desc;

typedef struct kbin_stream_entry {
  uint64_t offset; /* of the cluster's first record, from the STREAMS section start */
  uint64_t size;   /* bytes of its records */
} kbin_stream_entry;

/* ---- records ---- */
typedef struct kbin_record_header {
  uint32_t length;      /* bytes of the record including this header, multiple of 8 */
  uint32_t function_id; /* mcl_native_fn_id (compute) or kbin_control_fn */
} kbin_record_header;

/* Control records use ids far from the native registry's. */
enum kbin_control_fn {
  KBIN_FN_DMA = 0x1000,        /* kbin_dma_args */
  KBIN_FN_WAIT_DMA = 0x1001,   /* kbin_wait_dma_args: all earlier transfers of the cluster */
  KBIN_FN_BARRIER = 0x1002,    /* no arguments: all clusters of the command */
  KBIN_FN_SIGNAL = 0x1003,     /* kbin_signal_args */
  KBIN_FN_WAIT_SIGNAL = 0x1004 /* kbin_wait_signal_args */
};

enum kbin_ddr_space {
  KBIN_DDR_PARAMS = 1, /* the parameter blob uploaded by the loader */
  KBIN_DDR_ARG = 2,    /* the buffer of kernel argument arg_index */
  KBIN_DDR_SCRATCH = 3 /* scratch_size bytes of DDR owned by the running command */
};

typedef struct kbin_ddr_ref {
  uint32_t space;     /* kbin_ddr_space */
  uint32_t arg_index; /* KBIN_DDR_ARG only, else 0 */
  uint64_t offset;    /* bytes from the start of that buffer */
} kbin_ddr_ref;

enum kbin_dma_kind {
  KBIN_DMA_LOAD = 1,              /* DDR -> own SPM */
  KBIN_DMA_STORE = 2,             /* own SPM -> DDR */
  KBIN_DMA_MULTICAST = 3,         /* DDR -> the same SPM offset of every cluster in cluster_mask */
  KBIN_DMA_EXCHANGE = 4,          /* own SPM -> SPM of dst_cluster */
  KBIN_DMA_EXCHANGE_MULTICAST = 5 /* own SPM -> spm_dst_offset of every cluster in cluster_mask
                                     (minor version 2) */
};

/* planes × rows × row_bytes, strides in bytes on each side (mcl_dma_shape). */
typedef struct kbin_dma_shape {
  uint64_t row_bytes, rows, planes;
  uint64_t src_row_stride, src_plane_stride;
  uint64_t dst_row_stride, dst_plane_stride;
} kbin_dma_shape;

typedef struct kbin_dma_args {
  uint32_t kind;           /* kbin_dma_kind */
  uint32_t dst_cluster;    /* EXCHANGE: destination cluster, else 0 */
  uint32_t cluster_mask;   /* MULTICAST, EXCHANGE_MULTICAST: bit i = cluster i receives, else 0 */
  int32_t notify_signal;   /* -1, or a signal added 1 on every destination cluster on arrival */
  kbin_ddr_ref ddr;        /* LOAD: source; STORE: destination; MULTICAST: source */
  uint64_t spm_offset;     /* LOAD, MULTICAST: destination; STORE, EXCHANGE(_MULTICAST): source */
  uint64_t spm_dst_offset; /* EXCHANGE(_MULTICAST): destination offset in the SPM(s), else 0 */
  kbin_dma_shape shape;
} kbin_dma_args;

typedef struct kbin_wait_dma_args {
  uint32_t reserved0, reserved1; /* 0 */
} kbin_wait_dma_args;

typedef struct kbin_signal_args {
  uint32_t cluster; /* target cluster */
  uint32_t signal;  /* < KBIN_MAX_SIGNALS */
  uint64_t count;   /* added, >= 1 */
} kbin_signal_args;

typedef struct kbin_wait_signal_args {
  uint32_t signal; /* of the executing cluster */
  uint32_t reserved;
  uint64_t value; /* waits until the counter reaches it */
} kbin_wait_signal_args;

#ifdef __cplusplus
}
#endif
#endif
