// The schedule as text, for `kann compile --dump-schedule` and the golden tests of
// tests/kann/golden/: what the tile compiler decided, in an order a reader can follow. Per
// step: the operator, its lowering and split, the box each cluster writes and the boxes it
// reads; the SPM buffers with their offsets and lifetimes; every record of every cluster's
// stream (DMA, compute calls with their tiles, waits, barriers), as `kann inspect --records`
// prints them. The program of one image (a batch repeats it).
#include "tiler/tiler.h"

#include <cstdio>
#include <sstream>

namespace kann::tiler {

namespace {

std::string hex(uint64_t v) {
  char s[32];
  std::snprintf(s, sizeof s, "0x%06llx", (unsigned long long)v);
  return s;
}

// Rows [y0, y1) x channels [c0, c1) (all columns).
std::string box_text(const Box &b) {
  if (b.empty())
    return "-";
  return "rows " + std::to_string(b.y0) + ".." + std::to_string(b.y1) + " ch " +
         std::to_string(b.c0) + ".." + std::to_string(b.c1);
}

} // namespace

std::string Compiler::schedule_text() const {
  std::ostringstream o;
  o << "schedule: " << K << " cluster(s) of '" << opt.device.name << "', SPM " << prog.spm_required
    << " of " << opt.device.spm_bytes << " B, parameters " << prog.params.size() << " B, scratch "
    << prog.scratch_size << " B\n";

  o << "activations (storage: HxWxC, type, home, steps):\n";
  for (const Act &a : acts) {
    o << "  " << g.tensors[a.tensor].name << ": " << a.H << "x" << a.W << "x" << a.C << " "
      << format::dtype_name(a.dtype);
    if (a.in_ddr)
      o << ", DDR "
        << (a.home.space == KBIN_DDR_ARG ? "ARG" + std::to_string(a.home.arg_index)
                                         : "SCRATCH+" + hex(a.home.offset))
        << (a.onnx_layout ? " (NCHW)" : " (HWC)");
    else if (a.buffer >= 0)
      o << ", SPM '" << buffers[a.buffer].name << "'";
    else
      o << ", unused";
    o << ", steps " << a.first << ".." << a.last << "\n";
  }

  o << "SPM buffers (offset, bytes on the largest cluster, steps):\n";
  for (const SpmBuffer &b : buffers)
    if (b.size())
      o << "  " << hex(b.offset) << " " << b.size() << " B, steps " << b.first << ".." << b.last
        << ": " << b.name << "\n";

  for (size_t step = 0; step < step_ends.size(); ++step) {
    if (step == 0) {
      o << "step 0: prologue (SPM-homed network inputs, the first parameters)\n";
    } else {
      const PlannedOp &op = ops[step - 1];
      const Node &n = g.nodes[op.node];
      o << "step " << step << ": " << n.name << " " << ir::op_name(n.op)
        << (n.act.kind != MCL_ACT_NONE ? "+act" : "") << ", lowering " << ir::lowering_name(op.kind)
        << ", split " << op.split << ", " << op.chunks << " band(s), "
        << std::max<size_t>(1, op.params.slices()) << " parameter slice(s)";
      if (step - 1 < group_of_op.size() && group_of_op[step - 1] >= 0) {
        const GroupPlan &gp = groups[size_t(group_of_op[step - 1])];
        o << ", layer group of steps " << gp.first + 1 << ".." << gp.last + 1
          << " (computed in step " << gp.last + 1 << ", bands of the last operator's rows)";
      }
      o << "\n";
      const int yt = n.outputs[0];
      o << "  writes " << g.tensors[yt].name;
      if (chan_offset.count(yt))
        o << " (into " << g.tensors[acts[op.out].tensor].name << " at channel "
          << chan_offset.at(yt) << ")";
      o << ":";
      for (unsigned c = 0; c < K; ++c)
        o << (c ? "; " : " ") << "c" << c << " " << box_text(stored(op, op.out_box[c]));
      o << "\n";
      for (size_t i = 0; i < op.ins.size(); ++i) {
        o << "  reads " << g.tensors[acts[op.ins[i]].tensor].name << ":";
        for (unsigned c = 0; c < K; ++c)
          o << (c ? "; " : " ") << "c" << c << " " << box_text(op.in_box[i][c]);
        o << "\n";
      }
    }
    for (unsigned c = 0; c < K; ++c) {
      const size_t begin = step == 0 ? 0 : step_ends[step - 1][c], end = step_ends[step][c];
      o << "  cluster " << c << ":" << (begin == end ? " (no records)" : "") << "\n";
      for (size_t r = begin; r < end; ++r)
        o << "    " << format::describe_record(prog.streams[c][r]) << "\n";
    }
  }
  return o.str();
}

} // namespace kann::tiler
