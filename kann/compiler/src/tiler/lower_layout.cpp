// Strided lowerings on whole tensors of any rank (PlannedOp::strided: one cluster computes
// the whole output): Transpose, Concat along any axis, copies of reshaped network inputs,
// and element-wise operators whose operands broadcast in ways the image path does not (a
// [3,4,5] tensor and a [4,1] one). Every tensor is addressed through its per-dimension
// element strides in the SPM (image_strides), so images (channel-last) and row-major
// tensors mix; the loop nest is merged to at most three dimensions per native call (a
// tile's h, w and c) and the remaining outer dimensions become one call each.
#include "tiler/tiler.h"

namespace kann::tiler {

// Element strides of each ONNX dimension of tensor `t` in the full-tensor tile `tile` of its
// storage `a`: an image keeps channel-last order, a one-channel (or one-pixel) storage is
// row-major. Empty when the storage is another geometry (a view).
std::vector<int64_t> Compiler::spm_strides(const Act &a, const Tensor &t,
                                           const mcl_tile &tile) const {
  const auto &s = t.shape;
  if (s.size() == 4 && s[0] == 1 && s[1] == a.C && s[2] == a.H && s[3] == a.W)
    return {int64_t(a.H * a.W * a.C), int64_t(tile.channel_stride), int64_t(tile.row_stride),
            int64_t(tile.pixel_stride)};
  if ((a.C == 1 || a.H * a.W == 1) && t.elements() == a.H * a.W * a.C &&
      (a.C == 1 ? int64_t(tile.pixel_stride) == 1 && int64_t(tile.row_stride) == a.W
                : tile.channel_stride == 1)) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t d = s.size(); d-- > 1;)
      st[d - 1] = st[d] * s[d];
    return st;
  }
  return {};
}

// Calls `make(tiles)` for the loop nest `dims` over operands with element `strides` (one
// vector per operand, same rank as dims) from base tiles `bases` (offset and type used):
// dimensions of size 1 dropped, contiguous neighbours merged, the operand 0 (the output)
// innermost stride last, at most three dimensions per call.
void Compiler::strided_calls(std::vector<int64_t> dims, std::vector<std::vector<int64_t>> strides,
                             const std::vector<mcl_tile> &bases,
                             const std::function<void(std::vector<mcl_tile> &)> &make) const {
  const size_t n = bases.size();
  // Drop unit dimensions; order by the output's stride, largest first (element-wise loops
  // are order-free; copies too, each element written once).
  std::vector<size_t> order;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != 1)
      order.push_back(d);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return strides[0][x] > strides[0][y]; });
  std::vector<int64_t> D;
  std::vector<std::vector<int64_t>> S(n);
  for (size_t d : order) {
    bool merge = !D.empty();
    for (size_t k = 0; k < n && merge; ++k)
      merge = S[k].back() == strides[k][d] * dims[d];
    if (merge) {
      D.back() *= dims[d];
      for (size_t k = 0; k < n; ++k)
        S[k].back() = strides[k][d];
      continue;
    }
    D.push_back(dims[d]);
    for (size_t k = 0; k < n; ++k)
      S[k].push_back(strides[k][d]);
  }
  while (D.size() < 3) { // pad to h, w, c
    D.insert(D.begin(), 1);
    for (auto &s : S)
      s.insert(s.begin(), 0);
  }
  const size_t outer = D.size() - 3;
  int64_t calls = 1;
  for (size_t d = 0; d < outer; ++d)
    calls *= D[d];
  for (int64_t i = 0; i < calls; ++i) {
    std::vector<mcl_tile> tiles(bases);
    int64_t rest = i;
    for (size_t d = outer; d-- > 0;) {
      const int64_t idx = rest % D[d];
      rest /= D[d];
      for (size_t k = 0; k < n; ++k)
        tiles[k].offset += uint32_t(idx * S[k][d] * dtype_bytes(tiles[k].dtype));
    }
    for (size_t k = 0; k < n; ++k) {
      mcl_tile &t = tiles[k];
      t.h = uint32_t(D[outer]), t.w = uint32_t(D[outer + 1]), t.c = uint32_t(D[outer + 2]);
      t.row_stride = uint32_t(S[k][outer]);
      t.pixel_stride = uint32_t(S[k][outer + 1]);
      t.channel_stride = uint32_t(S[k][outer + 2]);
    }
    make(tiles);
  }
}

uint32_t Compiler::dtype_bytes(uint32_t dtype) {
  return dtype == MCL_DTYPE_F32 ? 4 : dtype == MCL_DTYPE_F16 ? 2 : 1;
}

// The strided lowering of one operator on cluster t.cluster (the whole tensors).
Result<void> Compiler::call_strided(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Tensor &yt = g.tensors[n.outputs[0]];
  const Act &y = acts[op.out];
  auto tensor_of = [&](size_t i) -> const Tensor & {
    return g
        .tensors[op.kind == Lowering::Layout && n.op != Op::Transpose ? n.inputs[0] : n.inputs[i]];
  };
  auto strides_or_error = [&](const Act &a, const Tensor &tn,
                              const mcl_tile &tile) -> Result<std::vector<int64_t>> {
    auto s = spm_strides(a, tn, tile);
    if (s.empty() && tn.elements() > 1)
      return make_error(where(n) + ": tensor '" + tn.name +
                        "' is stored as another geometry (a view): not supported here");
    if (s.empty())
      s.assign(tn.shape.size(), 0);
    return s;
  };
  auto ys = strides_or_error(y, yt, t.out);
  if (!ys)
    return ys.error();
  const std::vector<int64_t> &ystr = ys.value();
  auto input_tile = [&](size_t i) {
    const Act &x = acts[op.ins[i]];
    return tile_of(x, t.cluster, full(x), op.stage_in[i]);
  };
  auto copy = [&](const Act &x, const mcl_tile &in, const mcl_tile &out, std::vector<int64_t> dims,
                  std::vector<int64_t> in_str, std::vector<int64_t> out_str) {
    strided_calls(std::move(dims), {std::move(out_str), std::move(in_str)}, {out, in},
                  [&](std::vector<mcl_tile> &tiles) {
                    mcl_unary_args a{};
                    a.output = tiles[0];
                    a.input = tiles[1];
                    a.in_quant = {x.scale, x.zero_point};
                    a.out_quant = {y.scale, y.zero_point};
                    call.add(MCL_NATIVE_FN_COPY, a);
                  });
  };
  switch (op.kind) {
  case Lowering::Layout: {
    const Act &x = acts[op.ins[0]];
    const mcl_tile in = input_tile(0);
    const Tensor &xt = tensor_of(0);
    if (n.op == Op::Transpose) {
      auto xs = strides_or_error(x, xt, in);
      if (!xs)
        return xs.error();
      const auto perm = n.attrs("perm");
      std::vector<int64_t> in_str;
      for (int64_t p : perm)
        in_str.push_back(xs.value()[size_t(p)]);
      copy(x, in, t.out, yt.shape, in_str, ystr);
      return {};
    }
    // A reshape copied (the output is a network input reshaped): element k of one in ONNX
    // order is element k of the other. Walked over the dimensions of the side stored in
    // another order (an image, channel-last), the row-major side indexed by its ONNX order.
    auto xs = strides_or_error(x, xt, in);
    if (!xs)
      return xs.error();
    auto row_major = [](const std::vector<int64_t> &dims) {
      std::vector<int64_t> st(dims.size(), 1);
      for (size_t d = dims.size(); d-- > 1;)
        st[d - 1] = st[d] * dims[d];
      return st;
    };
    if (ystr == row_major(yt.shape))
      copy(x, in, t.out, xt.shape, xs.value(), row_major(xt.shape));
    else if (xs.value() == row_major(xt.shape))
      copy(x, in, t.out, yt.shape, row_major(yt.shape), ystr);
    else
      return make_error(where(n) + ": a reshape between two images (channel-last) is not "
                                   "supported");
    return {};
  }
  case Lowering::Concat: {
    const int64_t axis =
        n.attr("axis", 1) < 0 ? n.attr("axis", 1) + int64_t(yt.shape.size()) : n.attr("axis", 1);
    int64_t at = 0;
    for (size_t i = 0; i < op.ins.size(); ++i) {
      const Act &x = acts[op.ins[i]];
      const Tensor &xt = g.tensors[n.inputs[i]];
      const mcl_tile in = input_tile(i);
      auto xs = strides_or_error(x, xt, in);
      if (!xs)
        return xs.error();
      mcl_tile out = t.out;
      out.offset += uint32_t(at * ystr[size_t(axis)] * y.es);
      copy(x, in, out, xt.shape, xs.value(), ystr);
      at += xt.shape[size_t(axis)];
    }
    return {};
  }
  case Lowering::Eltwise: {
    std::vector<std::vector<int64_t>> str{ystr};
    std::vector<mcl_tile> bases{t.out};
    for (size_t i = 0; i < 2; ++i) {
      const Act &x = acts[op.ins[i]];
      const Tensor &xt = g.tensors[n.inputs[i]];
      const mcl_tile in = input_tile(i);
      auto xs = strides_or_error(x, xt, in);
      if (!xs)
        return xs.error();
      // Aligned to the output's rank (NumPy broadcasting); broadcast dimensions stride 0.
      std::vector<int64_t> s(yt.shape.size(), 0);
      const size_t lead = yt.shape.size() - xt.shape.size();
      for (size_t d = 0; d < xt.shape.size(); ++d)
        s[lead + d] = xt.shape[d] == 1 ? 0 : xs.value()[d];
      str.push_back(s);
      bases.push_back(in);
    }
    const Act &xa = acts[op.ins[0]], &xb = acts[op.ins[1]];
    strided_calls(yt.shape, str, bases, [&](std::vector<mcl_tile> &tiles) {
      mcl_eltwise_args a{};
      a.output = tiles[0];
      a.a = tiles[1];
      a.b = tiles[2];
      a.op = n.op == Op::Add   ? MCL_ELTWISE_ADD
             : n.op == Op::Sub ? MCL_ELTWISE_SUB
             : n.op == Op::Mul ? MCL_ELTWISE_MUL
                               : MCL_ELTWISE_DIV;
      a.act = n.act;
      a.a_quant = {xa.scale, xa.zero_point};
      a.b_quant = {xb.scale, xb.zero_point};
      a.out_quant = {y.scale, y.zero_point};
      if (!n.ints.count("int8"))
        a.a_quant = a.b_quant = a.out_quant = {1.0f, 0};
      call.add(MCL_NATIVE_FN_ELTWISE, a);
    });
    return {};
  }
  default:
    return make_error(where(n) + ": internal error: no strided lowering");
  }
}

} // namespace kann::tiler
