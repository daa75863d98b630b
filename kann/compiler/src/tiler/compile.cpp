// The tile compiler's driver: tries the all-in-SPM layout first and, while it does not fit,
// relaxes the policy (tile operators in bands, stream parameters in slices, give up
// prefetching, spill activations to DDR); then packs and emits. A batch (more than one
// image) goes to batch.cpp, which lays the one-image programs out on the clusters.
// The phases live beside this file (see tiler.h).
#include "tiler/tiler.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/timing.h"

namespace kann::tiler {

// Adjusts the policy after a failed allocation: first tile the operator whose staging is
// the largest live buffer (cheap: more, smaller DMA), else spill the largest SPM-homed
// activation live at that point to DDR (costly: DDR traffic). False: nothing left to try.
bool relax(const Compiler &c, Policy &policy) {
  const uint64_t capacity = c.opt.device.spm_bytes;
  auto panels_of = [&](const PlannedOp &op) {
    int64_t widest = 0;
    for (const Box &x : op.out_box)
      widest = std::max(widest, (x.chans() + kPanel - 1) / kPanel);
    return widest;
  };
  // First, once for all operators: parameters above an eighth of the SPM stream in slices
  // of at most that (two slices live at a time), leaving the SPM to activations.
  bool sliced = false;
  for (const SpmBuffer &b : c.buffers) {
    if (b.weights_of < 0 || b.size() <= capacity / 8)
      continue;
    const PlannedOp &op = c.ops[b.weights_of];
    const int64_t want = int64_t(
        std::min<uint64_t>(uint64_t(panels_of(op)), op.wslices * (b.size() * 8 / capacity + 1)));
    if (want > op.wslices) {
      policy.wslices[op.node] = int(want);
      sliced = true;
    }
  }
  if (sliced)
    return true;
  std::vector<int> cands = c.failure.candidates;
  std::sort(cands.begin(), cands.end(),
            [&](int a, int b) { return c.buffers[a].size() > c.buffers[b].size(); });
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.op >= 0) {
      const PlannedOp &op = c.ops[b.op];
      int64_t rows = 0;
      for (const Box &x : op.out_box)
        rows = std::max(rows, x.rows());
      const bool row_split = op.kind == Lowering::Conv || op.kind == Lowering::Pool ||
                             op.kind == Lowering::Concat || op.kind == Lowering::Resize ||
                             ((op.kind == Lowering::Eltwise || op.kind == Lowering::ScaleShift ||
                               op.kind == Lowering::Activation || op.kind == Lowering::Math ||
                               op.kind == Lowering::Softmax || op.kind == Lowering::Convert) &&
                              op.split == "rows");
      if (row_split && op.chunks < rows) {
        policy.chunks[op.node] = int(std::min<int64_t>(rows, op.chunks * 2));
        return true;
      }
    }
  }
  // Then stream large parameters in output-channel slices (no extra DDR traffic: a barrier
  // per slice at most), the largest first.
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.weights_of < 0 || b.size() < c.opt.device.spm_bytes / 64)
      continue;
    const PlannedOp &op = c.ops[b.weights_of];
    const int64_t widest = panels_of(op);
    // An operator streaming DDR-homed operands reloads them per slice: not for small weights.
    const bool streams = op.stage_out >= 0 || std::any_of(op.stage_in.begin(), op.stage_in.end(),
                                                          [](int stage) { return stage >= 0; });
    if (op.wslices < widest && !streams) {
      policy.wslices[op.node] = int(std::min<int64_t>(widest, std::max(4, op.wslices * 2)));
      return true;
    }
  }
  // Then give up double buffering of the largest prefetched parameters.
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.prefetched >= 0 && !policy.no_prefetch.count(c.ops[b.prefetched].node)) {
      policy.no_prefetch.insert(c.ops[b.prefetched].node);
      return true;
    }
  }
  // Last resort: spill an activation to DDR. When steps need more bytes than the SPM, the
  // one that removes the most of that excess per byte spilled (per byte of DDR traffic):
  // often a long-lived skip connection rather than the largest tensor of one step.
  std::vector<uint64_t> excess;
  for (const SpmBuffer &b : c.buffers) {
    if (excess.size() <= size_t(b.last))
      excess.resize(size_t(b.last) + 1, 0);
    for (int t = b.first; t <= b.last; ++t)
      excess[size_t(t)] += align_up(b.size());
  }
  for (uint64_t &e : excess)
    e = e > capacity ? e - capacity : 0;
  int best = -1;
  double best_score = -1.0;
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.act < 0 || policy.spilled.count(c.acts[b.act].tensor) || b.size() == 0)
      continue;
    double relieved = 0.0;
    for (int t = b.first; t <= b.last; ++t)
      relieved += double(std::min(b.size(), excess[size_t(t)]));
    const double score = relieved / double(b.size());
    if (score > best_score + 1e-9 ||
        (std::fabs(score - best_score) <= 1e-9 && b.size() > c.buffers[best].size()))
      best = i, best_score = score;
  }
  if (best < 0)
    return false;
  policy.spilled.insert(c.acts[c.buffers[best].act].tensor);
  return true;
}

// One image on `clusters` clusters in the layer schedule: tries the all-in-SPM layout first;
// when it does not fit, tiles operators inside the clusters and, as a last resort, spills
// activations to DDR. `policy` ends as the one that fitted.
Result<CompileOutput> compile_layer(const Graph &graph, const CompileOptions &options,
                                    unsigned clusters, Policy &policy) {
  for (int attempt = 0; attempt < 400; ++attempt) {
    if (options.progress)
      options.progress("fitting the SPM", size_t(attempt), 0);
    auto c = std::make_unique<Compiler>(graph, options, clusters, policy);
    auto fits = c->layout();
    if (!fits)
      return fits.error();
    if (fits.value()) {
      // Spills were chosen one at a time while the SPM was short: one chosen early may have
      // become unnecessary after later ones. Bring each back on chip if it still fits.
      // (A Compiler keeps a reference to `policy`: it is edited in place and restored.)
      const std::set<int> spilled = policy.spilled;
      for (auto t = spilled.rbegin(); t != spilled.rend(); ++t) {
        const Policy kept = policy;
        policy.spilled.erase(*t);
        auto trial = std::make_unique<Compiler>(graph, options, clusters, policy);
        auto trial_fits = trial->layout();
        if (trial_fits && trial_fits.value())
          c = std::move(trial);
        else
          policy = kept;
      }
      auto done = c->finish();
      if (!done)
        return done.error();
      return done;
    }
    if (std::getenv("KANN_DEBUG_RELAX")) {
      std::fprintf(stderr, "relax %d: %s\n", attempt, c->failure.message.c_str());
      if (std::atoi(std::getenv("KANN_DEBUG_RELAX")) > 1)
        for (int i : c->failure.candidates)
          std::fprintf(stderr, "   %-70s %9llu  %d-%d\n", c->buffers[i].name.c_str(),
                       (unsigned long long)c->buffers[i].size(), c->buffers[i].first,
                       c->buffers[i].last);
    }
    if (!relax(*c, policy)) {
      // Parameters are sliced down to one panel of output channels, two slices live.
      for (int i : c->failure.candidates) {
        const SpmBuffer &b = c->buffers[i];
        if (b.weights_of >= 0 && 2 * b.size() > options.device.spm_bytes / 2)
          return make_error(c->where(graph.nodes[c->ops[b.weights_of].node]) +
                            ": the parameters of its smallest output-channel slice (" +
                            std::to_string(kPanel) + " channels, " + std::to_string(b.size()) +
                            " B, double-buffered) leave too little of the " +
                            std::to_string(options.device.spm_bytes) + " B SPM");
      }
      return make_error(c->failure.message + ", even with every activation in DDR and " +
                        "operators tiled by rows");
    }
  }
  return make_error("SPM allocation did not converge");
}

// The pipeline schedule on the layer schedule's policy and compute figures: parameter
// pieces may take up to a share of the SPM; when that fragments the placement, a smaller
// share is tried. Nothing (an empty result) when no share fits.
Result<std::optional<CompileOutput>> compile_pipeline(const Graph &graph,
                                                      const CompileOptions &options,
                                                      unsigned clusters, const Policy &policy,
                                                      const CompileOutput &layer) {
  std::set<std::string> built;
  auto build = [&](const CompileOutput &figures, bool exchange_splits,
                   int64_t granule = kPanel) -> Result<std::optional<CompileOutput>> {
    std::vector<uint64_t> compute;
    for (const OpReport &r : figures.ops)
      compute.push_back(r.compute_cycles);
    for (double headroom : {0.97, 0.85, 0.7, 0.5}) {
      auto c = std::make_unique<Compiler>(graph, options, clusters, policy);
      c->step_compute = compute;
      c->spm_headroom = headroom;
      c->exchange_splits = exchange_splits;
      c->channel_granule = granule;
      auto fits = c->layout();
      if (!fits)
        return fits.error();
      if (!fits.value())
        continue;
      if (!built.insert(c->layout_signature()).second)
        return std::optional<CompileOutput>(); // the same as a candidate built already
      auto done = c->finish();
      if (!done)
        return done.error();
      return std::optional<CompileOutput>(std::move(done.value()));
    }
    return std::optional<CompileOutput>();
  };
  // Candidates: the layer schedule's splits, and splits chosen with their exchanges counted,
  // with channel slices in whole 16-channel panels or in 8-channel halves (a half panel pays
  // padding in the matrix engine, but balances 512 channels over 5 clusters as 104 instead
  // of 112); the latter change some operators' compute, so their pieces are planned once
  // more on their own figures. The fastest by the replay is kept.
  std::optional<CompileOutput> best;
  auto keep = [&](Result<std::optional<CompileOutput>> &r) -> Result<void> {
    if (!r)
      return r.error();
    if (r.value() && (!best || r.value()->total_cycles < best->total_cycles))
      best = std::move(r.value());
    return {};
  };
  auto plain = build(layer, false);
  if (auto r = keep(plain); !r)
    return r.error();
  for (int64_t granule : {kPanel, kPanel / 2}) {
    auto exchanged = build(layer, true, granule);
    if (!exchanged)
      return exchanged.error();
    if (!exchanged.value())
      continue;
    auto again = build(*exchanged.value(), true, granule);
    if (auto r = keep(exchanged); !r)
      return r.error();
    if (auto r = keep(again); !r)
      return r.error();
  }
  return best;
}

// One image: the schedule asked for, or with "auto" the one predicted faster (the layer
// schedule on a tie or when the pipeline's buffers do not fit).
Result<CompileOutput> compile_image(const Graph &graph, const CompileOptions &options,
                                    unsigned clusters) {
  const std::string &want = options.schedule;
  if (want != "layer" && want != "pipeline" && want != "auto")
    return make_error("schedule '" + want + "' is not supported (layer, pipeline, auto)");
  Policy policy;
  auto layer = compile_layer(graph, options, clusters, policy);
  if (!layer)
    return layer.error();
  CompileOutput &l = layer.value();
  l.schedule_choice.chosen = "layer";
  l.schedule_choice.layer_cycles = l.total_cycles;
  if (want == "layer") {
    l.schedule_choice.why = "--schedule layer";
    l.program.report_json = l.report_json();
    return layer;
  }
  auto piped = compile_pipeline(graph, options, clusters, policy, l);
  if (!piped)
    return piped.error();
  if (!piped.value()) {
    l.schedule_choice.why = "the pipeline's parameter buffers do not fit the SPM: layer";
    l.program.report_json = l.report_json();
    return layer;
  }
  CompileOutput &p = *piped.value();
  p.schedule_choice.chosen = "pipeline";
  p.schedule_choice.layer_cycles = l.total_cycles;
  p.schedule_choice.pipeline_cycles = p.total_cycles;
  l.schedule_choice.pipeline_cycles = p.total_cycles;
  const std::string figures = "predicted " + std::to_string(p.total_cycles) + " cycles pipeline, " +
                              std::to_string(l.total_cycles) + " layer";
  CompileOutput &chosen = want == "pipeline" || p.total_cycles < l.total_cycles ? p : l;
  chosen.schedule_choice.why =
      (want == "pipeline" ? "--schedule pipeline: " : "auto, the fewer cycles: ") + figures;
  chosen.program.report_json = chosen.report_json();
  return std::move(chosen);
}
} // namespace kann::tiler

namespace kann {

using namespace kann::tiler;

Result<CompileOutput> compile_graph(const Graph &graph, const CompileOptions &options) {
  if (auto r = options.device.validate(); !r)
    return r.error();
  const unsigned clusters = options.clusters ? options.clusters : options.device.clusters;
  if (clusters == 0 || clusters > options.device.clusters || clusters > KBIN_MAX_CLUSTERS)
    return make_error("--clusters " + std::to_string(clusters) + " out of range 1.." +
                      std::to_string(std::min(options.device.clusters, KBIN_MAX_CLUSTERS)) +
                      " for device '" + options.device.name + "'");
  Graph converted;
  const Graph *input = &graph;
  if (options.precision == "fp16") {
    converted = graph;
    passes::convert_to_fp16(converted);
    input = &converted;
  } else if (options.precision == "int8") {
    // INT8 kernels come from the graph (QDQ / QLinear models, or quantize::quantize_int8 on a
    // calibrated float model): a float graph here has not been quantized.
    if (std::none_of(graph.nodes.begin(), graph.nodes.end(),
                     [](const Node &n) { return !n.dead && n.ints.count("int8"); }))
      return make_error("--precision int8: the model is float; calibration data is needed to "
                        "quantize it (kann compile --calibration inputs.npy)");
  } else if (options.precision != "fp32") {
    return make_error("--precision " + options.precision + " is not supported (fp32, fp16, int8)");
  }
  int64_t batch = input->batch;
  if (options.batch > 0) {
    if (input->whole_tensors && options.batch > 1)
      return make_error("--batch " + std::to_string(options.batch) +
                        ": the model is compiled as whole tensors (its first dimension is no "
                        "batch of images: inputs whose first dimensions differ, or operators "
                        "along axis 0)");
    if (input->batch > 1 && options.batch != input->batch)
      return make_error("--batch " + std::to_string(options.batch) +
                        " contradicts the model's static batch " + std::to_string(input->batch) +
                        " (export it with a symbolic or batch-1 first dimension)");
    batch = options.batch;
  }
  if (batch <= 1)
    return compile_image(*input, options, clusters);
  return compile_batch(*input, options, clusters, batch, [&](unsigned group_clusters) {
    return compile_image(*input, options, group_clusters);
  });
}

Result<CompileOutput> compile_onnx_file(const std::string &path, const CompileOptions &options) {
  auto g = import_onnx_file(path);
  if (!g)
    return g.error();
  if (auto r = passes::optimize(g.value()); !r)
    return r.error();
  return compile_graph(g.value(), options);
}

} // namespace kann
