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
// A depthwise transposed convolution reloads its weight slices for every band of rows it is
// tiled into: its weights (small next to its activations) are sliced only when the whole
// block cannot sit beside them (more than half the SPM).
bool keeps_weights_whole(const Compiler &c, const PlannedOp &op, const SpmBuffer &weights) {
  return op.transposed && op.groups > 1 && op.groups == c.acts[op.ins[0]].C && op.wslices <= 1 &&
         weights.size() <= c.opt.device.spm_bytes / 2;
}

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
    if (b.weights_of < 0 || b.size() <= capacity / 8 || c.group_of_op[size_t(b.weights_of)] >= 0)
      continue; // a layer group keeps its operators' parameters whole
    const PlannedOp &op = c.ops[b.weights_of];
    if (keeps_weights_whole(c, op, b))
      continue;
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
      if (c.computes_in_bands(op) && op.chunks < rows) {
        policy.chunks[op.node] = int(std::min<int64_t>(rows, op.chunks * 2));
        return true;
      }
    }
  }
  // Then stream large parameters in output-channel slices (no extra DDR traffic: a barrier
  // per slice at most), the largest first.
  for (int i : cands) {
    const SpmBuffer &b = c.buffers[i];
    if (b.weights_of < 0 || b.size() < c.opt.device.spm_bytes / 64 ||
        c.group_of_op[size_t(b.weights_of)] >= 0)
      continue;
    const PlannedOp &op = c.ops[b.weights_of];
    if (keeps_weights_whole(c, op, b))
      continue;
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
        if (policy.streamed.count(*t))
          continue;
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
        const PlannedOp *op = b.weights_of >= 0 ? &c->ops[b.weights_of] : nullptr;
        // A grouped convolution is sliced at whole groups (plan.cpp, weight_slices).
        const bool grouped = op && op->kind == Lowering::Conv && op->groups > 1 &&
                             op->groups != c->acts[op->ins[0]].C;
        const int64_t channels = grouped ? c->out_c(*op) / op->groups : kPanel;
        if (op && 2 * b.size() > options.device.spm_bytes / 2)
          return make_error(c->where(graph.nodes[op->node]) +
                            ": the parameters of its smallest output-channel slice (" +
                            std::to_string(channels) + " channels, " + std::to_string(b.size()) +
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
  auto build = [&](const CompileOutput &figures, bool exchange_splits, int64_t granule = kPanel,
                   bool tile_splits = false) -> Result<std::optional<CompileOutput>> {
    std::vector<uint64_t> compute;
    for (const OpReport &r : figures.ops)
      compute.push_back(r.compute_cycles);
    for (double headroom : {0.97, 0.85, 0.7, 0.5}) {
      auto c = std::make_unique<Compiler>(graph, options, clusters, policy);
      c->step_compute = compute;
      c->spm_headroom = headroom;
      c->exchange_splits = exchange_splits;
      c->early_exchanges = true;
      c->channel_granule = granule;
      c->tile_splits = tile_splits;
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
  // And with convolutions split by rows and channels at once where the native cost model
  // finds that faster (split_tiles.cpp): the same as a candidate above when none is.
  auto tiled = build(layer, true, kPanel, true);
  if (!tiled)
    return tiled.error();
  if (tiled.value()) {
    auto again = build(*tiled.value(), true, kPanel, true);
    if (auto r = keep(tiled); !r)
      return r.error();
    if (auto r = keep(again); !r)
      return r.error();
  }
  return best;
}

// Layer groups for the group schedule, from the layer schedule's plan (node lists). Seeds:
// the activations the layer schedule spilled, or with `any` (--schedule group) the largest
// activation a groupable operator produces. Each seed's producer and readers form a group,
// grown until every activation produced inside but by the last operator is read only inside,
// then by the next operator as long as the group's output takes more than `out_share` of the
// SPM on a cluster (a large output is what spilled). Overlapping groups merge.
std::vector<std::vector<int>> choose_groups(const Graph &graph, const CompileOptions &options,
                                            unsigned clusters, const Policy &layer,
                                            double out_share, bool any,
                                            std::vector<std::string> &why) {
  Policy probe_policy = layer;
  probe_policy.groups.clear();
  Compiler c(graph, options, clusters, probe_policy);
  if (!c.plan())
    return {};
  const size_t S = c.ops.size();
  std::vector<std::vector<size_t>> readers(c.acts.size());
  std::vector<int> producer(c.acts.size(), -1);
  for (size_t s = 0; s < S; ++s) {
    for (int i : c.ops[s].ins)
      readers[size_t(i)].push_back(s);
    producer[size_t(c.ops[s].out)] = producer[size_t(c.ops[s].out)] == -1 ? int(s) : -2;
  }
  std::set<int> io;
  for (int t : graph.inputs)
    io.insert(c.act_of.at(t));
  for (int t : graph.outputs)
    io.insert(c.act_of.at(t));
  auto ok = [&](size_t s) {
    PlannedOp op = c.ops[s]; // as the group plans it: split by rows, parameters whole
    if (op.kind == Lowering::Conv)
      op.split = "rows";
    op.wslices = 1;
    return producer[size_t(op.out)] >= 0 && c.group_member_ok(op);
  };
  const double capacity = double(options.device.spm_bytes);
  // Grows [lo, hi] until its intermediates are read only inside; false when it cannot.
  auto close = [&](size_t lo, size_t &hi) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = lo; s < hi; ++s) {
        if (io.count(c.ops[s].out) || readers[size_t(c.ops[s].out)].empty())
          return false;
        for (size_t r : readers[size_t(c.ops[s].out)])
          if (r > hi)
            hi = r, changed = true;
      }
    }
    if (hi - lo > 32)
      return false;
    uint64_t params = 0;
    for (size_t s = lo; s <= hi; ++s) {
      if (!ok(s))
        return false;
      for (size_t i = 1; i < graph.nodes[size_t(c.ops[s].node)].inputs.size(); ++i) {
        const int t = graph.nodes[size_t(c.ops[s].node)].inputs[i];
        if (t >= 0 && graph.tensors[size_t(t)].is_const)
          params += uint64_t(graph.tensors[size_t(t)].elements()) * c.acts[size_t(c.ops[s].out)].es;
      }
    }
    // Every operator's parameters stay in the SPM during the group.
    return double(params) <= capacity / 4;
  };
  std::vector<int> seeds;
  for (int t : layer.spilled)
    if (c.act_of.count(t))
      seeds.push_back(c.act_of.at(t));
  if (seeds.empty() && any) {
    int best = -1;
    for (size_t a = 0; a < c.acts.size(); ++a)
      if (producer[a] >= 0 && ok(size_t(producer[a])) && !readers[a].empty() && !io.count(int(a)) &&
          (best < 0 || c.acts[a].bytes() > c.acts[size_t(best)].bytes()))
        best = int(a);
    if (best >= 0)
      seeds.push_back(best);
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  std::map<std::pair<size_t, size_t>, std::string> seeded; // range -> what seeded it
  auto describe = [&](int a) {
    const bool spilled = layer.spilled.count(c.acts[size_t(a)].tensor) != 0;
    return "'" + graph.tensors[size_t(c.acts[size_t(a)].tensor)].name + "' (" +
           std::to_string(c.acts[size_t(a)].bytes()) + " B" +
           (spilled ? ", spilled by the layer schedule" : ", the largest activation") + ")";
  };
  for (int a : seeds) {
    if (producer[size_t(a)] < 0 || io.count(a) || readers[size_t(a)].empty())
      continue;
    const size_t lo = size_t(producer[size_t(a)]);
    size_t hi = *std::max_element(readers[size_t(a)].begin(), readers[size_t(a)].end());
    if (!close(lo, hi))
      continue;
    // A large output would take the SPM the group saved: take its readers in too.
    while (hi + 1 < S &&
           double(c.acts[size_t(c.ops[hi].out)].bytes()) / clusters > out_share * capacity) {
      size_t next = hi + 1;
      if (!close(lo, next))
        break;
      hi = next;
    }
    ranges.push_back({lo, hi});
    std::string &w = seeded[{lo, hi}];
    w += (w.empty() ? "" : ", ") + describe(a);
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<size_t, size_t>> merged;
  std::vector<std::string> merged_why;
  for (auto r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second) {
      size_t hi = std::max(merged.back().second, r.second);
      if (close(merged.back().first, hi)) {
        merged.back().second = hi;
        merged_why.back() += ", " + seeded[r];
      }
      continue;
    }
    merged.push_back(r);
    merged_why.push_back(seeded[r]);
  }
  why.clear();
  for (const std::string &w : merged_why) {
    char share[64];
    std::snprintf(share, sizeof share, "; grown while its output took over %.0f %% of the SPM",
                  out_share * 100.0);
    why.push_back("seeded by " + w + share);
  }
  std::vector<std::vector<int>> groups;
  for (auto [lo, hi] : merged) {
    std::vector<int> nodes;
    for (size_t s = lo; s <= hi; ++s)
      nodes.push_back(c.ops[s].node);
    groups.push_back(nodes);
  }
  return groups;
}

// The group schedule: the layer schedule's policy with layer groups (choose_groups; two
// thresholds for growing a group's output), each group's intermediates taken back on chip,
// its bands first sized so that one band of its intermediates takes an eighth of the SPM
// (the fit loop cuts more). The fewest predicted cycles kept; nothing when no group applies.
Result<std::optional<CompileOutput>> compile_groups(const Graph &graph,
                                                    const CompileOptions &options,
                                                    unsigned clusters, const Policy &layer,
                                                    bool any, Policy &best_policy) {
  std::optional<CompileOutput> best;
  std::set<std::vector<std::vector<int>>> tried;
  for (double share : {0.5, 0.25}) {
    std::vector<std::string> why;
    auto groups = choose_groups(graph, options, clusters, layer, share, any, why);
    if (groups.empty() || !tried.insert(groups).second)
      continue;
    Policy p = layer;
    p.groups = groups;
    p.group_why = why;
    Compiler probe(graph, options, clusters, p);
    if (!probe.plan())
      continue;
    for (const GroupPlan &gp : probe.groups) {
      uint64_t inner = 0;
      for (int a : gp.inner)
        inner += probe.acts[size_t(a)].bytes();
      for (size_t s = gp.first; s <= gp.last; ++s) {
        const int node = probe.ops[s].node;
        p.chunks.erase(node);
        p.wslices.erase(node);
        p.spilled.erase(graph.nodes[size_t(node)].outputs[0]);
      }
      const uint64_t per_band = std::max<uint64_t>(1, options.device.spm_bytes / 8);
      int bands = 1;
      while (uint64_t(bands) * per_band < inner / clusters && bands < 1024)
        bands *= 2;
      p.chunks[probe.ops[gp.last].node] = bands;
    }
    auto built = compile_layer(graph, options, clusters, p);
    if (std::getenv("KANN_DEBUG_GROUPS")) {
      for (const auto &nodes : groups) {
        std::fprintf(stderr, "group (share %.2f):", share);
        for (int nd : nodes)
          std::fprintf(stderr, " %s", graph.nodes[size_t(nd)].name.c_str());
        std::fprintf(stderr, "\n");
      }
      std::fprintf(stderr, "  -> %s\n",
                   built ? std::to_string(built.value().total_cycles).c_str()
                         : built.error().message.c_str());
    }
    if (!built)
      continue; // the groups do not fit: not a candidate
    if (!best || built.value().total_cycles < best->total_cycles) {
      best = std::move(built.value());
      best_policy = p;
    }
  }
  return best;
}

// The network inputs streamed (software pipelining of the prologue): an input left in DDR
// and the first operators reading it (its conversion and the convolution after it, or the
// convolution alone) as a layer group, so that each cluster computes its first band as soon
// as that band's rows are in (all bands' loads are issued at the start: loads_upfront in
// group.cpp), instead of every cluster waiting for its whole input in the prologue (the DDR
// serves the clusters' loads one after the other). With the pipeline schedule's parameter
// pieces when those are faster. Nothing when no such group plans.
Result<std::optional<CompileOutput>> compile_input_stream(const Graph &graph,
                                                          const CompileOptions &options,
                                                          unsigned clusters, const Policy &layer) {
  // `layer`: the base policy (the layer schedule's, or the group schedule's with its groups).
  Compiler probe(graph, options, clusters, layer);
  if (!probe.plan() || probe.ops.empty())
    return std::optional<CompileOutput>();
  Policy p = layer;
  for (int t : graph.inputs) {
    const int a = probe.act_of.at(t);
    std::vector<size_t> readers;
    for (size_t s = 0; s < probe.ops.size(); ++s)
      if (std::count(probe.ops[s].ins.begin(), probe.ops[s].ins.end(), a))
        readers.push_back(s);
    if (readers.size() != 1 || !probe.group_member_ok(probe.ops[readers[0]]))
      continue;
    size_t last = readers[0];
    // A conversion's only reader joins it: the converted input never needs a whole buffer.
    if (probe.ops[last].kind == Lowering::Convert && last + 1 < probe.ops.size()) {
      const int y = probe.ops[last].out;
      size_t uses = 0;
      for (const PlannedOp &op : probe.ops)
        uses += size_t(std::count(op.ins.begin(), op.ins.end(), y));
      const PlannedOp &next = probe.ops[last + 1];
      if (uses == 1 && std::count(next.ins.begin(), next.ins.end(), y) &&
          probe.group_member_ok(next))
        ++last;
    }
    std::vector<int> nodes;
    for (size_t s = readers[0]; s <= last; ++s)
      nodes.push_back(probe.ops[s].node);
    bool taken = false; // by a group of the base policy
    for (const auto &group : layer.groups)
      for (int node : nodes)
        taken = taken || std::count(group.begin(), group.end(), node) > 0;
    if (taken)
      continue;
    p.spilled.insert(t);
    p.streamed.insert(t);
    p.groups.push_back(nodes);
    p.group_why.push_back("the network input '" + graph.tensors[size_t(t)].name +
                          "' streams from DDR band by band while the first operators compute");
  }
  if (p.groups.size() == layer.groups.size())
    return std::optional<CompileOutput>();
  const size_t added = layer.groups.size(); // the input groups follow the base's
  std::optional<CompileOutput> best;
  for (int bands : {4, 8}) {
    Policy q = p;
    for (size_t i = added; i < q.groups.size(); ++i) {
      for (int node : q.groups[i]) {
        q.chunks.erase(node);
        q.wslices.erase(node);
      }
      q.chunks[q.groups[i].back()] = bands;
    }
    auto built = compile_layer(graph, options, clusters, q);
    if (!built)
      continue; // the bands do not fit: not a candidate
    auto piped = compile_pipeline(graph, options, clusters, q, built.value());
    if (!piped)
      return piped.error();
    CompileOutput *o = &built.value();
    if (piped.value() && piped.value()->total_cycles < o->total_cycles)
      o = &*piped.value();
    if (!best || o->total_cycles < best->total_cycles)
      best = std::move(*o);
  }
  return best;
}

// One image: the schedule asked for, or with "auto" the one predicted fastest among layer,
// pipeline and (when the layer schedule spills) group; the layer schedule on a tie or when
// the others' buffers do not fit.
Result<CompileOutput> compile_image(const Graph &graph, const CompileOptions &options,
                                    unsigned clusters) {
  const std::string &want = options.schedule;
  if (want != "layer" && want != "pipeline" && want != "group" && want != "auto")
    return make_error("schedule '" + want + "' is not supported (layer, pipeline, group, auto)");
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
  std::optional<CompileOutput> piped, grouped;
  if (want != "group") {
    auto r = compile_pipeline(graph, options, clusters, policy, l);
    if (!r)
      return r.error();
    piped = std::move(r.value());
  }
  bool group_pipelined = false;
  Policy group_policy; // the grouped candidate's, when there is one
  if (want == "group" || (want == "auto" && !l.spilled.empty())) {
    auto r = compile_groups(graph, options, clusters, policy, want == "group", group_policy);
    if (!r)
      return r.error();
    grouped = std::move(r.value());
    // The pipeline schedule's parameter pieces on the groups' layout (group.cpp emits the
    // pieces of the group's parameter-only steps): kept when predicted faster.
    if (grouped) {
      auto gp = compile_pipeline(graph, options, clusters, group_policy, *grouped);
      if (!gp)
        return gp.error();
      if (gp.value() && gp.value()->total_cycles < grouped->total_cycles) {
        grouped = std::move(gp.value());
        group_pipelined = true;
      }
    }
  }
  // The input streamed by a group of the first operators (with or without other groups):
  // with --schedule group only. `auto` does not build it: the binaries it gives cost the host
  // that simulates the device 10-16 % more time (MobileNetV2 FP16 5 clusters, 2 host
  // threads, alternating runs; the native calls take the same time, what else does was not
  // found), against 2.4 % of modeled time saved (docs/performance.md, session 15).
  bool input_streamed = false;
  if (want == "group") {
    auto r = compile_input_stream(graph, options, clusters, grouped ? group_policy : policy);
    if (!r)
      return r.error();
    if (r.value() && (!grouped || r.value()->total_cycles < grouped->total_cycles)) {
      grouped = std::move(r.value());
      input_streamed = true;
      group_pipelined = false;
    }
  }
  ScheduleReport figures = l.schedule_choice;
  std::string text = std::to_string(l.total_cycles) + " layer";
  if (piped) {
    figures.pipeline_cycles = piped->total_cycles;
    text += ", " + std::to_string(piped->total_cycles) + " pipeline";
  }
  if (grouped) {
    figures.group_cycles = grouped->total_cycles;
    text += ", " + std::to_string(grouped->total_cycles) + " group" +
            (input_streamed    ? " (the input streamed)"
             : group_pipelined ? " (parameters pipelined)"
                               : "");
  }
  CompileOutput *chosen = &l;
  std::string why;
  if (want == "pipeline") {
    if (piped)
      chosen = &*piped, why = "--schedule pipeline: predicted " + text;
    else
      why = "the pipeline's parameter buffers do not fit the SPM: layer";
  } else if (want == "group") {
    if (grouped)
      chosen = &*grouped, why = "--schedule group: predicted " + text;
    else
      why = "no layer group applies or fits: layer";
  } else {
    for (CompileOutput *o : {piped ? &*piped : nullptr, grouped ? &*grouped : nullptr})
      if (o && o->total_cycles < chosen->total_cycles)
        chosen = o;
    why = "auto, the fewest cycles: predicted " + text;
  }
  figures.chosen = chosen == &l                            ? "layer"
                   : chosen == (piped ? &*piped : nullptr) ? "pipeline"
                                                           : "group";
  figures.why = why;
  chosen->schedule_choice = figures;
  chosen->program.report_json = chosen->report_json();
  return std::move(*chosen);
}
} // namespace kann::tiler

namespace kann {

using namespace kann::tiler;

Result<CompileOutput> compile_graph(const Graph &graph, const CompileOptions &options) {
  if (auto r = options.device.validate(); !r)
    return r.error();
  const PackCache::Scope packed_once; // for the schedule candidates of this graph
  const unsigned clusters = options.clusters ? options.clusters : options.device.clusters;
  if (clusters == 0 || clusters > options.device.clusters || clusters > KBIN_MAX_CLUSTERS)
    return make_error("--clusters " + std::to_string(clusters) + " out of range 1.." +
                      std::to_string(std::min(options.device.clusters, KBIN_MAX_CLUSTERS)) +
                      " for device '" + options.device.name + "'");
  Graph converted;
  const Graph *input = &graph;
  if (!options.fp32_operators.empty() && options.precision != "fp16")
    return make_error("float32 operators in a mixed-precision binary need --precision fp16");
  for (const std::string &name : options.fp32_operators)
    if (std::none_of(graph.nodes.begin(), graph.nodes.end(),
                     [&](const Node &n) { return !n.dead && n.name == name; }))
      return make_error("float32 operator '" + name +
                        "' is not an operator of the optimized graph");
  if (options.precision == "fp16") {
    converted = graph;
    passes::convert_to_fp16(converted, options.fp32_operators);
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
  if (options.fuse_residual_adds) {
    if (input != &converted)
      converted = graph;
    passes::fuse_residual_adds(converted);
    input = &converted;
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
