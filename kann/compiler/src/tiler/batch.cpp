// Batches (issue 14): N images of a network compiled for one image, laid out on the C
// clusters either sequentially (every image on all C clusters, one after the other) or in
// cluster groups (the clusters split into groups that each run whole images, one after the
// other, with a schedule compiled for the group's cluster count). Every candidate layout is
// built as a whole program and its modeled time predicted (kann/timing.h, an exact replay of
// the simulator); the fastest is kept.
//
// A group's streams are the one-image program of its size, repeated per image, with
//   - DDR: argument offsets moved to the image (arguments hold the N images back to back),
//     PARAMS to the blob of the group's size, SCRATCH to the group's own scratch area;
//   - clusters: multicast masks, exchange destinations and signal targets moved to the
//     group's first cluster, so a group never touches another group's SPM;
//   - signal waits: raised by the increments earlier images of the group posted (counters
//     only grow during a command);
//   - barriers: a BARRIER is over all clusters of the command, so inside a group that does
//     not span them it becomes a barrier of signals among the group's clusters (each posts
//     one to every other member, then waits for the count of this barrier; posted after the
//     WAIT_DMA that precedes every barrier, so the same data is visible after it), and
//     nothing on a one-cluster group.
#include "tiler/tiler.h"

#include <cstdio>
#include <memory>

#include "kann/timing.h"

namespace kann::tiler {

namespace {

// Signal counting a group's barriers: the last shared one (the emitter uses kWeightSignal,
// kSliceFreeSignal and the private kInputSignal).
constexpr uint32_t kGroupBarrierSignal = KBIN_FIRST_PRIVATE_SIGNAL - 1;
static_assert(kGroupBarrierSignal != kWeightSignal && kGroupBarrierSignal != kSliceFreeSignal);

using Group = BatchReport::Group;

// Increments one image's streams post to each (cluster, signal): notify signals of
// transfers (at every destination) and SIGNAL records.
std::map<std::pair<uint32_t, uint32_t>, uint64_t> posts_per_image(const format::Program &p) {
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> posts;
  for (uint32_t c = 0; c < p.streams.size(); ++c)
    for (const format::Record &r : p.streams[c]) {
      kbin_dma_args d;
      kbin_signal_args s;
      if (r.function_id == KBIN_FN_DMA && r.decode(d) && d.notify_signal >= 0) {
        const uint32_t sig = uint32_t(d.notify_signal);
        if (d.kind == KBIN_DMA_LOAD)
          posts[{c, sig}] += 1;
        else if (d.kind == KBIN_DMA_EXCHANGE)
          posts[{d.dst_cluster, sig}] += 1;
        else if (d.kind == KBIN_DMA_MULTICAST || d.kind == KBIN_DMA_EXCHANGE_MULTICAST)
          for (uint32_t t = 0; t < 32; ++t)
            if (d.cluster_mask >> t & 1u)
              posts[{t, sig}] += 1;
      } else if (r.function_id == KBIN_FN_SIGNAL && r.decode(s)) {
        posts[{s.cluster, s.signal}] += s.count;
      }
    }
  return posts;
}

std::string group_name(const std::vector<Group> &groups, unsigned total) {
  if (groups.size() == 1 && groups[0].clusters == total)
    return "sequential";
  // "clusters 1x5", "clusters 2x2+1": sizes of the groups that run images.
  std::vector<std::pair<unsigned, int>> runs;
  for (const Group &g : groups)
    if (!runs.empty() && runs.back().first == g.clusters)
      ++runs.back().second;
    else
      runs.push_back({g.clusters, 1});
  std::string s = "clusters ";
  for (size_t i = 0; i < runs.size(); ++i)
    s += (i ? "+" : "") +
         (runs[i].second > 1 ? std::to_string(runs[i].first) + "x" + std::to_string(runs[i].second)
                             : std::to_string(runs[i].first));
  return s;
}

} // namespace

// The C-cluster program of a batch from the one-image programs of each group size.
Result<format::Program> combine_batch(const std::map<unsigned, const format::Program *> &one,
                                      unsigned total_clusters, const std::vector<Group> &groups,
                                      int64_t batch) {
  const format::Program &first = *one.at(groups.at(0).clusters);
  format::Program p;
  p.cluster_count = total_clusters;
  p.pes_per_cluster = first.pes_per_cluster;
  p.spm_bytes = first.spm_bytes;
  p.arg_count = first.arg_count;
  p.version_minor = first.version_minor;
  p.preset = first.preset;
  p.tensors = first.tensors;
  std::vector<uint64_t> image_bytes(p.arg_count, 0);
  for (auto &t : p.tensors) {
    if (t.arg_index >= image_bytes.size() || t.dims.empty())
      return make_error("internal error: a batch argument without a descriptor");
    image_bytes[t.arg_index] = t.byte_size;
    t.dims[0] = uint64_t(batch);
    t.byte_size *= uint64_t(batch);
  }
  // One parameter blob per group size in use (their packing depends on the cluster count).
  std::map<unsigned, uint64_t> params_base;
  for (const Group &g : groups) {
    if (params_base.count(g.clusters))
      continue;
    const format::Program &q = *one.at(g.clusters);
    p.params.resize(align_up(p.params.size()));
    params_base[g.clusters] = p.params.size();
    p.params.insert(p.params.end(), q.params.begin(), q.params.end());
  }
  p.streams.assign(total_clusters, {});
  for (const Group &g : groups) {
    const format::Program &q = *one.at(g.clusters);
    if (q.cluster_count != g.clusters || q.arg_count != p.arg_count)
      return make_error("internal error: a group program of the wrong shape");
    p.spm_required = std::max(p.spm_required, q.spm_required);
    // Groups run at the same time: each has its own scratch area.
    const uint64_t scratch_base = align_up(p.scratch_size);
    if (q.scratch_size)
      p.scratch_size = scratch_base + q.scratch_size;
    const auto posts = posts_per_image(q);
    const bool spans_all = g.clusters == total_clusters;
    for (uint32_t c = 0; c < g.clusters; ++c) {
      std::vector<format::Record> &out = p.streams[g.first_cluster + c];
      uint64_t barriers = 0;
      for (size_t i = 0; i < g.images.size(); ++i) {
        const uint64_t image = uint64_t(g.images[i]);
        for (format::Record r : q.streams[c]) {
          kbin_dma_args d;
          kbin_signal_args s;
          kbin_wait_signal_args w;
          if (r.function_id == KBIN_FN_DMA && r.decode(d)) {
            if (d.ddr.space == KBIN_DDR_ARG)
              d.ddr.offset += image * image_bytes.at(d.ddr.arg_index);
            else if (d.ddr.space == KBIN_DDR_PARAMS)
              d.ddr.offset += params_base.at(g.clusters);
            else if (d.ddr.space == KBIN_DDR_SCRATCH)
              d.ddr.offset += scratch_base;
            if (d.kind == KBIN_DMA_EXCHANGE)
              d.dst_cluster += g.first_cluster;
            d.cluster_mask <<= g.first_cluster;
            r = format::Record::make(KBIN_FN_DMA, d);
          } else if (r.function_id == KBIN_FN_SIGNAL && r.decode(s)) {
            s.cluster += g.first_cluster;
            r = format::Record::make(KBIN_FN_SIGNAL, s);
          } else if (r.function_id == KBIN_FN_WAIT_SIGNAL && r.decode(w)) {
            auto it = posts.find({c, w.signal});
            w.value += uint64_t(i) * (it == posts.end() ? 0 : it->second);
            r = format::Record::make(KBIN_FN_WAIT_SIGNAL, w);
          } else if (r.function_id == KBIN_FN_BARRIER && !spans_all) {
            ++barriers;
            for (uint32_t peer = 0; peer < g.clusters; ++peer)
              if (peer != c)
                out.push_back(
                    format::Record::make(KBIN_FN_SIGNAL, kbin_signal_args{g.first_cluster + peer,
                                                                          kGroupBarrierSignal, 1}));
            if (g.clusters > 1)
              out.push_back(format::Record::make(
                  KBIN_FN_WAIT_SIGNAL,
                  kbin_wait_signal_args{kGroupBarrierSignal, 0, barriers * (g.clusters - 1)}));
            continue;
          }
          out.push_back(std::move(r));
        }
      }
    }
  }
  return p;
}

Result<CompileOutput>
compile_batch(const Graph &graph, const CompileOptions &options, unsigned clusters, int64_t batch,
              const std::function<Result<CompileOutput>(unsigned clusters)> &compile_image) {
  const std::string &mode = options.batch_split;
  if (mode != "auto" && mode != "sequential" && mode != "clusters")
    return make_error("--batch-split " + mode + " is not supported (auto, sequential, clusters)");
  if (options.batch_group_clusters &&
      (mode != "clusters" || options.batch_group_clusters >= clusters))
    return make_error("--batch-split clusters:" + std::to_string(options.batch_group_clusters) +
                      ": groups of 1.." + std::to_string(clusters - 1) + " clusters of the " +
                      std::to_string(clusters));
  (void)graph;
  // One-image schedules per group size, compiled on demand.
  std::map<unsigned, Result<CompileOutput>> per_size;
  auto image_program = [&](unsigned g) -> const Result<CompileOutput> & {
    auto it = per_size.find(g);
    if (it == per_size.end())
      it = per_size.emplace(g, compile_image(g)).first;
    return it->second;
  };
  struct Candidate {
    std::vector<Group> groups;
    BatchReport::Candidate report;
    format::Program program;
  };
  std::vector<Candidate> candidates;
  auto all_images = [&] {
    std::vector<int64_t> images;
    for (int64_t b = 0; b < batch; ++b)
      images.push_back(b);
    return images;
  };
  if (mode != "clusters" || clusters == 1) {
    candidates.push_back({{{0, clusters, all_images()}}, {}, {}});
    candidates.back().report.name = group_name(candidates.back().groups, clusters);
  }
  if (mode != "sequential" && clusters > 1) {
    // Groups of g clusters (and one of the remaining C mod g), images dealt to the group
    // that would finish them first by the one-image prediction of its size.
    for (unsigned g = 1; g < clusters; ++g) {
      if (options.batch_group_clusters && g != options.batch_group_clusters)
        continue;
      std::vector<Group> groups;
      for (unsigned first = 0; first < clusters; first += g)
        groups.push_back({first, std::min(g, clusters - first), {}});
      std::vector<uint64_t> busy(groups.size(), 0);
      bool compiled = true;
      for (int64_t b = 0; b < batch && compiled; ++b) {
        size_t best = groups.size();
        uint64_t best_end = 0;
        for (size_t k = 0; k < groups.size(); ++k) {
          const auto &one = image_program(groups[k].clusters);
          if (!one)
            continue;
          const uint64_t end = busy[k] + one.value().total_cycles;
          if (best == groups.size() || end < best_end)
            best = k, best_end = end;
        }
        if (best == groups.size()) {
          compiled = false;
          break;
        }
        groups[best].images.push_back(b);
        busy[best] = best_end;
      }
      std::erase_if(groups, [](const Group &x) { return x.images.empty(); });
      if (!compiled) {
        candidates.push_back({{{0, g, {}}}, {}, {}});
        candidates.back().report.name =
            "clusters " + std::to_string(g) + "x" + std::to_string(clusters / g);
        candidates.back().report.error = image_program(g).error().message;
        continue;
      }
      const std::string name = group_name(groups, clusters);
      if (std::any_of(candidates.begin(), candidates.end(),
                      [&](const Candidate &x) { return x.report.name == name; }))
        continue; // e.g. groups of 4 and 1 on 5 clusters, already built for g = 1
      candidates.push_back({groups, {}, {}});
      candidates.back().report.name = name;
    }
  }
  const double ddr = program_ddr_bytes_per_cycle(options.device, clusters);
  int chosen = -1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Candidate &cand = candidates[i];
    if (!cand.report.error.empty())
      continue;
    cand.report.name = group_name(cand.groups, clusters);
    std::map<unsigned, const format::Program *> programs;
    for (const Group &g : cand.groups) {
      const auto &one = image_program(g.clusters);
      if (!one) {
        cand.report.error = one.error().message;
        break;
      }
      programs[g.clusters] = &one.value().program;
    }
    if (!cand.report.error.empty())
      continue;
    auto p = combine_batch(programs, clusters, cand.groups, batch);
    if (!p)
      return p.error();
    if (auto r = format::validate_program(p.value()); !r)
      return make_error("internal error: the batched program (" + cand.report.name +
                        ") is invalid: " + r.error().message);
    auto timing = predict_timing(p.value(), options.device, ddr);
    if (!timing)
      return make_error("internal error: batch " + cand.report.name + ": " +
                        timing.error().message);
    cand.report.cycles = timing.value().total_cycles;
    cand.program = std::move(p.value());
    if (chosen < 0 || cand.report.cycles < candidates[size_t(chosen)].report.cycles)
      chosen = int(i);
  }
  if (chosen < 0) {
    std::string why;
    for (const Candidate &c : candidates)
      why += (why.empty() ? "" : "; ") + c.report.name + ": " + c.report.error;
    return make_error("batch " + std::to_string(batch) + ": no layout compiles (" + why + ")");
  }
  Candidate &best = candidates[size_t(chosen)];
  // The report describes the one-image schedule of the largest group.
  unsigned largest = 0;
  for (const Group &g : best.groups)
    largest = std::max(largest, g.clusters);
  CompileOutput out = image_program(largest).value();
  uint64_t estimated = 0;
  for (const Group &g : best.groups)
    estimated = std::max(estimated, image_program(g.clusters).value().estimated_cycles *
                                        uint64_t(g.images.size()));
  out.program = std::move(best.program);
  out.total_cycles = best.report.cycles;
  out.estimated_cycles = estimated;
  BatchReport &r = out.batch;
  r.images = batch;
  r.split =
      best.groups.size() == 1 && best.groups[0].clusters == clusters ? "sequential" : "clusters";
  r.chosen = best.report.name;
  r.groups = best.groups;
  for (const Candidate &c : candidates)
    r.candidates.push_back(c.report);
  // Why: the rule, the winner's prediction and the runner-up's (or sequential's) for scale.
  char line[256];
  if (candidates.size() == 1) {
    std::snprintf(line, sizeof line, "--batch-split %s: the only candidate on %u cluster%s",
                  mode.c_str(), clusters, clusters == 1 ? "" : "s");
  } else {
    const Candidate *next = nullptr;
    for (const Candidate &c : candidates)
      if (&c != &best && c.report.error.empty() && (!next || c.report.cycles < next->report.cycles))
        next = &c;
    if (next)
      std::snprintf(line, sizeof line,
                    "--batch-split %s: the fewest predicted modeled cycles of %zu candidates, "
                    "%llu, %.1f %% below the next, %s (%llu)",
                    mode.c_str(), candidates.size(), (unsigned long long)best.report.cycles,
                    100.0 * (1.0 - double(best.report.cycles) / double(next->report.cycles)),
                    next->report.name.c_str(), (unsigned long long)next->report.cycles);
    else
      std::snprintf(line, sizeof line,
                    "--batch-split %s: the only one of %zu candidates that compiles", mode.c_str(),
                    candidates.size());
  }
  r.why = line;
  out.program.report_json = out.report_json();
  return out;
}

} // namespace kann::tiler
