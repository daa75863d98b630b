// Record emission: per-cluster streams, step by step (parameter prefetch, streamed operands,
// compute calls, SPM->SPM exchanges, output stores, barriers) and the per-step report.
#include "tiler/tiler.h"

#include "kann/passes.h"
#include "kann/timing.h"
#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

namespace kann::tiler {

// ---------------- emission ----------------
// A tile of activation `a` for `box` on cluster c: in its SPM buffer, or (DDR-homed) in
// the staging buffer `stage`, which holds exactly that box densely.
mcl_tile Compiler::tile_of(const Act &a, unsigned c, const Box &box, int stage) const {
  mcl_tile t{};
  uint64_t pc;
  if (a.in_ddr) {
    pc = box.chans();
    auto shift = stage_shift.find(stage); // a layer group's staging half (group.cpp)
    t.offset = uint32_t(buffers[stage].offset + (shift == stage_shift.end() ? 0 : shift->second));
  } else {
    // A layer group's intermediate: the band its buffer holds now (group.cpp).
    const Box &b = a.group >= 0 ? band_origin[size_t(&a - acts.data())][c] : a.buf[c];
    pc = b.chans();
    t.offset = uint32_t(buffers[a.buffer].offset +
                        (uint64_t(box.y0 - b.y0) * a.W * pc + uint64_t(box.c0 - b.c0)) * a.es);
  }
  t.h = uint32_t(box.rows());
  t.w = uint32_t(a.W);
  t.c = uint32_t(box.chans());
  t.row_stride = uint32_t(a.W * pc);
  t.pixel_stride = uint32_t(pc);
  t.channel_stride = 1;
  t.dtype = a.dtype;
  return t;
}

// Transfer of `box` between an activation's DDR home (or its network argument, for SPM
// homed inputs/outputs) and an SPM tile (offset, pixel stride pc in elements).
kbin_dma_args Compiler::ddr_transfer(const Act &a, kbin_ddr_ref home, bool onnx_layout,
                                     const Box &box, uint64_t spm_offset, uint64_t pc,
                                     bool to_spm) const {
  kbin_dma_args d = dma(to_spm ? KBIN_DMA_LOAD : KBIN_DMA_STORE);
  d.spm_offset = spm_offset;
  d.ddr = home;
  const uint64_t es = a.es, pixels = uint64_t(box.rows()) * a.W;
  kbin_dma_shape &s = d.shape;
  uint64_t ddr_row, ddr_plane, spm_row, spm_plane;
  if (onnx_layout) {
    d.ddr.offset += (uint64_t(box.c0) * a.H * a.W + uint64_t(box.y0) * a.W) * es;
    if (a.H * a.W == 1 || a.C == 1) { // channel-last and NCHW orders coincide
      s = linear((a.H * a.W == 1 ? uint64_t(box.chans()) : pixels) * es);
      return d;
    }
    // planes = channels, rows = pixels of one channel, row = one element.
    s.row_bytes = es, s.rows = pixels, s.planes = uint64_t(box.chans());
    ddr_row = es, ddr_plane = uint64_t(a.H) * a.W * es;
    spm_row = pc * es, spm_plane = es;
  } else {
    d.ddr.offset += (uint64_t(box.y0) * a.W * a.C + uint64_t(box.c0)) * es;
    s.row_bytes = uint64_t(box.chans()) * es, s.rows = uint64_t(a.W),
    s.planes = uint64_t(box.rows());
    ddr_row = uint64_t(a.C) * es, ddr_plane = uint64_t(a.W) * a.C * es;
    spm_row = pc * es, spm_plane = uint64_t(a.W) * pc * es;
    if (box.chans() == a.C && int64_t(pc) == a.C) { // whole rows: one contiguous block
      s = linear(pixels * a.C * es);
      return d;
    }
  }
  if (to_spm) {
    s.src_row_stride = ddr_row, s.src_plane_stride = ddr_plane;
    s.dst_row_stride = spm_row, s.dst_plane_stride = spm_plane;
  } else {
    s.src_row_stride = spm_row, s.src_plane_stride = spm_plane;
    s.dst_row_stride = ddr_row, s.dst_plane_stride = ddr_plane;
  }
  return d;
}

// SPM box of cluster `from` -> the same tensor box in cluster `to`'s buffer.
kbin_dma_args Compiler::exchange(const Act &a, unsigned from, unsigned to, const Box &box) const {
  kbin_dma_args d = dma(KBIN_DMA_EXCHANGE);
  d.dst_cluster = to;
  const mcl_tile src = tile_of(a, from, box), dst = tile_of(a, to, box);
  d.spm_offset = src.offset;
  d.spm_dst_offset = dst.offset;
  const uint64_t es = a.es;
  d.shape.row_bytes = uint64_t(box.chans()) * es;
  d.shape.rows = uint64_t(a.W);
  d.shape.planes = uint64_t(box.rows());
  d.shape.src_row_stride = uint64_t(src.pixel_stride) * es;
  d.shape.src_plane_stride = uint64_t(src.row_stride) * es;
  d.shape.dst_row_stride = uint64_t(dst.pixel_stride) * es;
  d.shape.dst_plane_stride = uint64_t(dst.row_stride) * es;
  if (src.pixel_stride == box.chans() && dst.pixel_stride == box.chans()) {
    // whole pixels: rows of a band are contiguous on both sides
    d.shape.row_bytes *= uint64_t(a.W);
    d.shape.rows = 1;
    d.shape.src_row_stride = d.shape.row_bytes;
    d.shape.dst_row_stride = d.shape.row_bytes;
  }
  return d;
}

uint64_t Compiler::dma_cycles(uint64_t bytes, bool ddr) const {
  if (bytes == 0)
    return 0;
  const auto &d = opt.device;
  const double bw = ddr ? d.ddr_bytes_per_cycle : d.noc_bytes_per_cycle;
  return d.dma_latency_cycles + uint64_t(std::ceil(double(bytes) / std::max(bw, 1e-9)));
}

// Loads slice j of op s's parameters into the SPM at `spm`: one multicast (shared
// parameters; the issuing cluster rotates between operators to spread the RDMA work) or
// one load per cluster. With `notify`, each destination's weight signal counts the arrival.
void Compiler::emit_slice_load(size_t s, size_t j, uint64_t spm, bool notify,
                               std::vector<uint64_t> &ddr, uint32_t f0, uint32_t f1, int issuer) {
  const PlannedOp &op = ops[s];
  const ParamBlock &pb = op.params;
  auto load = [&](unsigned from, const ParamSlice &ps, uint32_t mask) {
    const uint64_t lo = piece_bound(ps.size, f0), hi = piece_bound(ps.size, f1);
    if (hi <= lo)
      return;
    kbin_dma_args d = dma(mask ? KBIN_DMA_MULTICAST : KBIN_DMA_LOAD);
    d.cluster_mask = mask;
    d.ddr = {KBIN_DDR_PARAMS, 0, ps.blob_offset + lo};
    d.spm_offset = spm + lo;
    d.shape = linear(hi - lo);
    if (notify)
      d.notify_signal = kWeightSignal;
    push(from, d);
    ddr[from] += hi - lo;
  };
  const auto multicast = multicast_slots(s);
  for (size_t i = 0; i < multicast.size() && i < pb.slots.size(); ++i) {
    const auto [mask, rotating] = multicast[i];
    if (pb.slots[i].size() <= j || mask == 0)
      continue;
    // Rows x channels: a range with one cluster is a plain load by that cluster.
    const bool several = !pb.shared && std::popcount(mask) > 1;
    const unsigned from =
        issuer >= 0 && (pb.shared || (mask >> unsigned(issuer) & 1u)) ? unsigned(issuer) : rotating;
    load(from, pb.slots[i][j], pb.shared || several ? mask : 0);
    if (notify)
      for (unsigned c = 0; c < K; ++c)
        if (mask & (1u << c))
          ++weight_signals[c];
  }
  if (!multicast.empty())
    return;
  for (unsigned c = 0; c < K && c < pb.slots.size(); ++c)
    if (pb.slots[c].size() > j) {
      load(c, pb.slots[c][j], 0);
      if (notify)
        ++weight_signals[c];
    }
}

std::vector<std::pair<uint32_t, unsigned>> Compiler::multicast_slots(size_t s) const {
  const PlannedOp &op = ops[s];
  std::vector<std::pair<uint32_t, unsigned>> v;
  if (op.params.shared && !op.params.slots.empty()) {
    // One slot for every cluster with work, multicast by a cluster rotating between
    // operators to spread the RDMA work.
    uint32_t mask = 0;
    for (unsigned c = 0; c < K; ++c)
      if (!op.out_box[c].empty())
        mask |= 1u << c;
    v.push_back({mask, unsigned(s % K)});
  }
  for (uint32_t mask : op.param_masks) { // rows x channels: one slot per channel range
    uint32_t rest = mask;                // the (s mod members)-th cluster of the range
    for (size_t skip = mask ? s % size_t(std::popcount(mask)) : 0; skip > 0; --skip)
      rest &= rest - 1;
    v.push_back({mask, rest ? unsigned(std::countr_zero(rest)) : 0u});
  }
  return v;
}

// Slice 0 of op s's parameters (issued during step s, used in step s + 1).
void Compiler::emit_param_loads(size_t s, std::vector<uint64_t> &ddr) {
  if (ops[s].params.buffer >= 0)
    emit_slice_load(s, 0, buffers[ops[s].params.buffer].offset, false, ddr);
}

// SPM offset of the buffer holding slice j of op's parameters.
uint64_t Compiler::slice_spm(const PlannedOp &op, size_t j) const {
  return buffers[j % 2 == 0 ? op.params.buffer : op.params.buffer2].offset;
}

void Compiler::end_step() {
  for (unsigned c = 0; c < K; ++c) {
    wait(c);
    if (K > 1)
      prog.streams[c].push_back(format::Record{KBIN_FN_BARRIER, {}});
  }
}

// The program: kernel arguments, the prologue, one step per operator, then the replay of the
// streams for the report's step times.
Result<void> Compiler::emit() {
  prog.streams.assign(K, {});
  weight_signals.assign(K, 0);
  slice_free_signals.assign(K, 0);
  input_signals.assign(K, 0);
  describe_arguments();
  uint64_t input_bytes = 0;
  uint64_t clock = emit_prologue(input_bytes);
  for (size_t s = 0; s < ops.size(); ++s)
    if (auto r = emit_step(s, clock, input_bytes); !r)
      return r;
  out.total_cycles = clock;
  return replay_timing(clock);
}

// Kernel arguments: inputs, then outputs.
void Compiler::describe_arguments() {
  auto describe = [&](int t, uint32_t role, uint32_t index) {
    const Tensor &ten = g.tensors[t];
    format::TensorDesc d;
    d.name = ten.name;
    d.role = role;
    d.arg_index = index;
    d.dtype = MCL_DTYPE_F32;
    for (int64_t v : ten.shape)
      d.dims.push_back(uint64_t(v));
    d.byte_size = uint64_t(ten.elements()) * 4;
    prog.tensors.push_back(d);
  };
  for (int t : g.inputs)
    describe(t, KBIN_ROLE_INPUT, input_arg[t]);
  for (int t : g.outputs)
    describe(t, KBIN_ROLE_OUTPUT, output_arg[t]);
  prog.arg_count = uint32_t(input_arg.size() + output_arg.size());
}

// Step 0: SPM-homed network inputs and the first operator's parameters. Returns the step's
// estimated cycles; `input_bytes`: the DDR bytes of the inputs loaded.
uint64_t Compiler::emit_prologue(uint64_t &input_bytes) {
  std::vector<uint64_t> ddr(K, 0);
  for (int t : g.inputs) {
    const Act &a = acts[act_of[t]];
    if (a.in_ddr)
      continue;
    for (unsigned c = 0; c < K; ++c) {
      if (a.need[c].empty())
        continue;
      const mcl_tile tl = tile_of(a, c, a.need[c]);
      kbin_dma_args d = ddr_transfer(a, {KBIN_DDR_ARG, input_arg[t], 0}, true, a.need[c], tl.offset,
                                     tl.pixel_stride, true);
      push(c, d);
      ddr[c] += bytes_of(d);
    }
  }
  if (!pieces_at.empty())
    emit_pieces(0, ddr);
  else if (!ops.empty() && !policy.no_prefetch.count(ops[0].node))
    emit_param_loads(0, ddr);
  end_step();
  step_ends.assign(1, stream_sizes());
  input_bytes = std::accumulate(ddr.begin(), ddr.end(), uint64_t{0});
  return dma_cycles(*std::max_element(ddr.begin(), ddr.end()), true);
}

// Operator s's step: its own parameters when not prefetched, the next operator's prefetch,
// the compute (with streamed operands and parameter slices), exchanges, output stores, the
// closing wait and barrier; and its report with the quick estimate of its cycles.
Result<void> Compiler::emit_step(size_t s, uint64_t &clock, uint64_t input_bytes) {
  const auto &dev = opt.device;
  const int group = group_of_op.empty() ? -1 : group_of_op[s];
  if (group >= 0 && s != groups[size_t(group)].last)
    return emit_group_member_step(s, clock); // group.cpp: computed in the group's last step
  const PlannedOp &op = ops[s];
  const Node &n = g.nodes[op.node];
  const Act &y = acts[op.out];
  OpReport rep;
  rep.name = n.name;
  rep.op = std::string(ir::op_name(n.op)) + (n.act.kind != MCL_ACT_NONE ? "+act" : "");
  rep.split = op.split + (op.chunks > 1 ? " x" + std::to_string(op.chunks) : "") +
              (op.params.slices() > 1 ? " w" + std::to_string(op.params.slices()) : "");
  rep.start_cycle = clock;
  StepTraffic traffic(K);
  uint64_t own_load_cycles = 0;
  if (op.kind == Lowering::Conv) {
    const mcl_conv_args a = conv_args_shape(op, need_for(op, 0, op.out_box[0]), op.out_box[0]);
    rep.shape = std::to_string(a.kernel_h) + "x" + std::to_string(a.kernel_w) + "/" +
                std::to_string(a.stride_h) + " " + std::to_string(acts[op.ins[0]].C) + "->" +
                std::to_string(y.C) + (a.groups > 1 ? " g" + std::to_string(a.groups) : "");
  }
  if (policy.no_prefetch.count(op.node)) { // load own parameters first, then meet
    std::vector<uint64_t> own(K, 0);
    emit_param_loads(s, own);
    end_step();
    own_load_cycles = dma_cycles(*std::max_element(own.begin(), own.end()), true) +
                      (K > 1 ? dev.barrier_latency_cycles : 0);
    for (unsigned c = 0; c < K; ++c)
      traffic.params_ddr[c] += own[c];
  }
  if (!pieces_at.empty())
    emit_pieces(s + 1, traffic.params_ddr);
  else if (s + 1 < ops.size() && !policy.no_prefetch.count(ops[s + 1].node))
    emit_param_loads(s + 1, traffic.params_ddr);
  for (unsigned c = 0; c < K; ++c)
    rep.tiles += !op.out_box[c].empty();
  if (group >= 0)
    rep.split = "group of " +
                std::to_string(groups[size_t(group)].last - groups[size_t(group)].first + 1) +
                " x" + std::to_string(op.chunks);
  if (auto r = group >= 0 ? emit_group_compute(s, traffic, rep) : emit_compute(s, traffic, rep); !r)
    return r;
  rep.compute_cycles = *std::max_element(traffic.compute.begin(), traffic.compute.end());
  {
    const mcl_native_cost_breakdown &lanes = traffic.lanes;
    const std::pair<uint64_t, const char *> by_lane[] = {{lanes.matrix, "matrix"},
                                                         {lanes.load_store, "load/store"},
                                                         {lanes.vliw, "vliw"},
                                                         {lanes.overhead, "overhead"}};
    const auto *top = &by_lane[0];
    for (const auto &l : by_lane)
      if (l.first > top->first)
        top = &l;
    rep.bound = top->first ? top->second : "";
  }
  emit_exchanges(op, traffic, rep);
  emit_output_stores(op, traffic);
  end_step();
  step_ends.push_back(stream_sizes());
  const auto &pddr = traffic.params_ddr, &stream_ddr = traffic.stream_ddr, &noc = traffic.noc;
  uint64_t step_cycles = 0, pmax = 0, nmax = 0;
  for (unsigned c = 0; c < K; ++c) {
    // Streaming serializes with compute; prefetch overlaps it; exchanges follow it.
    const uint64_t busy = traffic.compute[c] + dma_cycles(stream_ddr[c], true);
    step_cycles = std::max(step_cycles,
                           std::max(busy, dma_cycles(pddr[c], true)) + dma_cycles(noc[c], false));
    pmax = std::max(pmax, pddr[c] + stream_ddr[c]);
    nmax = std::max(nmax, noc[c]);
  }
  rep.ddr_bytes = std::accumulate(pddr.begin(), pddr.end(), uint64_t{0}) +
                  std::accumulate(stream_ddr.begin(), stream_ddr.end(), uint64_t{0}) +
                  (s == 0 ? input_bytes : 0);
  rep.dma_cycles = dma_cycles(pmax, true) + dma_cycles(nmax, false);
  rep.cycles = own_load_cycles + step_cycles + (K > 1 ? dev.barrier_latency_cycles : 0);
  clock += rep.cycles;
  rep.spm_peak.assign(K, 0);
  for (const SpmBuffer &b : buffers)
    if (b.first <= int(s) + 1 && int(s) + 1 <= b.last)
      for (unsigned c = 0; c < K; ++c)
        if (b.bytes[c])
          rep.spm_peak[c] = std::max(rep.spm_peak[c], b.offset + b.bytes[c]);
  out.ops.push_back(rep);
  return {};
}

// The compute of op s: per parameter slice, per cluster, per band of output rows, the streamed
// operands' loads, the native calls and the streamed output's store. Parameters streamed in
// output-channel slices: slice j+1 loads while slice j computes; slice j+2 reuses slice j's
// buffer once every cluster is past slice j (for a multicast slice, the cluster multicasting
// it waits for the others' kSliceFreeSignal posts; for a cluster's own loads, program order).
Result<void> Compiler::emit_compute(size_t s, StepTraffic &traffic, OpReport &rep) {
  const PlannedOp &op = ops[s];
  const Act &y = acts[op.out];
  const size_t nslices = op.params.buffer2 >= 0 ? op.params.slices() : 1;
  std::vector<std::vector<uint64_t>> arrival(nslices, std::vector<uint64_t>(K, 0));
  std::vector<std::vector<Box>> staged(op.ins.size(), std::vector<Box>(K, Box{}));
  // Multicast slices: slice j + 1 goes into the buffer of slice j - 1, so the cluster
  // multicasting it first waits until every other cluster it goes to is past slice j - 1
  // (each posts kSliceFreeSignal to it): a dependency between those clusters only, not a
  // barrier of all.
  const auto multicast = K > 1 ? multicast_slots(s) : decltype(multicast_slots(s)){};
  for (size_t j = 0; j < nslices; ++j) {
    if (j + 1 < nslices) {
      if (j >= 1)
        for (const auto &[mask, from] : multicast)
          if (std::popcount(mask & ~(1u << from)) > 0) {
            kbin_wait_signal_args w{kSliceFreeSignal, 0, slice_free_signals[from]};
            prog.streams[from].push_back(format::Record::make(KBIN_FN_WAIT_SIGNAL, w));
          }
      emit_slice_load(s, j + 1, slice_spm(op, j + 1), true, traffic.params_ddr);
      arrival[j + 1] = weight_signals;
    }
    for (unsigned c = 0; c < K; ++c) {
      std::vector<Box> parts = {op.out_box[c]};
      if (nslices > 1)
        parts = weight_slices(op, op.out_box[c]);
      if (op.out_box[c].empty() || j >= parts.size())
        continue;
      if (j > 0) {
        kbin_wait_signal_args w{kWeightSignal, 0, arrival[j][c]};
        prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_SIGNAL, w));
      }
      std::vector<Box> boxes, sends; // sends[k]: the rows sent once boxes[k] is computed
      if (early_exchanges && nslices == 1)
        boxes = exported_rows_first(op, c, op.params.buffer >= 0 ? slice_spm(op, 0) : 0, sends);
      if (boxes.empty())
        boxes = chunk_boxes(op, c);
      for (size_t k = 0; k < boxes.size(); ++k) {
        Box ob = boxes[k];
        ob.c0 = parts[j].c0, ob.c1 = parts[j].c1;
        auto call = make_call(op, c, ob, op.params.buffer >= 0 ? slice_spm(op, j) : 0);
        if (!call)
          return call.error();
        // Streamed operands come in first (once when the box they need is the same).
        bool loaded = false;
        for (size_t i = 0; i < op.ins.size(); ++i) {
          const Act &x = acts[op.ins[i]];
          const Box ib = need_for(op, i, ob);
          if (!x.in_ddr || (staged[i][c].y0 == ib.y0 && staged[i][c].y1 == ib.y1 &&
                            staged[i][c].c0 == ib.c0 && staged[i][c].c1 == ib.c1))
            continue;
          kbin_dma_args d = ddr_transfer(x, x.home, x.onnx_layout, ib,
                                         buffers[op.stage_in[i]].offset, ib.chans(), true);
          push(c, d);
          traffic.stream_ddr[c] += bytes_of(d);
          staged[i][c] = ib;
          loaded = true;
        }
        if (loaded || y.in_ddr)
          wait(c); // operands in place, and the previous chunk's store has left staging
        for (auto &r : call.value().records)
          prog.streams[c].push_back(r);
        traffic.add_call(c, call.value());
        rep.macs += call.value().lanes.macs;
        rep.padded_macs += call.value().lanes.padded_macs;
        if (y.in_ddr) {
          kbin_dma_args d = ddr_transfer(y, y.home, y.onnx_layout, stored(op, ob),
                                         buffers[op.stage_out].offset, ob.chans(), false);
          push(c, d);
          traffic.stream_ddr[c] += bytes_of(d);
        }
        if (k < sends.size() && !sends[k].empty()) { // the rows others read are done
          emit_exchanges_from(op, c, traffic, rep, sends[k]);
          traffic.exchanged[c] = true;
        }
      }
    }
    if (j + 2 < nslices)
      for (const auto &[mask, from] : multicast)
        for (unsigned c = 0; c < K; ++c)
          if (c != from && (mask >> c & 1u) && !op.out_box[c].empty()) {
            kbin_signal_args post{from, kSliceFreeSignal, 1};
            prog.streams[c].push_back(format::Record::make(KBIN_FN_SIGNAL, post));
            ++slice_free_signals[from];
          }
  }
  return {};
}

// Exchanges: every other cluster's needed part of what each cluster produced (but for the
// clusters that sent theirs during the compute, exported_rows_first).
void Compiler::emit_exchanges(const PlannedOp &op, StepTraffic &traffic, OpReport &rep) {
  for (unsigned from = 0; from < K; ++from)
    if (!traffic.exchanged[from])
      emit_exchanges_from(op, from, traffic, rep);
}

void Compiler::emit_exchanges_from(const PlannedOp &op, unsigned from, StepTraffic &traffic,
                                   OpReport &rep, const Box &part) {
  const Act &y = acts[op.out];
  if (y.in_ddr)
    return;
  for (const kbin_dma_args &d : exchanges_of(op, from, part)) {
    push(from, d);
    traffic.noc[from] += bytes_of(d); // the engine sends a multicast once
    rep.exchange_bytes += bytes_of(d) * uint64_t(std::max(1, std::popcount(d.cluster_mask)));
  }
}

// The transfers that send what other clusters read of `from`'s output within `part`: one per
// destination, but one multicast for the destinations that receive the same rows and channels
// at the same SPM place (an all-gather after a channel split: the engine reads and sends the
// data once, the NoC delivers it to each).
std::vector<kbin_dma_args> Compiler::exchanges_of(const PlannedOp &op, unsigned from,
                                                  const Box &part) const {
  const Act &y = acts[op.out];
  const Box sent = part.empty() ? op.out_box[from] : intersect(part, op.out_box[from]);
  std::vector<kbin_dma_args> out;
  for (unsigned to = 0; to < K; ++to) {
    if (from == to)
      continue;
    const Box box = intersect(y.need[to], stored(op, sent));
    if (box.empty())
      continue;
    const kbin_dma_args d = exchange(y, from, to, box);
    auto same_place = [&](const kbin_dma_args &o) {
      return (o.kind == KBIN_DMA_EXCHANGE || o.kind == KBIN_DMA_EXCHANGE_MULTICAST) &&
             o.spm_offset == d.spm_offset && o.spm_dst_offset == d.spm_dst_offset &&
             std::memcmp(&o.shape, &d.shape, sizeof d.shape) == 0;
    };
    auto it = std::find_if(out.begin(), out.end(), same_place);
    if (it == out.end()) {
      out.push_back(d);
    } else if (it->kind == KBIN_DMA_EXCHANGE) {
      it->kind = KBIN_DMA_EXCHANGE_MULTICAST;
      it->cluster_mask = (1u << it->dst_cluster) | (1u << to);
      it->dst_cluster = 0;
    } else {
      it->cluster_mask |= 1u << to;
    }
  }
  return out;
}

// Software pipelining of the exchanges: cluster c's output box in an order that lets its DMA
// engine send what other clusters read while the rest of the box computes. Two cases:
//  * others read rows at the box's top and bottom edges only (the halos of a row split):
//    those rows first, sent together, then the middle;
//  * otherwise (others read every row of the box, as after a channel split, or rows inside
//    it): the box in 2-4 bands of rows, what others read of each band sent once it is
//    computed, so only the last band's sends follow the compute.
// `sends[k]` is the part sent once boxes[k] is computed (empty: none). Empty result when no
// order applies (a box computed in chunks, an operator that is not computed in row bands, an
// output in DDR, streamed operands, nothing read elsewhere) or none ends the sends earlier than
// computing first (each extra call has its own fixed cost). The destination rows are outside
// what the receiving cluster writes in this step, so they may land while it computes, as they
// do when sent after the compute.
std::vector<Box> Compiler::exported_rows_first(const PlannedOp &op, unsigned c, uint64_t params_spm,
                                               std::vector<Box> &sends) const {
  sends.clear();
  const Act &y = acts[op.out];
  const Box &b = op.out_box[c];
  if (y.in_ddr || b.empty() || !computes_in_bands(op) || chunk_boxes(op, c).size() != 1)
    return {};
  for (int i : op.ins)
    if (acts[size_t(i)].in_ddr) // streamed operands: staged per box
      return {};
  int64_t top = b.y0, bottom = b.y1; // rows [y0, top) and [bottom, y1) are read elsewhere
  bool inside = false;               // some cluster reads rows away from the box's edges
  bool read_elsewhere = false;
  for (unsigned to = 0; to < K; ++to) {
    if (to == c)
      continue;
    const Box read = intersect(y.need[to], stored(op, b));
    if (read.empty())
      continue;
    read_elsewhere = true;
    if (read.y0 == b.y0 && read.y1 < b.y1)
      top = std::max(top, read.y1);
    else if (read.y1 == b.y1 && read.y0 > b.y0)
      bottom = std::min(bottom, read.y0);
    else
      inside = true;
  }
  if (!read_elsewhere)
    return {};
  auto cost = [&](const Box &ob) -> uint64_t {
    auto call = make_call(op, c, ob, params_spm);
    return call ? call.value().cost : UINT64_MAX / 4;
  };
  // The NoC time of what others read of `part` (the engine sends it transfer by transfer).
  auto sends_of = [&](const Box &part) {
    uint64_t t = 0;
    for (const kbin_dma_args &d : exchanges_of(op, c, part))
      t += dma_cycles(bytes_of(d), false);
    return t;
  };
  // When the last send of this order ends, the compute and the engine each working in order.
  auto finish = [&](const std::vector<Box> &parts, const std::vector<Box> &sent) {
    uint64_t computed = 0, engine = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      computed += cost(parts[k]);
      if (!sent[k].empty())
        engine = std::max(engine, computed) + sends_of(sent[k]);
    }
    return std::max(computed, engine);
  };
  const uint64_t after = cost(b) + sends_of(b); // every send after the compute
  std::vector<Box> best_parts, best_sends;
  uint64_t best = after;
  if (!inside && top < bottom) {
    std::vector<Box> parts, sent;
    if (top > b.y0)
      parts.push_back({b.y0, top, b.c0, b.c1}), sent.push_back({});
    if (bottom < b.y1)
      parts.push_back({bottom, b.y1, b.c0, b.c1}), sent.push_back({});
    sent.back() = b; // the edges hold everything others read
    parts.push_back({top, bottom, b.c0, b.c1}), sent.push_back({});
    if (const uint64_t t = finish(parts, sent); t < best)
      best = t, best_parts = parts, best_sends = sent;
  } else {
    // Bands of rows, the earlier ones no smaller: band k's sends hide behind the later ones.
    for (int64_t n = 2; n <= std::min<int64_t>(4, b.rows()); ++n) {
      std::vector<Box> parts;
      int64_t y = b.y0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t left = b.y1 - y, rows = (left + (n - k) - 1) / (n - k);
        parts.push_back({y, y + rows, b.c0, b.c1});
        y += rows;
      }
      if (const uint64_t t = finish(parts, parts); t < best)
        best = t, best_parts = parts, best_sends = parts;
    }
  }
  sends = best_sends;
  return best_parts;
}

// Stores of SPM-homed network outputs produced by `op`.
void Compiler::emit_output_stores(const PlannedOp &op, StepTraffic &traffic) {
  const Act &y = acts[op.out];
  for (auto [t, argi] : output_arg) {
    if (act_of[t] != op.out || y.in_ddr)
      continue;
    for (unsigned c = 0; c < K; ++c) {
      const Box part = stored(op, op.out_box[c]); // what this operator wrote here
      if (part.empty())
        continue;
      const mcl_tile tl = tile_of(y, c, part);
      kbin_dma_args d =
          ddr_transfer(y, {KBIN_DDR_ARG, argi, 0}, true, part, tl.offset, tl.pixel_stride, false);
      push(c, d);
      traffic.stream_ddr[c] += bytes_of(d);
    }
  }
}

// The per-operator figures of emit_step are the quick analytic estimate; the replay of the
// emitted streams under the simulator's timing rules replaces the step times.
Result<void> Compiler::replay_timing(uint64_t estimated_cycles) {
  const auto &dev = opt.device;
  auto timing = predict_timing(prog, dev, program_ddr_bytes_per_cycle(dev, K));
  if (!timing)
    return timing.error();
  auto step_end = [&](size_t s) {
    uint64_t t = 0;
    for (unsigned c = 0; c < K; ++c)
      if (step_ends[s][c] > 0)
        t = std::max(t, timing.value().time_after[c][step_ends[s][c] - 1]);
    return t;
  };
  for (size_t s = 0; s < out.ops.size(); ++s) {
    out.ops[s].start_cycle = step_end(s);
    out.ops[s].cycles = step_end(s + 1) - step_end(s);
  }
  out.estimated_cycles = estimated_cycles;
  out.total_cycles = timing.value().total_cycles;
  const ProgramTiming &t = timing.value();
  auto mean = [&](const std::vector<uint64_t> &v) {
    return std::accumulate(v.begin(), v.end(), uint64_t{0}) / std::max<uint64_t>(1, v.size());
  };
  out.time = {mean(t.compute_cycles), mean(t.dma_wait_cycles), mean(t.barrier_wait_cycles),
              mean(t.signal_wait_cycles)};
  return {};
}

std::vector<size_t> Compiler::stream_sizes() const {
  std::vector<size_t> sizes(K);
  for (unsigned c = 0; c < K; ++c)
    sizes[c] = prog.streams[c].size();
  return sizes;
}

Result<CompileOutput> Compiler::finish() {
  if (auto r = pack_params(); !r)
    return r.error();
  if (auto r = emit(); !r)
    return r.error();
  prog.cluster_count = K;
  prog.pes_per_cluster = opt.device.pes_per_cluster;
  prog.spm_bytes = opt.device.spm_bytes;
  prog.preset = opt.device.name.substr(0, 31);
  out.params_bytes = prog.params.size();
  std::vector<size_t> reported(buffers.size(), SIZE_MAX); // SpmBuffer -> out.buffers
  for (size_t i = 0; i < buffers.size(); ++i)
    if (const SpmBuffer &b = buffers[i]; b.size()) {
      reported[i] = out.buffers.size();
      out.buffers.push_back({b.name, b.offset, b.size(), b.first, b.last});
    }
  for (const GroupPlan &gp : groups) {
    GroupReport r;
    r.first_op = gp.first, r.last_op = gp.last;
    r.bands = ops[gp.last].chunks;
    for (int a : gp.inner)
      r.intermediates.push_back(g.tensors[acts[size_t(a)].tensor].name);
    const int step = int(gp.last) + 1; // the group computes in its last operator's step
    for (size_t i = 0; i < buffers.size(); ++i)
      if (reported[i] != SIZE_MAX && buffers[i].first <= step && step <= buffers[i].last)
        r.buffers.push_back(reported[i]);
    r.why = gp.why;
    out.groups.push_back(std::move(r));
  }
  for (const Act &a : acts)
    if (a.in_ddr)
      (policy.streamed.count(a.tensor) ? out.streamed : out.spilled)
          .push_back(g.tensors[a.tensor].name);
  if (opt.dump_schedule)
    out.schedule = schedule_text();
  out.program = std::move(prog);
  out.program.report_json = out.report_json();
  if (auto r = format::validate_program(out.program); !r)
    return make_error("internal error: the emitted program is invalid: " + r.error().message);
  return std::move(out);
}

} // namespace kann::tiler
