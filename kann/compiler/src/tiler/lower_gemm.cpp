// Lowering of Gemm / MatMul: weight packing.
#include "tiler/int8_params.h"
#include "tiler/tiler.h"

#include "kann/passes.h"

namespace kann::tiler {

// Packed B slice (output channels `part`) of a Gemm / MatMul, as [n][k] in the SPM order
// of the input (HWC for a flattened image).
Result<std::vector<uint8_t>> Compiler::pack_gemm_slice(const PlannedOp &op, const Node &n,
                                                       const Box &ob) const {
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const uint32_t k_total = uint32_t(x.H * x.W * x.C);
  mcl_gemm_args a{};
  a.input = {0, 1, 1, k_total, k_total, k_total, 1, x.dtype};
  a.output = {0, 1,      1, uint32_t(ob.chans()), uint32_t(ob.chans()), uint32_t(ob.chans()),
              1, y.dtype};
  const Tensor &b = g.tensors[n.inputs[1]];
  const bool tb = n.op == Op::Gemm && n.attr("transB", 0) != 0;
  const float alpha = n.op == Op::Gemm ? n.attrf("alpha", 1.0f) : 1.0f;
  const float beta = n.op == Op::Gemm ? n.attrf("beta", 1.0f) : 1.0f;
  const int64_t N = y.C;
  std::vector<int64_t> order(k_total); // SPM position -> ONNX K index
  auto it = view_src_shape.find(n.inputs[0]);
  for (int64_t m = 0; m < k_total; ++m) {
    order[m] = m;
    if (it != view_src_shape.end()) {
      const int64_t C = it->second[0], H = it->second[1], W = it->second[2];
      const int64_t ch = m % C, pix = m / C;
      order[m] = ch * H * W + (pix / W) * W + pix % W;
    }
  }
  if (n.ints.count("int8")) { // as call_gemm: the packer folds the input zero point
    a.input_zero_point = x.zero_point;
    a.flags = int8_weight_flags(g, n);
  }
  std::vector<uint8_t> packed(mcl_native_gemm_params_size(&a));
  std::vector<float> bt, bias(ob.chans(), 0.0f);
  std::vector<uint16_t> half;
  const void *bmat = nullptr;
  const void *bias_ptr = bias.data();
  const mcl_weight_quant *quant = nullptr;
  Int8Weights q8;
  if (n.ints.count("int8")) {
    q8 = int8_weights(n, x, y, ob.c0, ob.c1, &order);
    bmat = q8.values.data();
    bias_ptr = q8.bias.data();
    quant = &q8.quant;
  } else {
    bt.resize(size_t(ob.chans()) * k_total);
    for (int64_t j = 0; j < ob.chans(); ++j) {
      const int64_t nn = ob.c0 + j;
      for (int64_t m = 0; m < k_total; ++m) {
        const int64_t kk = order[m];
        bt[j * k_total + m] = alpha * b.data[tb ? nn * k_total + kk : kk * N + nn];
      }
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        const auto &cd = g.tensors[n.inputs[2]].data;
        bias[j] = beta * cd[cd.size() == 1 ? 0 : nn];
      }
    }
    bmat = bt.data();
    if (x.dtype == MCL_DTYPE_F16) {
      for (float v : bt)
        half.push_back(passes::float_to_half(v));
      bmat = half.data();
    }
  }
  if (mcl_native_pack_gemm(&a, bmat, 1, bias_ptr, quant, packed.data(), packed.size()) !=
      MCL_NATIVE_OK)
    return make_error(where(n) + ": packing the weights failed");
  return packed;
}

void Compiler::call_gemm(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  const uint64_t params_spm = t.params_spm;
  mcl_gemm_args a{};
  const uint32_t k_total = uint32_t(x.H * x.W * x.C);
  a.input = in0;
  a.input.h = a.input.w = 1;
  a.input.c = k_total;
  a.input.row_stride = a.input.pixel_stride = k_total;
  a.output = out_tile;
  a.params_offset = uint32_t(params_spm);
  a.act = n.act;
  if (n.ints.count("int8")) {
    a.flags = int8_weight_flags(g, n);
    a.input_zero_point = x.zero_point;
    a.output_zero_point = y.zero_point;
    int8_clamp(y, n.act, a.output_min, a.output_max);
    a.act = {MCL_ACT_NONE, 0.0f, 0.0f};
  }
  call.add(MCL_NATIVE_FN_GEMM, a);
}

} // namespace kann::tiler
