// Layer groups (the "group" schedule): consecutive operators run band by band.
//
// A group is a run of operators first..last of Compiler::ops (convolutions, pooling,
// element-wise operators, Resize, Concat copies, conversions, split by rows) whose outputs,
// but the last one's, are read only inside the group. All its operators compute in step
// last + 1: each cluster takes the rows of the last operator's output it owns in `chunks`
// bands and, per band, walks the group backwards to find the rows each operator must produce
// (the halo of every window grows the band: backward halo propagation, `group_band`), then
// forwards to compute them. The intermediates hold one band's rows in an SPM buffer of their
// own, a rolling one: the rows the previous band computed and this one needs again move to
// the buffer's start (a copy) and only the new rows are computed. Across clusters the halo is
// recomputed instead of exchanged, so no exchange, barrier or DDR round trip separates the
// group's operators. Inputs homed in DDR (spilled, or network arguments) are loaded band by
// band and a DDR-homed output stored band by band, through two staging halves: band j + 1
// loads and band j - 1 stores while band j computes.
//
// The steps first + 1 .. last only issue parameter loads (each operator's during the step
// before its own as in the layer schedule, or the pipeline schedule's pieces; the last of
// them waits and meets the other clusters), so every group operator finds its parameters in
// the SPM. Every output element is computed by the same native call arithmetic as in the
// layer schedule (only the rows of a tile change), so FP32 results are bit-identical.
#include "tiler/tiler.h"

#include <numeric>

namespace kann::tiler {

bool Compiler::in_group_node(int node) const {
  for (const auto &nodes : policy.groups)
    if (std::find(nodes.begin(), nodes.end(), node) != nodes.end())
      return true;
  return false;
}

// Operators a group can run band by band: split by rows with all channels, every input
// read through a window of rows, the parameters resident at once.
bool Compiler::group_member_ok(const PlannedOp &op) const {
  const bool kind = (op.kind == Lowering::Conv && !op.transposed) || op.kind == Lowering::Pool ||
                    op.kind == Lowering::Eltwise || op.kind == Lowering::ScaleShift ||
                    op.kind == Lowering::Activation || op.kind == Lowering::Resize ||
                    op.kind == Lowering::Concat || op.kind == Lowering::Convert;
  return kind && !op.strided && op.split == "rows" && op.wslices <= 1 && acts[op.out].H > 1 &&
         !chan_offset.count(g.nodes[op.node].outputs[0]) &&
         act_of.at(g.nodes[op.node].outputs[0]) == op.out;
}

// The box each operator of the group computes for `last_box` of the last operator's output:
// backwards, an intermediate's rows are the union of what its readers' windows need.
std::vector<Box> Compiler::group_band(const GroupPlan &gp, const Box &last_box) const {
  const size_t n = gp.last - gp.first + 1;
  std::vector<Box> req(n);
  req[n - 1] = last_box;
  for (size_t k = n; k-- > 0;) {
    const PlannedOp &op = ops[gp.first + k];
    if (req[k].empty())
      continue;
    for (size_t i = 0; i < op.ins.size(); ++i) {
      auto p = gp.producer.find(op.ins[i]);
      if (p == gp.producer.end())
        continue;
      Box &r = req[size_t(p->second) - gp.first];
      r = bbox(r, need_for(op, i, req[k]));
    }
  }
  return req;
}

// After plan(): the groups of the policy that hold (consecutive operators that can run by
// bands, intermediates read only inside), their operators' boxes from the last one's, and
// every activation's owned / needed boxes again.
void Compiler::plan_groups() {
  group_of_op.assign(ops.size(), -1);
  if (policy.groups.empty())
    return;
  std::map<int, size_t> op_of_node;
  for (size_t s = 0; s < ops.size(); ++s)
    op_of_node[ops[s].node] = s;
  std::set<int> io;
  for (int t : g.inputs)
    io.insert(act_of.at(t));
  for (int t : g.outputs)
    io.insert(act_of.at(t));
  for (size_t gi = 0; gi < policy.groups.size(); ++gi) {
    const std::vector<int> &nodes = policy.groups[gi];
    std::vector<size_t> members;
    for (int nd : nodes)
      if (op_of_node.count(nd))
        members.push_back(op_of_node[nd]);
    // One operator is a group too when it streams a network input (compile_input_stream):
    // its bands then load ahead of its compute.
    if (members.empty() || members.size() != nodes.size())
      continue;
    std::sort(members.begin(), members.end());
    GroupPlan gp;
    gp.first = members.front(), gp.last = members.back();
    if (gi < policy.group_why.size())
      gp.why = policy.group_why[gi];
    bool ok = gp.last - gp.first + 1 == members.size();
    for (size_t s = gp.first; ok && s <= gp.last; ++s)
      ok = group_member_ok(ops[s]) && group_of_op[s] < 0;
    for (size_t s = gp.first; ok && s < gp.last; ++s) {
      const int a = ops[s].out;
      bool read = false;
      for (size_t t = 0; t < ops.size(); ++t)
        if (std::count(ops[t].ins.begin(), ops[t].ins.end(), a)) {
          read = true;
          ok = ok && t > s && t <= gp.last;
        }
      ok = ok && read && !io.count(a);
      gp.inner.push_back(a);
      gp.producer[a] = int(s);
    }
    if (!ok)
      continue;
    const int id = int(groups.size());
    for (size_t s = gp.first; s <= gp.last; ++s)
      group_of_op[s] = id;
    for (int a : gp.inner)
      acts[a].group = id;
    for (unsigned c = 0; c < K; ++c) {
      const std::vector<Box> req = group_band(gp, ops[gp.last].out_box[c]);
      for (size_t s = gp.first; s <= gp.last; ++s) {
        PlannedOp &op = ops[s];
        op.out_box[c] = req[s - gp.first];
        for (size_t i = 0; i < op.ins.size(); ++i)
          op.in_box[i][c] = need_for(op, i, op.out_box[c]);
      }
    }
    groups.push_back(std::move(gp));
  }
  if (groups.empty())
    return;
  for (Act &a : acts) {
    a.owned.assign(K, Box{});
    a.need.assign(K, Box{});
  }
  for (const PlannedOp &op : ops) {
    for (unsigned c = 0; c < K; ++c)
      acts[op.out].owned[c] = bbox(acts[op.out].owned[c], stored(op, op.out_box[c]));
    for (size_t i = 0; i < op.ins.size(); ++i)
      for (unsigned c = 0; c < K; ++c)
        acts[op.ins[i]].need[c] = bbox(acts[op.ins[i]].need[c], op.in_box[i][c]);
  }
}

// In lifetimes(): a group's operators all run in step last + 1: its intermediates live
// there only, its other inputs until then.
void Compiler::group_lifetimes() {
  for (size_t id = 0; id < groups.size(); ++id) {
    const GroupPlan &gp = groups[id];
    const int step = int(gp.last) + 1;
    for (size_t s = gp.first; s <= gp.last; ++s)
      for (int i : ops[s].ins) {
        Act &a = acts[i];
        if (a.group == int(id))
          a.first = a.last = step;
        else
          a.last = std::max(a.last, step);
      }
  }
}

// A group whose DDR-homed inputs are network inputs streamed by choice (Policy::streamed) and
// whose output stays in the SPM loads every band at once, each band's arrival counted by
// kInputSignal: the clusters' loads are then all issued at the start (the DDR serves them
// band after band, cluster after cluster) and band j computes as soon as its rows are in,
// with no cluster waiting for another's compute to issue its next load. The staging buffer
// holds every band.
bool Compiler::loads_upfront(const GroupPlan &gp) const {
  if (acts[ops[gp.last].out].in_ddr)
    return false;
  bool any = false;
  for (size_t s = gp.first; s <= gp.last; ++s)
    for (int i : ops[s].ins) {
      const Act &x = acts[size_t(i)];
      if (!x.in_ddr)
        continue;
      if (!policy.streamed.count(x.tensor))
        return false;
      any = true;
    }
  return any;
}

// Band slots of a group's staging buffers: two halves (band j + 1 loads while band j
// computes), or one per band when every band loads at the start (loads_upfront).
uint64_t Compiler::staging_slots(const GroupPlan &gp) const {
  uint64_t slots = 2;
  if (loads_upfront(gp))
    for (unsigned c = 0; c < K; ++c)
      slots = std::max<uint64_t>(slots, chunk_boxes(ops[gp.last], c).size());
  return slots;
}

// After plan_params(): the band buffers of the intermediates, staging halves for DDR-homed
// inputs and output sized by the largest band, and the parameters of every operator of a
// group alive until the group's step. Every such buffer names the group's last operator, so
// that a failed allocation cuts the group into more bands (relax in compile.cpp).
void Compiler::plan_group_buffers() {
  for (GroupPlan &gp : groups) {
    const int step = int(gp.last) + 1;
    const PlannedOp &last = ops[gp.last];
    std::map<int, int> band_buffer;
    for (int a : gp.inner) {
      const int b = new_buffer(g.tensors[acts[a].tensor].name + ".band", step, step);
      buffers[b].op = int(gp.last);
      acts[a].buffer = b;
      band_buffer[a] = b;
    }
    std::vector<std::vector<uint64_t>> stage_bytes(gp.last - gp.first + 1);
    uint64_t out_bytes = 0;
    for (size_t s = gp.first; s <= gp.last; ++s)
      stage_bytes[s - gp.first].assign(ops[s].ins.size(), 0);
    for (unsigned c = 0; c < K; ++c)
      for (const Box &band : chunk_boxes(last, c)) {
        const std::vector<Box> req = group_band(gp, band);
        for (size_t s = gp.first; s <= gp.last; ++s) {
          const PlannedOp &op = ops[s];
          const Box &r = req[s - gp.first];
          if (band_buffer.count(op.out)) {
            const Act &y = acts[op.out];
            auto &bytes = buffers[size_t(band_buffer[op.out])].bytes[c];
            bytes = std::max<uint64_t>(bytes, uint64_t(r.rows() * y.W * r.chans()) * y.es);
          }
          for (size_t i = 0; i < op.ins.size(); ++i) {
            const Act &x = acts[op.ins[i]];
            const Box ib = need_for(op, i, r);
            if (x.in_ddr && !ib.empty())
              stage_bytes[s - gp.first][i] = std::max<uint64_t>(
                  stage_bytes[s - gp.first][i], uint64_t(ib.rows() * x.W * ib.chans()) * x.es);
          }
        }
        const Act &y = acts[last.out];
        out_bytes =
            std::max<uint64_t>(out_bytes, uint64_t(band.rows() * y.W * band.chans()) * y.es);
      }
    const uint64_t slots = staging_slots(gp);
    for (size_t s = gp.first; s <= gp.last; ++s) {
      PlannedOp &op = ops[s];
      const size_t k = s - gp.first;
      if (op.params.buffer >= 0)
        buffers[op.params.buffer].last = step;
      if (op.pad_row >= 0)
        buffers[op.pad_row].first = buffers[op.pad_row].last = step;
      for (size_t i = 0; i < op.stage_in.size(); ++i) {
        if (op.stage_in[i] < 0)
          continue;
        SpmBuffer &b = buffers[op.stage_in[i]];
        b.first = b.last = step;
        b.op = int(gp.last);
        for (unsigned c = 0; c < K; ++c)
          b.bytes[c] = last.out_box[c].empty() ? 0 : slots * align_up(stage_bytes[k][i]);
      }
      if (op.stage_out >= 0) {
        SpmBuffer &b = buffers[op.stage_out];
        b.first = b.last = step;
        b.op = int(gp.last);
        for (unsigned c = 0; c < K; ++c)
          b.bytes[c] = op.out_box[c].empty() ? 0 : 2 * align_up(out_bytes);
      }
    }
  }
}

// Step s + 1 of a group operator before the last: only parameter loads (this operator's own
// when it is not prefetched, the next one's prefetch); the step before the group's compute
// waits for them and meets the other clusters.
Result<void> Compiler::emit_group_member_step(size_t s, uint64_t &clock) {
  const PlannedOp &op = ops[s];
  const Node &n = g.nodes[op.node];
  const GroupPlan &gp = groups[size_t(group_of_op[s])];
  OpReport rep;
  rep.name = n.name;
  rep.op = std::string(ir::op_name(n.op)) + (n.act.kind != MCL_ACT_NONE ? "+act" : "");
  rep.split = "group (computed in step " + std::to_string(gp.last + 1) + ")";
  rep.start_cycle = clock;
  std::vector<uint64_t> ddr(K, 0);
  if (policy.no_prefetch.count(op.node))
    emit_param_loads(s, ddr);
  if (!pieces_at.empty()) // the pipeline schedule on groups: its pieces for this step
    emit_pieces(s + 1, ddr);
  else if (!policy.no_prefetch.count(ops[s + 1].node))
    emit_param_loads(s + 1, ddr);
  if (s + 1 == gp.last)
    end_step();
  step_ends.push_back(stream_sizes());
  rep.ddr_bytes = std::accumulate(ddr.begin(), ddr.end(), uint64_t{0});
  rep.dma_cycles = dma_cycles(*std::max_element(ddr.begin(), ddr.end()), true);
  rep.cycles = s + 1 == gp.last ? rep.dma_cycles : 0;
  clock += rep.cycles;
  rep.spm_peak.assign(K, 0);
  out.ops.push_back(rep);
  return {};
}

// The compute of a group (step last + 1), per cluster, band by band: the DDR-homed inputs
// of band j + 1 load while band j computes (two staging halves; or every band's at the start,
// loads_upfront), every operator of the group computes its rows of band j, and band j's
// DDR-homed output is stored after the wait that ends band j, so it leaves while band j + 1
// computes.
Result<void> Compiler::emit_group_compute(size_t s, StepTraffic &traffic, OpReport &rep) {
  const GroupPlan &gp = groups[size_t(group_of_op[s])];
  const PlannedOp &last = ops[gp.last];
  const Act &y = acts[last.out];
  band_origin.assign(acts.size(), std::vector<Box>(K));
  auto half = [&](int stage) { return buffers[size_t(stage)].size() / 2; };
  const bool upfront = loads_upfront(gp);
  const uint64_t nslots = staging_slots(gp);
  // Where band j's staged rows go: its half, or its own slot.
  auto slot = [&](int stage, size_t j) -> uint64_t {
    return upfront ? j * (buffers[size_t(stage)].size() / nslots) : (j % 2) * half(stage);
  };
  bool streams_in = false;
  for (size_t t = gp.first; t <= gp.last; ++t)
    for (int st : ops[t].stage_in)
      streams_in = streams_in || st >= 0;
  for (unsigned c = 0; c < K; ++c) {
    const std::vector<Box> bands = chunk_boxes(last, c);
    std::vector<std::vector<Box>> req;
    for (const Box &b : bands)
      req.push_back(group_band(gp, b));
    // The rows an operator computes in band j: an intermediate's rows that band j - 1
    // computed already stay (rolling buffer), only the new ones are computed.
    auto todo_of = [&](size_t j, size_t k) {
      Box todo = req[j][k];
      if (j == 0 || acts[ops[gp.first + k].out].group < 0)
        return todo;
      const Box &prev = req[j - 1][k], &ob = req[j][k];
      if (!prev.empty() && !ob.empty() && prev.y1 > ob.y0 && ob.y0 >= prev.y0 && ob.y1 >= prev.y1)
        todo.y0 = prev.y1;
      return todo;
    };
    auto load = [&](size_t j) {
      uint64_t pushed = 0;
      for (size_t t = gp.first; t <= gp.last; ++t) {
        const PlannedOp &op = ops[t];
        const Box todo = todo_of(j, t - gp.first);
        for (size_t i = 0; i < op.ins.size(); ++i) {
          const Act &x = acts[op.ins[i]];
          const Box ib = todo.empty() ? Box{} : need_for(op, i, todo);
          if (!x.in_ddr || ib.empty())
            continue;
          const int st = op.stage_in[i];
          kbin_dma_args d =
              ddr_transfer(x, x.home, x.onnx_layout, ib, buffers[size_t(st)].offset + slot(st, j),
                           ib.chans(), true);
          if (upfront)
            d.notify_signal = kInputSignal;
          push(c, d);
          traffic.stream_ddr[c] += bytes_of(d);
          ++pushed;
        }
      }
      return pushed;
    };
    std::vector<uint64_t> arrivals; // upfront: kInputSignal's count once band j is in
    if (streams_in && !bands.empty()) {
      if (upfront) {
        for (size_t j = 0; j < bands.size(); ++j) {
          input_signals[c] += load(j);
          arrivals.push_back(input_signals[c]);
        }
      } else {
        load(0);
        wait(c);
      }
    }
    for (size_t j = 0; j < bands.size(); ++j) {
      if (upfront && streams_in) {
        kbin_wait_signal_args w{kInputSignal, 0, arrivals[j]};
        prog.streams[c].push_back(format::Record::make(KBIN_FN_WAIT_SIGNAL, w));
      } else if (streams_in && j + 1 < bands.size()) {
        load(j + 1);
      }
      for (size_t t = gp.first; t <= gp.last; ++t) {
        const PlannedOp &op = ops[t];
        const Box &ob = req[j][t - gp.first];
        if (ob.empty())
          continue;
        for (int st : op.stage_in)
          if (st >= 0)
            stage_shift[st] = slot(st, j);
        if (op.stage_out >= 0)
          stage_shift[op.stage_out] = (j % 2) * half(op.stage_out);
        const Box todo = todo_of(j, t - gp.first);
        if (acts[op.out].group >= 0) {
          // Rolling buffer: the rows of the previous band that this band needs again move to
          // the buffer's start (one copy of the halo rows) instead of being recomputed.
          const Act &a = acts[op.out];
          const Box prev = j > 0 ? req[j - 1][t - gp.first] : Box{};
          const int64_t shift = ob.y0 - prev.y0;
          if (todo.y0 > ob.y0 && shift > 0) {
            // In pieces of at most `shift` rows, first rows first: a piece's source and
            // destination never overlap, and what a piece overwrites was moved before.
            Call copy;
            copy.pes_per_cluster = opt.device.pes_per_cluster;
            for (int64_t y = ob.y0; y < prev.y1; y += shift) {
              const Box rows = {y, std::min(prev.y1, y + shift), ob.c0, ob.c1};
              mcl_unary_args u{};
              band_origin[size_t(op.out)][c] = prev;
              u.input = tile_of(a, c, rows);
              band_origin[size_t(op.out)][c] = ob;
              u.output = tile_of(a, c, rows);
              u.in_quant = u.out_quant = {a.scale, a.zero_point};
              copy.add(MCL_NATIVE_FN_COPY, u);
            }
            for (auto &r : copy.records)
              prog.streams[c].push_back(r);
            traffic.compute[c] += copy.cost;
          } // with shift 0 the kept rows are in place already
          band_origin[size_t(op.out)][c] = ob;
          if (todo.empty())
            continue;
        }
        auto call = make_call(op, c, todo, op.params.buffer >= 0 ? slice_spm(op, 0) : 0);
        if (!call)
          return call.error();
        for (auto &r : call.value().records)
          prog.streams[c].push_back(r);
        traffic.add_call(c, call.value());
        rep.macs += call.value().lanes.macs;
        rep.padded_macs += call.value().lanes.padded_macs;
      }
      if ((streams_in && !upfront) || y.in_ddr)
        wait(c); // band j + 1's inputs are in, band j - 1's output has left its half
      if (y.in_ddr) {
        const Box &ob = bands[j];
        kbin_dma_args d =
            ddr_transfer(y, y.home, y.onnx_layout, stored(last, ob),
                         buffers[size_t(last.stage_out)].offset + (j % 2) * half(last.stage_out),
                         ob.chans(), false);
        push(c, d);
        traffic.stream_ddr[c] += bytes_of(d);
      }
    }
  }
  stage_shift.clear();
  return {};
}

} // namespace kann::tiler
