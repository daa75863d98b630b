// The tile compiler's internal interface, shared by its parts (kann/compiler/src/tiler/):
//   compile.cpp        the driver: fit the SPM (policy relaxation)
//   batch.cpp          batches: sequential or cluster-group layouts, the fastest predicted
//   plan.cpp           per operator: split, output/input boxes per cluster, buffers, lifetimes
//   spm_alloc.cpp      one SPM offset per buffer (greedy placement by lifetime)
//   params.cpp         the parameter blob: packed weights per slice
//   emit.cpp           per-cluster record streams, step by step (DMA, compute calls, barriers)
//   lower.cpp          dispatch by ir::Lowering (kann/ops.h) to the lowering of each kind:
//   lower_*.cpp        one file per lowering kind: input boxes, native calls, weight packing
//   pipeline.cpp       the "pipeline" schedule: parameter loads spread over earlier steps
//   split_tiles.cpp    convolutions split by rows and channels at once (2-D boxes)
//   group.cpp          layer groups: consecutive operators run band by band, intermediates
//                      kept in the SPM (the "group" schedule)
//   schedule_dump.cpp  the schedule as text (CompileOptions::dump_schedule, golden tests)
// docs/kann.md ("Inside the compiler") says where a new operator or schedule goes.
// Not a public header: kann/compile.h is the tile compiler's API.
#pragma once

#include "kann/compile.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "manycl/native/native.h"

namespace kann::tiler {

using ir::Graph;
using ir::Lowering;
using ir::Node;
using ir::Op;
using ir::Tensor;
using manycl::make_error;
using manycl::Result;

constexpr uint64_t kAlign = 64;
// A Conv node's residual (passes::fuse_residual_adds): node input 3, PlannedOp::ins[1].
constexpr size_t kResidualInput = 3;
constexpr uint32_t kWeightSignal = 0; // counts parameter slices arrived in a cluster's SPM
// Counts, on the cluster that multicasts an operator's parameter slices, the other clusters
// done with a slice, so that it may multicast the slice after next into that slice's buffer.
constexpr uint32_t kSliceFreeSignal = 1;
// Counts the bands of a streamed network input arrived in a cluster's SPM (group.cpp): a
// private signal, notified by the cluster's own loads only.
constexpr uint32_t kInputSignal = KBIN_FIRST_PRIVATE_SIGNAL;
constexpr int64_t kPanel = 16; // output channels per packed weight panel (the native format)
inline uint64_t align_up(uint64_t v, uint64_t a = kAlign) {
  return (v + a - 1) / a * a;
}
// Pieces of a parameter slice are given as fractions [f0, f1) of its bytes in these units.
constexpr uint32_t kPieceUnits = 1u << 20;
uint64_t piece_bound(uint64_t bytes, uint32_t f);

// A piece of an operator's first parameter slice loaded during one step ("pipeline").
struct ParamPiece {
  int op = -1;                       // the operator whose parameters it holds
  uint32_t f0 = 0, f1 = kPieceUnits; // bytes [f0, f1) of each slot, in kPieceUnits
};

// A box of a channel-last activation: rows [y0, y1) x all columns x channels [c0, c1).
struct Box {
  int64_t y0 = 0, y1 = 0, c0 = 0, c1 = 0;
  bool empty() const { return y1 <= y0 || c1 <= c0; }
  int64_t rows() const { return y1 - y0; }
  int64_t chans() const { return c1 - c0; }
};
inline Box intersect(const Box &a, const Box &b) {
  return {std::max(a.y0, b.y0), std::min(a.y1, b.y1), std::max(a.c0, b.c0), std::min(a.c1, b.c1)};
}
inline Box bbox(const Box &a, const Box &b) {
  if (a.empty())
    return b;
  if (b.empty())
    return a;
  return {std::min(a.y0, b.y0), std::max(a.y1, b.y1), std::min(a.c0, b.c0), std::max(a.c1, b.c1)};
}

struct SpmBuffer {
  std::string name;
  std::vector<uint64_t> bytes; // per cluster (0: unused there)
  int first = 0, last = 0;     // steps
  uint64_t offset = 0;
  int act = -1;        // activation it holds, or -1
  int op = -1;         // operator whose staging buffer it is, or -1
  int prefetched = -1; // operator whose parameters it prefetches, or -1
  int weights_of = -1; // operator whose (sliced) parameters it holds, or -1
  uint64_t size() const { return *std::max_element(bytes.begin(), bytes.end()); }
};

// Where an activation lives. SPM: a buffer on every cluster holding its owned rows plus what
// its consumers there need (exchanged). DDR: spilled, the whole tensor in one DDR buffer
// (its network argument in ONNX layout, or SCRATCH in channel-last layout); operators
// stream it through SPM staging buffers.
struct Act {
  int tensor = -1; // the tensor that owns the storage
  int64_t H = 1, W = 1, C = 1;
  uint32_t es = 4;
  uint32_t dtype = MCL_DTYPE_F32;
  float scale = 1.0f; // INT8 activations (quantized by QuantizeLinear)
  int32_t zero_point = 0;
  std::vector<Box> owned; // per cluster: produced there
  std::vector<Box> need;  // per cluster: read there by consumers (bounding box)
  std::vector<Box> buf;   // per cluster: bbox(owned, need), what the buffer holds
  int buffer = -1;        // SpmBuffer index (SPM home)
  bool in_ddr = false;
  kbin_ddr_ref home{};      // DDR home
  bool onnx_layout = false; // DDR home layout: NCHW (network arguments) or HWC (scratch)
  int group = -1; // a layer group's intermediate (Compiler::groups): one band's rows in the SPM
  int first = 0, last = 0;
  uint64_t bytes() const { return uint64_t(H * W * C) * es; }
};

// Packed parameters of a range of output channels (the operator's own numbering).
struct ParamSlice {
  Box box;
  std::vector<uint8_t> bytes; // until they are in the blob (pack_params)
  uint64_t blob_offset = 0;
  uint64_t size = 0; // the bytes' count, kept after they moved to the blob
};

// An operator's parameters: per slot (one shared slot, multicast to every cluster with work,
// or one slot per cluster) the output-channel slices, streamed one after the other when
// they do not fit at once. Slice 0 goes to `buffer` (prefetched during the previous step),
// then slices alternate between `buffer2` and `buffer` (double buffering).
struct ParamBlock {
  bool shared = false;
  std::vector<std::vector<ParamSlice>> slots;
  int buffer = -1;
  int buffer2 = -1;
  size_t slices() const {
    size_t n = 0;
    for (const auto &s : slots)
      n = std::max(n, s.size());
    return n;
  }
};

// An operator as planned: its lowering, split, boxes, geometry, parameters and staging.
struct PlannedOp {
  int node = -1;
  Lowering kind = Lowering::Conv;
  std::string split = "rows";
  int out = -1;                         // Act index
  std::vector<int> ins;                 // Act indices (activation inputs)
  std::vector<Box> out_box;             // per cluster
  std::vector<std::vector<Box>> in_box; // [input][cluster] for the whole out_box
  int chunks = 1;                       // intra-cluster tiles (bands of output rows)
  int wslices = 1; // output-channel slices of the parameters, streamed inside the step
  // Conv/pool geometry
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t groups = 1;
  ParamBlock params;         // packed weights (conv: shared; gemm: per cluster)
  int pad_row = -1;          // SpmBuffer: conv pad row
  std::vector<int> stage_in; // per input: SpmBuffer staging a DDR-homed input, or -1
  int stage_out = -1;        // SpmBuffer staging a DDR-homed output, or -1
  uint32_t fn = 0;
  bool transposed = false; // ConvTranspose (Lowering::Conv)
  int64_t in_c0 = 0;       // Slice: first input channel read
  int64_t shuffle_groups = 1;
  // Whole tensors on one cluster through per-dimension strides (lower_layout.cpp): any-rank
  // Transpose, Concat and broadcasting, copies of reshaped network inputs.
  bool strided = false;
  // Constant operands of a strided operator that the passes could not fold (not per
  // channel): node input index -> byte offset in its one parameter slice, which holds each
  // in the storage an activation of its shape would have (Compiler::storage_of), in the
  // output's element type. `ins` lists the other (activation) inputs only.
  std::map<size_t, uint64_t> const_operands;
  uint64_t const_bytes = 0;
  // Index in `ins` of node input k (an activation input).
  size_t act_slot(size_t k) const {
    size_t j = 0;
    for (size_t i = 0; i < k; ++i)
      j += const_operands.count(i) ? 0 : 1;
    return j;
  }
  // A "rows x channels" split (split_tiles.cpp): per range of output channels, the clusters
  // that compute it, each a band of its rows. The range's parameters are packed once and
  // multicast to those clusters (ParamBlock slot i goes to param_masks[i]). Empty otherwise.
  std::vector<uint32_t> param_masks;
  uint32_t conv_fn() const {
    return transposed ? MCL_NATIVE_FN_CONV_TRANSPOSE2D : MCL_NATIVE_FN_CONV2D;
  }
};

// What the tiler may change between attempts when the SPM is too small.
struct Policy {
  std::set<int> spilled;      // tensors (storage owners) homed in DDR
  std::set<int> streamed;     // of those, the ones kept in DDR by choice (streamed in bands)
  std::map<int, int> chunks;  // node -> intra-cluster tiles
  std::map<int, int> wslices; // node -> output-channel slices of its parameters
  std::set<int> no_prefetch;  // nodes whose parameters load in their own step
  // Layer groups (group.cpp): each the nodes of consecutive operators run band by band; the
  // bands are the last node's `chunks`.
  std::vector<std::vector<int>> groups;
  std::vector<std::string> group_why; // per group: what formed it (the report's `why`)
};

// A layer group as planned (group.cpp): operators first..last (indices of Compiler::ops) run
// in step last + 1, band by band of the last operator's output rows on each cluster; every
// activation they produce but the last one's is an intermediate read only inside the group,
// held in the SPM one band at a time (`band_buffer`).
struct GroupPlan {
  size_t first = 0, last = 0;
  std::vector<int> inner;      // intermediate activations
  std::map<int, int> producer; // intermediate activation -> operator index
  std::string why;             // Policy::group_why
};

// Packed parameter slices of one compile (kann::compile_graph opens the scope): the schedule
// candidates pack the same slices of the same weights; each is packed once. Per thread, empty
// outside a compile, so no slice outlives the graph it was packed from.
class PackCache {
public:
  struct Scope {
    Scope() {
      if (depth()++ == 0)
        entries().clear();
    }
    ~Scope() {
      if (--depth() == 0)
        entries().clear();
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;
  };
  static const std::vector<uint8_t> *find(const std::vector<int64_t> &key) {
    auto it = entries().find(key);
    return it == entries().end() ? nullptr : &it->second;
  }
  static void keep(const std::vector<int64_t> &key, const std::vector<uint8_t> &bytes) {
    if (depth() > 0)
      entries().emplace(key, bytes);
  }
  static int &depth() {
    thread_local int open = 0;
    return open;
  }

private:
  static std::map<std::vector<int64_t>, std::vector<uint8_t>> &entries() {
    thread_local std::map<std::vector<int64_t>, std::vector<uint8_t>> cache;
    return cache;
  }
};

// Why an allocation failed: the buffer that did not fit and what it competed with.
struct AllocFailure {
  std::string message;
  std::vector<int> candidates; // buffers live at the same time, the failing one included
};

// INT8 weights of output channels [c0, c1) of a Conv ([cout][...]) or transposed Gemm
// ([n][k]): integer values, int32 bias requantized to input_scale * weight_scale, and the
// quantization block for the packers.
struct Int8Weights {
  std::vector<int8_t> values;
  std::vector<int32_t> bias;
  std::vector<float> scales;
  std::vector<int32_t> zeros;
  mcl_weight_quant quant{};
};

// One compute call: argument blocks (several for Concat).
struct Call {
  std::vector<format::Record> records;
  uint64_t cost = 0;
  mcl_native_cost_breakdown lanes{}; // summed over the call's records
  uint32_t pes_per_cluster = 0;      // the cost model's PE count

  // Appends one native call (function `fn`, argument block `args`) and its modeled cost.
  template <class Args> void add(uint32_t fn, const Args &args) {
    records.push_back(format::Record::make(fn, args));
    mcl_native_cost_breakdown b{};
    mcl_native_cost_detail(fn, &args, pes_per_cluster, &b);
    cost += b.total;
    lanes.matrix += b.matrix;
    lanes.load_store += b.load_store;
    lanes.vliw += b.vliw;
    lanes.overhead += b.overhead;
    lanes.macs += b.macs;
    lanes.padded_macs += b.padded_macs;
  }
};

// Where one compute call works on one cluster: its output box (the operator's own channel
// numbering) and input 0's box, their SPM tiles, and where the parameters are in the SPM.
struct CallTiles {
  unsigned cluster = 0;
  Box out_box, in_box;
  mcl_tile in{}, out{};
  uint64_t params_spm = 0;
};

// What one step moves and computes, per cluster: the report's quick estimate of its cycles.
struct StepTraffic {
  std::vector<uint64_t> params_ddr; // parameter bytes loaded (prefetch, own loads, slices)
  std::vector<uint64_t> stream_ddr; // streamed operands and outputs, network outputs
  std::vector<uint64_t> compute;    // cycles of the native calls (cost model)
  std::vector<uint64_t> noc;        // SPM->SPM exchange bytes sent
  std::vector<bool> exchanged;      // the cluster sent its exchanges during the compute
  mcl_native_cost_breakdown lanes{};
  explicit StepTraffic(unsigned clusters)
      : params_ddr(clusters, 0), stream_ddr(clusters, 0), compute(clusters, 0), noc(clusters, 0),
        exchanged(clusters, false) {}
  // A compute call on `cluster`: its modeled cycles and the lanes they keep busy.
  void add_call(unsigned cluster, const Call &call) {
    compute[cluster] += call.cost;
    lanes.matrix += call.lanes.matrix;
    lanes.load_store += call.lanes.load_store;
    lanes.vliw += call.lanes.vliw;
    lanes.overhead += call.lanes.overhead;
  }
};

// The tile compiler for one graph, cluster count and policy. Phases, in order: layout()
// (plan, lifetimes, plan_params, allocate), then finish() (pack_params, emit).
struct Compiler {
  const Graph &g;
  const CompileOptions &opt;
  unsigned K; // clusters
  const Policy &policy;
  std::vector<Act> acts;
  std::map<int, int> act_of;                          // tensor -> Act
  std::map<int, std::vector<int64_t>> view_src_shape; // tensor viewed as 2-D from 4-D: CHW
  std::vector<PlannedOp> ops;                         // in execution order: op s runs in step s + 1
  std::vector<SpmBuffer> buffers;
  format::Program prog;
  CompileOutput out;
  AllocFailure failure;
  std::map<int, uint32_t> input_arg, output_arg; // tensor -> kernel argument
  std::vector<uint64_t> weight_signals;          // per cluster: notifications sent so far
  std::vector<uint64_t> slice_free_signals;      // per cluster: kSliceFreeSignal posts so far
  std::vector<uint64_t> input_signals;           // per cluster: kInputSignal posts so far
  // Per step (0: the prologue, s + 1: op s), per cluster: the stream's length after it.
  std::vector<std::vector<size_t>> step_ends;
  // Concat elimination: a concat input written straight into the concat output's storage
  // at this channel offset (tensor -> offset); the eliminated Concat nodes.
  std::map<int, int64_t> chan_offset;
  std::set<int> eliminated;
  // The "pipeline" schedule (pipeline.cpp): per op, the layer schedule's compute cycles of
  // its slowest cluster (empty: the layer schedule), the share of the SPM its buffers may
  // use, and per step (0: the prologue) the parameter pieces loaded there.
  std::vector<uint64_t> step_compute;
  double spm_headroom = 0.85;
  std::vector<std::vector<ParamPiece>> pieces_at;
  bool exchange_splits = false; // convolutions split by channel_split_pays (pipeline.cpp)
  // The pipeline schedule: the rows of an output box that other clusters read are computed
  // first and sent while the rest of the box computes (emit.cpp, exported_rows_first).
  bool early_exchanges = false;
  bool tile_splits = false; // and by rows and channels at once when faster (split_tiles.cpp)
  // Channel splits of convolutions start on multiples of this many channels (the packed
  // panel width by default: no slice packs padding channels).
  int64_t channel_granule = kPanel;

  Compiler(const Graph &graph, const CompileOptions &o, unsigned clusters, const Policy &p)
      : g(graph), opt(o), K(clusters), policy(p) {}

  std::string where(const Node &n) const {
    return "node '" + n.name + "' (" + ir::op_name(n.op) + ")";
  }

  // Output channels of an operator: its storage's, unless it writes part of a concat.
  int64_t out_c(const PlannedOp &op) const {
    const int t = g.nodes[op.node].outputs[0];
    return chan_offset.count(t) ? g.tensors[t].shape[1] : acts[op.out].C;
  }
  int64_t out_off(const PlannedOp &op) const {
    auto it = chan_offset.find(g.nodes[op.node].outputs[0]);
    return it == chan_offset.end() ? 0 : it->second;
  }
  // An op's output box (its own channel numbering) in the storage it writes.
  Box stored(const PlannedOp &op, Box b) const {
    const int64_t off = out_off(op);
    if (!b.empty())
      b.c0 += off, b.c1 += off;
    return b;
  }
  Box full(const Act &a) const { return {0, a.H, 0, a.C}; }

  // ---- planning (plan.cpp) ----
  // Plans and allocates; false (with `failure`) when the SPM is too small for this policy.
  Result<bool> layout();
  Result<void> plan();
  void plan_concat_elimination();
  Result<int> act_for(int tensor);
  // The storage geometry (H, W, C) of an activation of tensor t's shape (act_for).
  static Act storage_of(const Tensor &t);
  // A constant operand (node input k of a strided op) as an SPM tile of the op's parameters.
  mcl_tile const_tile(const PlannedOp &op, size_t k, uint64_t params_spm) const;
  int new_buffer(std::string name, int first, int last);
  std::vector<Box> split_rows(int64_t H, int64_t C) const;
  std::vector<Box> split_channels(int64_t H, int64_t C, int64_t granule = 1) const;
  std::vector<Box> weight_slices(const PlannedOp &op, const Box &b) const;
  std::vector<Box> chunk_boxes(const PlannedOp &op, unsigned c) const;
  // Whether any band of a cluster's output rows is one more call of the same operator (what
  // chunk_boxes and the early exchanges cut): not for a single cluster's whole tensor.
  bool computes_in_bands(const PlannedOp &op) const;
  bool choose_channel_split(const PlannedOp &op) const;
  // ---- rows x channels splits (split_tiles.cpp) ----
  bool choose_tile_split(PlannedOp &op) const;
  uint64_t split_cycles(const PlannedOp &op, const std::vector<Box> &boxes) const;
  uint64_t conv_box_cycles(const PlannedOp &op, const Box &ob) const;
  Result<void> plan_op(PlannedOp &op, const Node &n);
  Result<void> lifetimes();
  std::vector<int> plan_in_place() const;
  Result<void> plan_params();

  // ---- the pipeline schedule (pipeline.cpp) ----
  void plan_pipeline();
  void emit_pieces(size_t step, std::vector<uint64_t> &ddr);
  bool channel_split_pays(const PlannedOp &op) const;
  std::string layout_signature() const;

  // ---- layer groups (group.cpp) ----
  std::vector<GroupPlan> groups;
  std::vector<int> group_of_op; // per op: its group, or -1
  // During emission: per activation, per cluster, the box the band buffer of a group's
  // intermediate holds now; per staging buffer, the byte shift of the half in use.
  std::vector<std::vector<Box>> band_origin;
  std::map<int, uint64_t> stage_shift;
  void plan_groups();
  bool group_member_ok(const PlannedOp &op) const;
  std::vector<Box> group_band(const GroupPlan &gp, const Box &last_box) const;
  bool loads_upfront(const GroupPlan &gp) const;
  uint64_t staging_slots(const GroupPlan &gp) const;
  void group_lifetimes();
  void plan_group_buffers();
  Result<void> emit_group_member_step(size_t s, uint64_t &clock);
  Result<void> emit_group_compute(size_t s, StepTraffic &traffic, OpReport &rep);
  bool in_group_node(int node) const;

  // ---- SPM allocation (spm_alloc.cpp) ----
  bool allocate();
  bool place(int order_kind, bool best_fit);

  // ---- parameter blob (params.cpp) ----
  uint64_t add_blob(const std::vector<uint8_t> &bytes);
  template <class T> static std::vector<uint8_t> to_bytes(const T *p, size_t n) {
    std::vector<uint8_t> v(n * sizeof(T));
    std::memcpy(v.data(), p, v.size());
    return v;
  }
  Result<void> pack_params();
  static void int8_clamp(const Act &y, const mcl_activation &act, int32_t &lo, int32_t &hi);
  Int8Weights int8_weights(const Node &n, const Act &x, const Act &y, int64_t c0, int64_t c1,
                           const std::vector<int64_t> *k_order) const;

  // ---- lowering, dispatched by Kind (lower.cpp), one file per kind (lower_*.cpp) ----
  Box need_for(const PlannedOp &op, size_t i, const Box &o) const;
  Result<Call> make_call(const PlannedOp &op, unsigned c, const Box &ob, uint64_t params_spm) const;
  // lower_conv.cpp: Conv, ConvTranspose (and the sliding-window input rows of pooling)
  Box need_window(const PlannedOp &op, const Act &in, const Box &o) const;
  mcl_conv_args conv_args_shape(const PlannedOp &op, const Box &ib, const Box &ob) const;
  bool winograd_pays(const mcl_conv_args &a) const;
  // MCL_CONV_NO_TABLE when every tap of the call lies inside its input, else
  // MCL_CONV_IMPLICIT_TABLE (the call derives the table; padding taps read the pad row).
  static uint16_t conv_table_flag(const PlannedOp &op, const mcl_conv_args &a);
  Result<std::vector<uint8_t>> pack_conv_slice(const PlannedOp &op, const Node &n, unsigned c,
                                               const Box &part) const;
  void call_conv(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_pool.cpp
  void call_pool(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_gemm.cpp
  Result<std::vector<uint8_t>> pack_gemm_slice(const PlannedOp &op, const Node &n,
                                               const Box &ob) const;
  void call_gemm(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_elementwise.cpp
  Box need_eltwise(const PlannedOp &op, const Act &in, const Box &o) const;
  void call_eltwise(const PlannedOp &op, const CallTiles &t, Call &call) const;
  void call_scale_shift(const PlannedOp &op, const CallTiles &t, Call &call) const;
  void call_unary(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_copy.cpp
  void call_concat(const PlannedOp &op, const CallTiles &t, Call &call) const;
  void call_shuffle(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_resize.cpp
  Box need_resize(const PlannedOp &op, const Act &in, const Box &o) const;
  void call_resize(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_math.cpp
  void call_math(const PlannedOp &op, const CallTiles &t, Call &call) const;
  Result<void> call_custom(const PlannedOp &op, const CallTiles &t, Call &call) const;
  // lower_layout.cpp: whole tensors of any rank through per-dimension strides
  std::vector<int64_t> spm_strides(const Act &a, const Tensor &t, const mcl_tile &tile) const;
  void strided_calls(std::vector<int64_t> dims, std::vector<std::vector<int64_t>> strides,
                     const std::vector<mcl_tile> &bases,
                     const std::function<void(std::vector<mcl_tile> &)> &make) const;
  static uint32_t dtype_bytes(uint32_t dtype);
  Result<void> call_strided(const PlannedOp &op, const CallTiles &t, Call &call) const;

  // ---- record emission (emit.cpp) ----
  Result<CompileOutput> finish();
  Result<void> emit();
  void describe_arguments();
  uint64_t emit_prologue(uint64_t &input_bytes);
  Result<void> emit_step(size_t s, uint64_t &clock, uint64_t input_bytes);
  Result<void> emit_compute(size_t s, StepTraffic &traffic, OpReport &rep);
  void emit_exchanges(const PlannedOp &op, StepTraffic &traffic, OpReport &rep);
  // The exchanges of what `from` computed of `part` (empty: its whole output box).
  void emit_exchanges_from(const PlannedOp &op, unsigned from, StepTraffic &traffic, OpReport &rep,
                           const Box &part = {});
  std::vector<kbin_dma_args> exchanges_of(const PlannedOp &op, unsigned from,
                                          const Box &part = {}) const;
  std::vector<Box> exported_rows_first(const PlannedOp &op, unsigned c, uint64_t params_spm,
                                       std::vector<Box> &sends) const;
  void emit_output_stores(const PlannedOp &op, StepTraffic &traffic);
  Result<void> replay_timing(uint64_t estimated_cycles);
  mcl_tile tile_of(const Act &a, unsigned c, const Box &box, int stage = -1) const;
  static kbin_dma_args dma(uint32_t kind) {
    kbin_dma_args d{};
    d.kind = kind;
    d.notify_signal = -1;
    return d;
  }
  static kbin_dma_shape linear(uint64_t bytes) { return {bytes, 1, 1, bytes, bytes, bytes, bytes}; }
  static uint64_t bytes_of(const kbin_dma_args &d) {
    return d.shape.row_bytes * d.shape.rows * d.shape.planes;
  }
  kbin_dma_args ddr_transfer(const Act &a, kbin_ddr_ref home, bool onnx_layout, const Box &box,
                             uint64_t spm_offset, uint64_t pc, bool to_spm) const;
  kbin_dma_args exchange(const Act &a, unsigned from, unsigned to, const Box &box) const;
  uint64_t dma_cycles(uint64_t bytes, bool ddr) const;
  void push(unsigned c, const kbin_dma_args &d) {
    prog.streams[c].push_back(format::Record::make(KBIN_FN_DMA, d));
  }
  void wait(unsigned c) {
    prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{0, 0}));
  }
  // Bytes [f0, f1) (kPieceUnits) of the slice; `issuer`: the multicasting cluster (-1: the
  // layer schedule's rotation).
  void emit_slice_load(size_t s, size_t j, uint64_t spm, bool notify, std::vector<uint64_t> &ddr,
                       uint32_t f0 = 0, uint32_t f1 = kPieceUnits, int issuer = -1);
  void emit_param_loads(size_t s, std::vector<uint64_t> &ddr);
  // Multicast parameter slots of op s: per slot, the clusters it goes to and (without an
  // issuer chosen by the pipeline) the cluster that multicasts it. Empty when each cluster
  // loads its own parameters.
  std::vector<std::pair<uint32_t, unsigned>> multicast_slots(size_t s) const;
  uint64_t slice_spm(const PlannedOp &op, size_t j) const;
  void end_step();
  std::vector<size_t> stream_sizes() const;

  // ---- schedule dump (schedule_dump.cpp) ----
  std::string schedule_text() const;
};

// ---- driver (compile.cpp) and batches (batch.cpp) ----
// The program of one image on `clusters` clusters (the fit loop).
Result<CompileOutput> compile_image(const Graph &graph, const CompileOptions &options,
                                    unsigned clusters);
// The C-cluster program of `batch` images laid out in `groups`, from the one-image program
// of each group size (`one`, keyed by cluster count).
Result<format::Program> combine_batch(const std::map<unsigned, const format::Program *> &one,
                                      unsigned total_clusters,
                                      const std::vector<BatchReport::Group> &groups, int64_t batch);
// Compiles the candidate layouts of a batch (CompileOptions::batch_split) with
// `compile_image` and keeps the one predicted fastest; CompileOutput::batch says why.
Result<CompileOutput>
compile_batch(const Graph &graph, const CompileOptions &options, unsigned clusters, int64_t batch,
              const std::function<Result<CompileOutput>(unsigned clusters)> &compile_image);

} // namespace kann::tiler
