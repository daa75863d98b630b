// The "pipeline" schedule: software pipelining of the parameter stream against compute.
//
// In the layer schedule the parameters of operator t load during step t (the step of
// operator t - 1), so a cheap step followed by a heavy operator (a residual Add before a
// 3x3 convolution, the global pooling before the classifier) waits for the DMA, and its
// compute hides nothing. Here each operator's first parameter slice is cut into pieces
// that load during as many earlier steps as needed, each step taking no more DDR bytes
// than its compute (the layer schedule's, slowest cluster) lets the shared DDR move, and
// the parameter buffer lives from its first piece on, as long as the SPM holds it.
// Planned backwards from the last operator, every piece as late as it fits (short
// lifetimes). What no earlier step can hide loads in step t as before.
//
// Only the timing of parameter DMAs changes: the compute records, their operands and the
// bytes they produce are those of the layer schedule (bit-identical outputs). Pieces land
// before the end of their step (every step ends with WAIT_DMA and a barrier), so operator
// t finds its parameters complete, as in the layer schedule.
#include "tiler/tiler.h"

#include "kann/timing.h"

#include <bit>

namespace kann::tiler {

namespace {
// Of a step's compute time, the share given to parameter pieces (the rest absorbs the DMA
// latency of each piece and the estimate's error).
constexpr double kDdrShare = 0.85;
// No piece smaller than this (each transfer pays the DMA latency), except a remainder.
constexpr uint64_t kMinPiece = 16 * 1024;
// How many steps ahead an operator's parameters may start loading.
constexpr int kWindow = 24;
} // namespace

// Bytes [lo, hi) of a slot of `bytes` bytes for piece bounds f0, f1 (in kPieceUnits),
// rounded to whole 64-byte lines.
uint64_t piece_bound(uint64_t bytes, uint32_t f) {
  if (f >= kPieceUnits)
    return bytes;
  return bytes * f / kPieceUnits / kAlign * kAlign;
}

void Compiler::plan_pipeline() {
  const size_t S = ops.size();
  pieces_at.assign(S + 1, {});
  const auto &dev = opt.device;
  const double ddr_bw = program_ddr_bytes_per_cycle(dev, K);
  // DDR bytes each step can move under its compute. Steps that stream operands, results or
  // parameter slices of their own, or load their own parameters, use the DDR themselves.
  std::vector<double> room(S + 1, 0.0);
  for (size_t s = 0; s < S && s < step_compute.size(); ++s) {
    const PlannedOp &op = ops[s];
    bool busy = op.stage_out >= 0 || op.params.buffer2 >= 0 || policy.no_prefetch.count(op.node);
    for (int st : op.stage_in)
      busy = busy || st >= 0;
    if (!busy)
      room[s + 1] = kDdrShare * double(step_compute[s]) * ddr_bw;
  }
  // One cluster's DMA engine moves at most the NoC link rate: a piece larger than what one
  // engine moves under the step's compute is cut further, so several clusters issue it.
  auto engine_bytes = [&](size_t step) {
    return step == 0 || step > step_compute.size()
               ? 0.0
               : kDdrShare * double(step_compute[step - 1]) * dev.noc_bytes_per_cycle;
  };
  const int steps = int(S) + 1;
  std::vector<uint64_t> pressure(size_t(steps) + 1, 0);
  for (const SpmBuffer &b : buffers)
    for (int t = b.first; t <= b.last && t <= steps; ++t)
      pressure[size_t(t)] += align_up(b.size());
  const uint64_t cap = uint64_t(spm_headroom * double(dev.spm_bytes));

  for (size_t t = S; t-- > 0;) {
    const PlannedOp &op = ops[t];
    if (op.params.buffer < 0 || policy.no_prefetch.count(op.node))
      continue;
    SpmBuffer &b = buffers[op.params.buffer];
    const bool shared = op.kind == Lowering::Conv && op.split == "rows";
    // DDR bytes of the first slice: one multicast, one per channel range (rows x channels),
    // or one load per cluster.
    uint64_t total = 0;
    if (!op.param_masks.empty())
      for (uint32_t mask : op.param_masks)
        total += mask ? b.bytes[unsigned(std::countr_zero(mask))] : 0;
    else
      for (unsigned c = 0; c < K; ++c)
        total = shared ? std::max(total, b.bytes[c]) : total + b.bytes[c];
    if (total == 0)
      continue;
    // Latest step first: (step, bytes) taken from each step's room.
    std::vector<std::pair<int, uint64_t>> taken;
    uint64_t left = total;
    const int latest = int(t); // the layer schedule's step for these parameters
    for (int u = latest; u >= 0 && u > latest - kWindow && left > 0; --u) {
      if (u < latest && pressure[size_t(u)] + align_up(b.size()) > cap)
        break; // the SPM has no room for the buffer this early
      const uint64_t fits = std::min<uint64_t>(left, uint64_t(std::max(0.0, room[size_t(u)])));
      if (fits < std::min(left, kMinPiece))
        continue;
      taken.push_back({u, fits});
      room[size_t(u)] -= double(fits);
      left -= fits;
    }
    if (left > 0) { // what no step hides: in the latest step, as the layer schedule does
      if (!taken.empty() && taken.front().first == latest)
        taken.front().second += left;
      else
        taken.insert(taken.begin(), {latest, left});
    }
    // Pieces in step order (earliest first) as fractions of every slot's bytes.
    std::sort(taken.begin(), taken.end());
    const int first = taken.front().first;
    for (int u = first; u < b.first; ++u)
      pressure[size_t(u)] += align_up(b.size());
    b.first = std::min(b.first, first);
    uint64_t done = 0;
    for (auto [u, bytes] : taken) {
      const double per_engine = std::max(engine_bytes(size_t(u)), double(kMinPiece));
      const uint64_t cuts =
          shared ? std::clamp<uint64_t>(uint64_t(std::ceil(double(bytes) / per_engine)), 1, K) : 1;
      for (uint64_t k = 0; k < cuts; ++k) {
        const uint64_t lo = done + bytes * k / cuts, hi = done + bytes * (k + 1) / cuts;
        ParamPiece p;
        p.op = int(t);
        p.f0 = uint32_t(lo * kPieceUnits / total);
        p.f1 = hi == total ? kPieceUnits : uint32_t(hi * kPieceUnits / total);
        if (p.f1 > p.f0)
          pieces_at[size_t(u)].push_back(p);
      }
      done += bytes;
    }
  }
}

// The split of a convolution in the pipeline schedule: as choose_channel_split (MACs of the
// largest band or slice), but with every exchange either split causes, as one cluster's DMA
// engine serializes them (a latency per transfer, then the NoC link): a channel split first
// gathers the input channels it reads from the row bands that produced them, then hands
// each row-split consumer all channels of its rows (K-1 transfers each way per cluster); a
// spatial split receives its halo rows from at most two neighbours. Once parameter loads
// hide behind compute, these exchanges are what is left between the steps of MobileNetV2's
// depthwise layers.
bool Compiler::channel_split_pays(const PlannedOp &op) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const int64_t yc = out_c(op);
  const bool depthwise = op.groups > 1 && op.groups == x.C && op.groups == yc;
  const auto &d = opt.device;
  const double macs_per_row = double(y.W) * yc * (x.C / op.groups) * op.kh * op.kw;
  const double rate = double(d.pes_per_cluster) * d.fp32_fmas_per_cycle;
  const double k = K, lat = d.dma_latency_cycles, link = d.noc_bytes_per_cycle;
  const double row_bytes = double(x.W) * x.C * x.es;
  // Was the input produced in channel slices (every cluster holds all rows of its channels)?
  bool by_channels = x.H > 1;
  for (const Box &b : x.owned)
    by_channels = by_channels && (b.empty() || (b.y0 == 0 && b.y1 == x.H && b.chans() < x.C));
  // Spatial: the largest band and its halo rows (from channel slices: all channels of the
  // band's rows, from every other cluster).
  const double band = std::ceil(double(y.H) / k);
  const double in_rows = std::min<double>(x.H, (band - 1) * op.sh + (op.kh - 1) * op.dh + 1);
  const double halo = std::max(0.0, in_rows - double(x.H) / k) * row_bytes;
  const double spatial = band * macs_per_row / rate +
                         (by_channels ? (k - 1) * lat + in_rows * row_bytes * (k - 1) / k / link
                                      : (halo > 0 ? 2 * lat + halo / link : 0.0));
  // Channels: the largest slice, the input gathered (a depthwise convolution on channel
  // slices already has its own), the output handed back by rows.
  // The largest slice as split_channels cuts it (in whole 16-channel panels 256 channels on
  // 5 clusters give 64, not 52).
  int64_t widest = 0;
  for (const Box &b : split_channels(y.H, yc, channel_granule))
    widest = std::max(widest, b.chans());
  const double slice = double(widest) / double(yc);
  const double gathered =
      depthwise && by_channels ? 0.0 : double(x.bytes()) * (depthwise ? slice : 1.0) * (k - 1) / k;
  const double handed = double(y.bytes()) * slice * (k - 1) / k;
  const double channel =
      double(y.H) * macs_per_row * slice / rate + 2 * (k - 1) * lat + (gathered + handed) / link;
  return channel < spatial;
}

// What a pipeline candidate's layout decided (splits, boxes, buffer lifetimes and offsets,
// pieces): candidates that decide the same are built once.
std::string Compiler::layout_signature() const {
  std::string sig;
  auto add = [&](int64_t v) { sig += std::to_string(v) + ','; };
  for (const PlannedOp &op : ops) {
    sig += op.split + ':';
    for (const Box &b : op.out_box)
      add(b.y0), add(b.y1), add(b.c0), add(b.c1);
  }
  for (const SpmBuffer &b : buffers)
    add(b.first), add(b.last), add(int64_t(b.offset));
  for (const auto &step : pieces_at) {
    sig += ';';
    for (const ParamPiece &p : step)
      add(p.op), add(p.f0), add(p.f1);
  }
  return sig;
}

// The pieces planned for `step`: a shared slice's piece is multicast by the cluster that
// has issued the fewest bytes in this step so far; per-cluster slices load on their own.
void Compiler::emit_pieces(size_t step, std::vector<uint64_t> &ddr) {
  if (step >= pieces_at.size())
    return;
  std::vector<uint64_t> issued(K, 0);
  for (const ParamPiece &p : pieces_at[step]) {
    const PlannedOp &op = ops[size_t(p.op)];
    if (op.params.buffer < 0)
      continue;
    int issuer = -1;
    if (op.params.shared) {
      issuer = 0;
      for (unsigned c = 1; c < K; ++c)
        if (issued[c] < issued[unsigned(issuer)])
          issuer = int(c);
    }
    const std::vector<uint64_t> before = ddr;
    emit_slice_load(size_t(p.op), 0, buffers[op.params.buffer].offset, false, ddr, p.f0, p.f1,
                    issuer);
    for (unsigned c = 0; c < K; ++c)
      issued[c] += ddr[c] - before[c];
  }
}

} // namespace kann::tiler
