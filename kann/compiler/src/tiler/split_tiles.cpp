// Convolutions split by rows and channels at once ("rows x channels").
//
// A 1-D split leaves the PEs' rounds of work units unbalanced where the output is small: 26
// rows over 5 clusters give the busiest one 6 rows (5.2 on average); 512 channels in
// 16-channel panels give it 7 panels (6.4). Here the output channels are cut into ranges,
// each computed by a group of clusters that split its rows, so that every cluster's box fills
// whole rounds of its PEs. A range's clusters read the same parameters: they are packed once
// and multicast to the group (PlannedOp::param_masks), so every parameter byte still crosses
// the DDR once, as in the row and channel splits.
//
// The split is chosen by the native cost model (the slowest cluster's call cycles, the
// number `kann compile` later replays) plus the NoC time of the exchanges each split causes:
// the input rows a cluster gathers from the producer's boxes, and the output rows it hands to
// a row-split consumer. It is kept only when it beats both 1-D splits by that measure; the
// pipeline candidate built with it is then judged by the replay like any other.
#include "tiler/tiler.h"

namespace kann::tiler {

namespace {
// Partitions of `total` clusters into non-increasing group sizes with at least two groups and
// at least one group of two clusters or more (all ones is the channel split, one group the
// row split).
void partitions(unsigned total, unsigned largest, std::vector<unsigned> &prefix,
                std::vector<std::vector<unsigned>> &out) {
  if (total == 0) {
    if (prefix.size() >= 2 && prefix.front() >= 2)
      out.push_back(prefix);
    return;
  }
  for (unsigned k = std::min(total, largest); k >= 1; --k) {
    prefix.push_back(k);
    partitions(total - k, k, prefix, out);
    prefix.pop_back();
  }
}
} // namespace

// Modeled cycles of the native call computing output box `ob` of a convolution.
uint64_t Compiler::conv_box_cycles(const PlannedOp &op, const Box &ob) const {
  mcl_conv_args a = conv_args_shape(op, need_for(op, 0, ob), ob);
  a.flags |= conv_table_flag(op, a);
  mcl_native_cost_breakdown cost{};
  mcl_native_cost_detail(op.conv_fn(), &a, opt.device.pes_per_cluster, &cost);
  return cost.total;
}

// Modeled cycles of the slowest cluster of a convolution split into `boxes`: its native call
// plus the NoC time of the input rows it gathers from other clusters (the producer's owned
// boxes) and of the output rows it hands to a consumer split by rows (each transfer pays the
// DMA latency; one cluster's engine serializes them).
uint64_t Compiler::split_cycles(const PlannedOp &op, const std::vector<Box> &boxes) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const auto &d = opt.device;
  const std::vector<Box> consumer_rows = split_rows(y.H, y.C);
  uint64_t worst = 0;
  for (unsigned c = 0; c < K; ++c) {
    const Box &ob = boxes[c];
    if (ob.empty())
      continue;
    const Box ib = need_for(op, 0, ob);
    double noc = 0.0;
    auto transfer = [&](double bytes) {
      if (bytes > 0)
        noc += double(d.dma_latency_cycles) + bytes / std::max(d.noc_bytes_per_cycle, 1e-9);
    };
    for (unsigned from = 0; from < K; ++from) {
      const Box part = intersect(ib, x.owned[from]);
      if (from != c && !part.empty())
        transfer(double(part.rows() * x.W * part.chans() * x.es));
    }
    for (unsigned to = 0; to < K; ++to) {
      const Box part = intersect(ob, consumer_rows[to]);
      if (to != c && !part.empty())
        transfer(double(part.rows() * y.W * part.chans() * y.es));
    }
    worst = std::max(worst, conv_box_cycles(op, ob) + uint64_t(noc));
  }
  return worst;
}

// Chooses a rows x channels split for a convolution when split_cycles says it is faster than
// both the row and the channel split; sets the boxes and the parameter groups.
bool Compiler::choose_tile_split(PlannedOp &op) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const int64_t yc = out_c(op);
  const int64_t panels = (yc + kPanel - 1) / kPanel;
  if (K < 3 || op.kind != Lowering::Conv || op.transposed || op.groups != 1 || y.H < 2 ||
      panels < 2 || out_off(op) != 0 || chan_offset.count(g.nodes[op.node].outputs[0]) ||
      x.bytes() > opt.device.spm_bytes / 4)
    return false;
  // Boxes of a group of k clusters computing channels [c0, c1): its rows in k bands.
  auto group_boxes = [&](unsigned k, int64_t c0, int64_t c1) {
    std::vector<Box> v(k);
    for (unsigned j = 0; j < k; ++j)
      v[j] = {y.H * j / k, y.H * (j + 1) / k, c0, c1};
    return v;
  };
  // Cycles of the slowest call of a group of k clusters on p panels, computed once per
  // (k, p): where the range starts does not change a call's cost.
  std::map<std::pair<unsigned, int64_t>, uint64_t> memo;
  auto group_cost = [&](unsigned k, int64_t p) {
    auto [it, fresh] = memo.try_emplace({k, p}, 0);
    if (fresh)
      for (const Box &b : group_boxes(k, 0, std::min(yc, p * kPanel)))
        if (!b.empty())
          it->second = std::max(it->second, conv_box_cycles(op, b));
    return it->second;
  };
  std::vector<std::vector<unsigned>> shapes;
  std::vector<unsigned> prefix;
  partitions(K, K, prefix, shapes);
  std::vector<Box> best;
  std::vector<uint32_t> best_masks;
  uint64_t best_cycles = std::min(split_cycles(op, split_rows(y.H, yc)),
                                  split_cycles(op, split_channels(y.H, yc, channel_granule)));
  const uint64_t one_d = best_cycles;
  for (const auto &shape : shapes) {
    if (shape.front() > y.H || shape.size() > size_t(panels))
      continue;
    // The fewest panels each group can take under a bound on the slowest call: bisect the
    // bound over the costs the groups can have.
    auto most_panels = [&](unsigned k, uint64_t bound) {
      int64_t p = 0;
      while (p < panels && group_cost(k, p + 1) <= bound)
        ++p;
      return p;
    };
    std::vector<uint64_t> bounds;
    for (unsigned k : shape)
      for (int64_t p = 1; p <= panels; ++p)
        bounds.push_back(group_cost(k, p));
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    size_t lo = 0, hi = bounds.size();
    while (lo < hi) { // the smallest bound under which the groups cover every panel
      const size_t mid = (lo + hi) / 2;
      int64_t covered = 0;
      for (unsigned k : shape)
        covered += most_panels(k, bounds[mid]);
      if (covered >= panels)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo == bounds.size())
      continue;
    // Panels per group: as many as the bound allows, the larger groups first, the last group
    // the rest; every group at least one panel.
    std::vector<int64_t> take(shape.size());
    int64_t left = panels;
    for (size_t q = 0; q < shape.size(); ++q) {
      const int64_t reserve = int64_t(shape.size() - q - 1);
      take[q] = q + 1 == shape.size()
                    ? left
                    : std::clamp<int64_t>(most_panels(shape[q], bounds[lo]), 1, left - reserve);
      left -= take[q];
    }
    std::vector<Box> boxes;
    std::vector<uint32_t> masks;
    int64_t c0 = 0;
    for (size_t q = 0; q < shape.size(); ++q) {
      const int64_t c1 = std::min(yc, (c0 / kPanel + take[q]) * kPanel);
      uint32_t mask = 0;
      for (const Box &b : group_boxes(shape[q], c0, c1)) {
        if (!b.empty())
          mask |= 1u << boxes.size();
        boxes.push_back(b);
      }
      masks.push_back(mask);
      c0 = c1;
    }
    const uint64_t cycles = split_cycles(op, boxes);
    if (cycles < best_cycles)
      best_cycles = cycles, best = boxes, best_masks = masks;
  }
  // Only a clear gain: a split that saves less than 2 % of the step is not worth the extra
  // exchanges the estimate may miss.
  if (best.empty() || double(best_cycles) > 0.98 * double(one_d))
    return false;
  op.split = "rows x channels";
  op.out_box = best;
  op.param_masks = best_masks;
  return true;
}

} // namespace kann::tiler
