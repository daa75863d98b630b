// The parameter blob: every operator's weights packed per output-channel slice, and the
// INT8 weight helpers shared by Conv and Gemm.
#include "tiler/int8_params.h"
#include "tiler/tiler.h"

#include <algorithm>
#include <bit>

#include "kann/passes.h"

namespace kann::tiler {

uint64_t Compiler::add_blob(const std::vector<uint8_t> &bytes) {
  uint64_t at = align_up(prog.params.size());
  prog.params.resize(at);
  prog.params.insert(prog.params.end(), bytes.begin(), bytes.end());
  return at;
}

// Packs every operator's weights into the blob (before emission: prefetches need them).
Result<void> Compiler::pack_params() {
  for (size_t s = 0; s < ops.size(); ++s) {
    if (opt.progress)
      opt.progress("packing parameters", s, ops.size());
    PlannedOp &op = ops[s];
    const Node &n = g.nodes[op.node];
    if (op.kind == Lowering::Conv && !op.param_masks.empty()) {
      // Rows x channels: one set of slices per channel range, multicast to its clusters.
      op.params.slots.assign(op.param_masks.size(), {});
      for (size_t i = 0; i < op.param_masks.size(); ++i) {
        const unsigned c = unsigned(std::countr_zero(op.param_masks[i]));
        for (const Box &part : weight_slices(op, op.out_box[c])) {
          auto packed = pack_conv_slice(op, n, c, part);
          if (!packed)
            return packed.error();
          op.params.slots[i].push_back({part, std::move(packed.value()), 0});
        }
      }
    } else if (op.kind == Lowering::Conv) {
      // Spatial split: one set of slices multicast to all. Channel split: each cluster's
      // slice of output channels ([cout][cin/groups][kh][kw] rows are contiguous).
      op.params.shared = op.split == "rows";
      op.params.slots.assign(op.params.shared ? 1 : K, {});
      for (unsigned c = 0; c < K; ++c) {
        auto &slot = op.params.slots[op.params.shared ? 0 : c];
        if (op.out_box[c].empty() || !slot.empty())
          continue;
        for (const Box &part : weight_slices(op, op.out_box[c])) {
          auto packed = pack_conv_slice(op, n, c, part);
          if (!packed)
            return packed.error();
          slot.push_back({part, std::move(packed.value()), 0});
        }
      }
    } else if (op.kind == Lowering::Gemm) {
      op.params.slots.assign(K, {});
      for (unsigned c = 0; c < K; ++c)
        for (const Box &part : weight_slices(op, op.out_box[c])) {
          auto packed = pack_gemm_slice(op, n, part);
          if (!packed)
            return packed.error();
          op.params.slots[c].push_back({part, std::move(packed.value()), 0});
        }
    } else if (op.kind == Lowering::ScaleShift) {
      op.params.slots.assign(K, {});
      const auto &sc = g.tensors[n.inputs[1]].data, &sh = g.tensors[n.inputs[2]].data;
      for (unsigned c = 0; c < K; ++c) {
        const Box &ob = op.out_box[c];
        if (ob.empty())
          continue;
        std::vector<float> p(sc.begin() + ob.c0, sc.begin() + ob.c1);
        p.insert(p.end(), sh.begin() + ob.c0, sh.begin() + ob.c1);
        op.params.slots[c].push_back({ob, to_bytes(p.data(), p.size()), 0});
      }
    } else if (!op.const_operands.empty()) {
      op.params.slots.assign(K, {});
      const Act &y = acts[op.out];
      std::vector<uint8_t> bytes(op.const_bytes, 0);
      for (const auto &[k, at] : op.const_operands) {
        const Tensor &t = g.tensors[n.inputs[k]];
        const Act a = storage_of(t);
        // ONNX order (row-major) to the storage's: an image's channels last.
        const bool image = t.shape.size() == 4 && a.C > 1 && a.H * a.W > 1;
        for (int64_t e = 0; e < t.elements(); ++e) {
          const int64_t hw = a.H * a.W;
          const int64_t dst = image ? (e % hw) * a.C + e / hw : e;
          const float v = t.data[size_t(e)];
          if (y.dtype == MCL_DTYPE_F16) {
            const uint16_t h = passes::float_to_half(v);
            std::memcpy(&bytes[at + uint64_t(dst) * 2], &h, 2);
          } else {
            std::memcpy(&bytes[at + uint64_t(dst) * 4], &v, 4);
          }
        }
      }
      for (unsigned c = 0; c < K; ++c)
        if (!op.out_box[c].empty())
          op.params.slots[c].push_back({op.out_box[c], bytes, 0});
    }
  }
  // The blob in one allocation, each slice's bytes released once copied: a candidate of a
  // large network (YOLOv3-416: 250 MB of FP32 weights) holds them once, not three times.
  uint64_t total = prog.params.size();
  for (const PlannedOp &op : ops)
    for (const auto &slot : op.params.slots)
      for (const ParamSlice &ps : slot)
        total = align_up(total) + ps.bytes.size();
  prog.params.reserve(total);
  for (PlannedOp &op : ops)
    for (auto &slot : op.params.slots)
      for (ParamSlice &ps : slot) {
        ps.size = ps.bytes.size();
        ps.blob_offset = add_blob(ps.bytes);
        std::vector<uint8_t>().swap(ps.bytes);
      }
  return {};
}

// INT8 output clamp of a fused activation, in the output's quantized domain.
void Compiler::int8_clamp(const Act &y, const mcl_activation &act, int32_t &lo, int32_t &hi) {
  lo = y.dtype == MCL_DTYPE_U8 ? 0 : -128;
  hi = y.dtype == MCL_DTYPE_U8 ? 255 : 127;
  auto q = [&](float v) {
    const double r = std::nearbyint(double(v) / y.scale) + y.zero_point;
    return int32_t(std::clamp<double>(r, lo, hi));
  };
  if (act.kind == MCL_ACT_RELU)
    lo = std::max(lo, y.zero_point);
  if (act.kind == MCL_ACT_CLIP)
    lo = std::max(lo, q(act.alpha)), hi = std::min(hi, q(act.beta));
}

Int8Weights Compiler::int8_weights(const Node &n, const Act &x, const Act &y, int64_t c0,
                                   int64_t c1, const std::vector<int64_t> *k_order) const {
  const Tensor &w = g.tensors[n.inputs[1]];
  const int64_t cout = w.shape[0];
  const size_t per_out = w.qvalues.size() / size_t(cout);
  Int8Weights r;
  for (int64_t o = c0; o < c1; ++o) {
    for (size_t k = 0; k < per_out; ++k) {
      const size_t src = k_order ? size_t((*k_order)[k]) : k;
      r.values.push_back(int8_t(std::clamp(w.qvalues[size_t(o) * per_out + src], -128, 127)));
    }
    const float ws = w.qscales[w.qscales.size() == 1 ? 0 : size_t(o)];
    r.scales.push_back(ws);
    r.zeros.push_back(w.qzeros[w.qzeros.size() == 1 ? 0 : size_t(o)]);
    float b = 0.0f;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
      const auto &bd = g.tensors[n.inputs[2]].data;
      b = bd[bd.size() == 1 ? 0 : size_t(o)] * (n.op == Op::Gemm ? n.attrf("beta", 1.0f) : 1.0f);
    }
    r.bias.push_back(int32_t(std::nearbyint(double(b) / (double(x.scale) * ws))));
  }
  r.quant.input_scale = x.scale;
  r.quant.output_scale = y.scale;
  r.quant.weight_scales = r.scales.data();
  r.quant.weight_zero_points = r.zeros.data();
  r.quant.weight_scale_count = uint32_t(r.scales.size());
  return r;
}

uint16_t int8_weight_flags(const Graph &g, const Node &n) {
  if (!n.ints.count("int8") || n.inputs.size() < 2 || n.inputs[1] < 0)
    return 0;
  const auto &zeros = g.tensors[size_t(n.inputs[1])].qzeros;
  return std::any_of(zeros.begin(), zeros.end(), [](int32_t z) { return z != 0; })
             ? uint16_t(MCL_CONV_WEIGHT_ZERO_POINTS)
             : uint16_t(0);
}

} // namespace kann::tiler
