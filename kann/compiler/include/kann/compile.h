// The tile compiler (KaNN scheme) and the record emitter: a optimized kann::ir::Graph ->
// a kbin program for one device configuration and cluster count, plus a per-operator report.
//
// Every operator runs on all clusters: spatial split (bands of output rows per cluster, the
// input band plus halo; parameters read from DDR once and multicast) or channel split
// (global pooling, Gemm: input replicated, each cluster loads its slice of the parameters).
// Activations stay in SPM between operators; when a consumer needs rows or channels another
// cluster produced, the producer pushes them with SPM->SPM exchanges. Only network inputs
// and outputs live in DDR (in ONNX layout: the DMA engine transposes to channel-last tiles).
// SPM buffers are placed statically by lifetime (operator steps); the parameters of step
// s+1 are loaded while step s computes (double buffering), and parameters too large for
// that stream inside their step in output-channel slices (each read once from DDR).
// Float element-wise operators write over an input that dies at them.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kann/format.h"
#include "kann/ir.h"
#include "manycl/device/config.h"
#include "manycl/result.h"

namespace kann {

struct CompileOptions {
  manycl::device::DeviceConfig device; // configuration compiled for
  unsigned clusters = 0;               // 0: all clusters of the configuration
  std::string precision = "fp32";      // fp32, fp16, or int8 (a quantized graph)
  // With "fp16": operators (node names of the optimized graph) computed in float32, with
  // float32 weights and outputs (mixed precision: kann/mixed_precision.h chooses them).
  std::set<std::string> fp32_operators;
  // Called as long steps advance: stage name, units done, units in all (0: unknown).
  std::function<void(const char *stage, size_t done, size_t total)> progress;
  // Fill CompileOutput::schedule (`kann compile --dump-schedule`, the golden tests).
  bool dump_schedule = false;
  // Images per inference (`kann compile --batch N`): 0 takes the model's (its inputs' static
  // first dimension, 1 when that is symbolic); a static batch B > 1 accepts only N = B.
  int64_t batch = 0;
  // How a batch uses the clusters (`--batch-split`): "sequential" (every image on all
  // clusters, one after the other), "clusters" (cluster groups each running whole images with
  // a schedule compiled for the group's size), "auto" (the candidate predicted fastest).
  std::string batch_split = "auto";
  // With "clusters": only groups of this many clusters (and one of the rest), 0: every size
  // is a candidate (`--batch-split clusters:G`; comparisons and tests of a given layout).
  unsigned batch_group_clusters = 0;
  // How operators are scheduled in time (`kann compile --schedule`): "layer" (one operator
  // per step; the next operator's parameters load during the current step), "pipeline"
  // (layer steps, with every operator's parameters cut into pieces that load during as many
  // earlier steps as their compute hides, inside the SPM left free; docs/kann.md,
  // "Schedules"), "group" (layer
  // groups: consecutive operators run band by band with their intermediates in the SPM,
  // tiler/group.cpp), "auto" (layer and pipeline built, group too when the layer schedule
  // spills, the one predicted fastest kept: never slower than "layer").
  std::string schedule = "auto";
  // Residual Adds fused into the convolution producing one of their operands
  // (passes::fuse_residual_adds; `kann compile --no-residual-fusion` turns it off, for
  // comparisons).
  bool fuse_residual_adds = true;
  // Float 3x3 stride-1 convolution calls computed as Winograd F(4x4, 3x3)
  // (`kann compile --winograd`, Compiler::winograd_pays): "auto" where the cost model predicts
  // it faster and the call is large enough for the host that simulates the device to compute
  // it faster too, "all" wherever the cost model predicts it faster (the fewest modeled
  // cycles), "off" (direct convolutions only: comparisons, bit-exact references).
  std::string winograd = "auto";
};

// How a batch of images was laid out on the clusters (CompileOutput::batch).
struct BatchReport {
  struct Group {
    unsigned first_cluster = 0, clusters = 0; // the group's clusters
    std::vector<int64_t> images;              // run one after the other on them
  };
  struct Candidate {
    std::string name;    // "sequential", "clusters 1x5", "clusters 3+2", ...
    uint64_t cycles = 0; // predicted modeled cycles of the whole batch (0: did not compile)
    std::string error;   // why it did not compile
  };
  int64_t images = 1;
  std::string split;         // "sequential" or "clusters"
  std::string chosen;        // the chosen candidate's name
  std::string why;           // one line: the rule and the figures that chose it
  std::vector<Group> groups; // the chosen layout
  std::vector<Candidate> candidates;
};

struct OpReport {
  std::string name;
  std::string op;
  std::string split;              // "rows", "channels", "single" (+ " xN" row tiles, " wN"
                                  // parameter slices)
  unsigned tiles = 0;             // clusters with work
  std::vector<uint64_t> spm_peak; // per cluster: bytes live during this step
  uint64_t ddr_bytes = 0;         // parameters + network input/output bytes moved
  uint64_t exchange_bytes = 0;    // SPM->SPM bytes
  std::string shape;              // e.g. "3x3/1 256->512" for convolutions, else empty
  uint64_t macs = 0;              // multiply-accumulates, all clusters
  uint64_t padded_macs = 0;       // executed by the matrix engine, partial blocks included
  std::string bound;              // lane with the most cycles: matrix, load/store, vliw, overhead
  uint64_t compute_cycles = 0;    // slowest cluster (mcl_native_cost)
  uint64_t dma_cycles = 0;        // modeled transfer time of the step
  uint64_t cycles = 0;            // modeled step time
  uint64_t start_cycle = 0;
};

// Which schedule a binary was built with (CompileOutput::schedule_choice).
struct ScheduleReport {
  std::string chosen;        // "layer", "pipeline" or "group"
  std::string why;           // one line: the figures that chose it
  uint64_t layer_cycles = 0; // predicted cycles of each candidate built (0: not built)
  uint64_t pipeline_cycles = 0;
  uint64_t group_cycles = 0;
};

struct BufferReport {
  std::string name;
  uint64_t offset = 0, size = 0;
  int first_step = 0, last_step = 0;
};

// Where the clusters' modeled time goes (the replay's attribution, mean over the clusters):
// each cluster's end = compute + DMA waits + barrier waits + signal waits.
struct TimeBreakdown {
  uint64_t compute = 0;
  uint64_t dma_wait = 0;     // WAIT_DMA: transfers not hidden behind compute
  uint64_t barrier_wait = 0; // waiting for the slower clusters, plus the barrier latency
  uint64_t signal_wait = 0;  // WAIT_SIGNAL: parameter slices, cluster-group barriers
};

// A layer group as built (the group schedule): its operators compute band by band in the
// step of the last one, their intermediates in SPM band buffers.
struct GroupReport {
  size_t first_op = 0, last_op = 0;       // indices into CompileOutput::ops
  int bands = 0;                          // bands per cluster
  std::vector<std::string> intermediates; // activations held one band at a time in the SPM
  std::vector<size_t> buffers;            // indices into CompileOutput::buffers live in its step
  std::string why;                        // what formed it (the seed activation and its size)
};

struct CompileOutput {
  format::Program program;
  std::vector<OpReport> ops;
  std::vector<BufferReport> buffers;
  uint64_t total_cycles = 0;     // predicted modeled cycles (replay of the streams, kann/timing.h)
  uint64_t estimated_cycles = 0; // the tile compiler's quick per-step estimate
  TimeBreakdown time;            // of total_cycles, from the replay
  ScheduleReport schedule_choice;
  uint64_t params_bytes = 0;
  std::vector<std::string> spilled;  // activations homed in DDR (SPM too small)
  std::vector<std::string> streamed; // network inputs left in DDR by choice, loaded in bands
  std::vector<GroupReport> groups;   // layer groups of the schedule built (none: one step per op)
  // With CompileOptions::dump_schedule: the schedule of one image as text (steps, per-step
  // operator, lowering and split, per-cluster boxes, SPM buffers and offsets, every record).
  std::string schedule;
  // Batches (images > 1): the split chosen and the candidates compared. With cluster groups,
  // `ops`/`buffers`/`schedule` describe the one-image schedule of the largest group.
  BatchReport batch;

  std::string report_text() const;
  std::string report_json() const;
  std::string report_html() const;
};

manycl::Result<CompileOutput> compile_graph(const ir::Graph &graph, const CompileOptions &options);

// Import + optimize + compile.
manycl::Result<CompileOutput> compile_onnx_file(const std::string &path,
                                                const CompileOptions &options);

} // namespace kann
