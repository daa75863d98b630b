// Strided lowerings on whole tensors of any rank (PlannedOp::strided: one cluster computes
// the whole output): Transpose, Concat along any axis, copies of reshaped network inputs,
// and element-wise operators whose operands broadcast in ways the image path does not (a
// [3,4,5] tensor and a [4,1] one). Every tensor is addressed through its per-dimension
// element strides in the SPM (image_strides), so images (channel-last) and row-major
// tensors mix; the loop nest is merged to at most three dimensions per native call (a
// tile's h, w and c) and the remaining outer dimensions become one call each.
#include "kann/custom_ops.h"
#include "tiler/tiler.h"

#include <numeric>

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
  while (D.size() < 3) { // pad to h, w, c (stride 1: an output's channels need one)
    D.insert(D.begin(), 1);
    for (auto &s : S)
      s.insert(s.begin(), 1);
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

mcl_tile Compiler::const_tile(const PlannedOp &op, size_t k, uint64_t params_spm) const {
  const Act a = storage_of(g.tensors[g.nodes[op.node].inputs[k]]);
  mcl_tile t{};
  t.offset = uint32_t(params_spm + op.const_operands.at(k));
  t.h = uint32_t(a.H), t.w = uint32_t(a.W), t.c = uint32_t(a.C);
  t.row_stride = uint32_t(a.W * a.C);
  t.pixel_stride = uint32_t(a.C);
  t.channel_stride = 1;
  t.dtype = acts[op.out].dtype;
  return t;
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
  // Node input k of an operator with constant operands: its tile and its storage (an
  // activation's, or the constant's in the parameters: float, scale 1).
  auto operand = [&](size_t k) -> std::pair<mcl_tile, Act> {
    if (op.const_operands.count(k)) {
      Act a = storage_of(g.tensors[n.inputs[k]]);
      a.dtype = y.dtype, a.es = y.es;
      return {const_tile(op, k, t.params_spm), a};
    }
    const size_t i = op.act_slot(k);
    return {input_tile(i), acts[op.ins[i]]};
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
  if (n.op == Op::Custom) { // MCL_CUSTOM_WHOLE: the user's function on the whole tensors
    const custom::Operator *custom = custom::of(n);
    if (!custom)
      return make_error(where(n) + ": custom operator no longer registered");
    std::vector<mcl_tile> inputs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      inputs.push_back(operand(i).first);
      if (inputs.back().dtype != t.out.dtype || t.out.dtype >= 32 ||
          !(custom->dtypes & (1u << t.out.dtype)))
        return make_error(where(n) + ": custom operator " + custom->domain +
                          "::" + custom->op_type +
                          " does not accept this element type (its mcl_custom_op.dtypes)");
    }
    call.add(MCL_NATIVE_FN_CUSTOM,
             custom::make_args(*custom, n, inputs, t.out, opt.device.pes_per_cluster));
    return {};
  }
  if (n.op == Op::MatMul) { // two activations: one native product per batch index
    const auto [ta, xa] = operand(0);
    const auto [tb, xb] = operand(1);
    const Tensor &at = g.tensors[n.inputs[0]], &bt = g.tensors[n.inputs[1]];
    auto as = strides_or_error(xa, at, ta), bs = strides_or_error(xb, bt, tb);
    if (!as)
      return as.error();
    if (!bs)
      return bs.error();
    const size_t ra = at.shape.size(), rb = bt.shape.size(), ry = yt.shape.size();
    // The native product writes each output row's columns contiguously; an output stored
    // as an image (channel-last [1,C,H,W]: its columns are pixels) gets one call per column.
    const bool per_column = ystr[ry - 1] != 1;
    int64_t batches = 1;
    for (size_t d = 0; d + 2 < ry; ++d)
      batches *= yt.shape[d];
    for (int64_t i = 0; i < batches; ++i) {
      mcl_matmul_args m{};
      m.a = ta, m.b = tb, m.output = t.out;
      int64_t rest = i;
      for (size_t d = ry - 2; d-- > 0;) { // batch dimensions, broadcast from the right
        const int64_t idx = rest % yt.shape[d];
        rest /= yt.shape[d];
        m.output.offset += uint32_t(idx * ystr[d] * y.es);
        const size_t from_end = ry - d; // >= 3
        if (ra >= from_end && at.shape[ra - from_end] != 1)
          m.a.offset += uint32_t(idx * as.value()[ra - from_end] * xa.es);
        if (rb >= from_end && bt.shape[rb - from_end] != 1)
          m.b.offset += uint32_t(idx * bs.value()[rb - from_end] * xb.es);
      }
      const int64_t rows = at.shape[ra - 2], inner = at.shape[ra - 1], cols = bt.shape[rb - 1];
      m.a.h = uint32_t(rows), m.a.w = 1, m.a.c = uint32_t(inner);
      m.a.row_stride = m.a.pixel_stride = uint32_t(as.value()[ra - 2]);
      m.a.channel_stride = uint32_t(as.value()[ra - 1]);
      m.b.h = 1, m.b.w = uint32_t(inner), m.b.c = uint32_t(cols);
      m.b.row_stride = 0, m.b.pixel_stride = uint32_t(bs.value()[rb - 2]);
      m.b.channel_stride = uint32_t(bs.value()[rb - 1]);
      m.output.h = uint32_t(rows), m.output.w = 1, m.output.c = uint32_t(cols);
      m.output.row_stride = m.output.pixel_stride = uint32_t(ystr[ry - 2]);
      m.output.channel_stride = 1;
      m.act = n.act;
      if (!per_column) {
        call.add(MCL_NATIVE_FN_MATMUL, m);
        continue;
      }
      for (int64_t col = 0; col < cols; ++col) {
        mcl_matmul_args one = m;
        one.b.offset += uint32_t(col * bs.value()[rb - 1] * xb.es);
        one.output.offset += uint32_t(col * ystr[ry - 1] * y.es);
        one.b.c = one.output.c = 1;
        call.add(MCL_NATIVE_FN_MATMUL, one);
      }
    }
    return {};
  }
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
    if (n.op == Op::Pad) {
      // In three dimensions (h, w, c: the padded or non-unit ones, ordered by the output's
      // strides so that c is contiguous), whatever the tensor's rank and storage.
      auto xs = strides_or_error(x, xt, in);
      if (!xs)
        return xs.error();
      const auto pads = n.attrs("pads");
      const size_t rank = xt.shape.size();
      std::vector<size_t> kept;
      for (size_t d = 0; d < rank; ++d)
        if (yt.shape[d] > 1)
          kept.push_back(d);
      if (kept.size() > 3)
        return make_error(where(n) + ": padding a tensor of more than three dimensions larger "
                                     "than 1 is not supported");
      std::stable_sort(kept.begin(), kept.end(),
                       [&](size_t a, size_t b) { return ystr[a] > ystr[b]; });
      std::vector<int64_t> xd(3, 1), yd(3, 1), xs3(3, 0), ys3(3, 0), pb(3, 0), pe(3, 0);
      for (size_t k = 0; k < kept.size(); ++k) {
        const size_t d = kept[k], j = 3 - kept.size() + k;
        xd[j] = xt.shape[d], yd[j] = yt.shape[d], xs3[j] = xs.value()[d], ys3[j] = ystr[d];
        pb[j] = pads[d], pe[j] = pads[rank + d];
      }
      auto at = [&](mcl_tile base, const std::vector<int64_t> &pos, const std::vector<int64_t> &s,
                    int64_t es) {
        for (size_t j = 0; j < 3; ++j)
          base.offset += uint32_t(pos[j] * s[j] * es);
        return base;
      };
      const std::string mode = n.strings.count("mode") ? n.strings.at("mode") : "constant";
      if (mode == "constant") { // one native pad: the value around the copied input
        mcl_pad_args a{};
        a.input = in, a.output = t.out;
        a.input.h = uint32_t(xd[0]), a.input.w = uint32_t(xd[1]), a.input.c = uint32_t(xd[2]);
        a.input.row_stride = uint32_t(xs3[0]), a.input.pixel_stride = uint32_t(xs3[1]);
        a.input.channel_stride = uint32_t(xs3[2]);
        a.output.h = uint32_t(yd[0]), a.output.w = uint32_t(yd[1]), a.output.c = uint32_t(yd[2]);
        a.output.row_stride = uint32_t(ys3[0]), a.output.pixel_stride = uint32_t(ys3[1]);
        a.output.channel_stride = uint32_t(ys3[2]);
        a.pad_top = uint32_t(pb[0]), a.pad_left = uint32_t(pb[1]), a.pad_channel = uint32_t(pb[2]);
        a.value = n.floats.count("value") ? n.floats.at("value") : 0.0f;
        a.quant = {1.0f, 0};
        call.add(MCL_NATIVE_FN_PAD, a);
        return {};
      }
      // Reflect / edge: the input copied inside, then each border slice copied from the
      // output slice it mirrors (or repeats): channels first, then columns, then rows, each
      // slice spanning the dimensions already padded, so corners come out right.
      copy(x, in, at(t.out, pb, ys3, y.es), xd, xs3, ys3);
      const bool reflect = mode == "reflect";
      for (int k = 2; k >= 0; --k) {
        std::vector<int64_t> dims(3), from(3);
        for (int j = 0; j < 3; ++j) {
          const bool done = j > k; // already padded: the whole extent
          dims[size_t(j)] = done ? yd[size_t(j)] : xd[size_t(j)];
          from[size_t(j)] = done ? 0 : pb[size_t(j)];
        }
        dims[size_t(k)] = 1;
        const int64_t lo = pb[size_t(k)], n_in = xd[size_t(k)];
        auto slice = [&](int64_t dst, int64_t src) {
          std::vector<int64_t> d = from, s = from;
          d[size_t(k)] = dst, s[size_t(k)] = src;
          copy(y, at(t.out, s, ys3, y.es), at(t.out, d, ys3, y.es), dims, ys3, ys3);
        };
        for (int64_t i = 0; i < lo; ++i) // before: index lo - 1 - i mirrors lo + 1 + i
          slice(lo - 1 - i, reflect ? lo + 1 + i : lo);
        for (int64_t i = 0; i < pe[size_t(k)]; ++i) // after the last input index lo + n_in - 1
          slice(lo + n_in + i, reflect ? lo + n_in - 2 - i : lo + n_in - 1);
      }
      return {};
    }
    if (n.op == Op::StridedSlice || n.op == Op::Expand || n.op == Op::Tile ||
        n.op == Op::DepthToSpace || n.op == Op::SpaceToDepth) {
      auto xs_r = strides_or_error(x, xt, in);
      if (!xs_r)
        return xs_r.error();
      const std::vector<int64_t> &xs = xs_r.value();
      const auto &xd = xt.shape;
      if (n.op == Op::StridedSlice) { // the first element at the starts, strides times steps
        const auto begin = n.attrs("begin"), step = n.attrs("step");
        mcl_tile from = in;
        std::vector<int64_t> in_str(xd.size());
        for (size_t d = 0; d < xd.size(); ++d) {
          from.offset += uint32_t(begin[d] * xs[d] * x.es);
          in_str[d] = xs[d] * step[d];
        }
        if (yt.elements() == 0)
          return {};
        // Tile strides are unsigned: a dimension walked backwards (negative step) is one
        // copy per output index (a flip of 64 rows: 64 calls).
        std::vector<size_t> back;
        std::vector<int64_t> dims = yt.shape;
        int64_t calls = 1;
        for (size_t d = 0; d < xd.size(); ++d)
          if (step[d] < 0)
            back.push_back(d), calls *= dims[d], dims[d] = 1, in_str[d] = 0;
        for (int64_t i = 0; i < calls; ++i) {
          mcl_tile src = from, dst = t.out;
          int64_t rest = i, src_at = int64_t(from.offset), dst_at = int64_t(t.out.offset);
          for (size_t k = back.size(); k-- > 0;) {
            const size_t d = back[k];
            const int64_t idx = rest % yt.shape[d];
            rest /= yt.shape[d];
            src_at += idx * step[d] * xs[d] * x.es;
            dst_at += idx * ystr[d] * y.es;
          }
          src.offset = uint32_t(src_at), dst.offset = uint32_t(dst_at);
          copy(x, src, dst, dims, in_str, ystr);
        }
        return {};
      }
      if (n.op == Op::Expand) { // broadcast dimensions read with stride 0
        std::vector<int64_t> in_str(yt.shape.size(), 0);
        const size_t lead = yt.shape.size() - xd.size();
        for (size_t d = 0; d < xd.size(); ++d)
          in_str[lead + d] = xd[d] == 1 ? 0 : xs[d];
        copy(x, in, t.out, yt.shape, in_str, ystr);
        return {};
      }
      if (n.op == Op::Tile) { // output dimension d as (repeat, index): the repeat strides 0
        const auto reps = n.attrs("repeats");
        std::vector<int64_t> dims, in_str, out_str;
        for (size_t d = 0; d < xd.size(); ++d) {
          dims.push_back(reps[d]), in_str.push_back(0), out_str.push_back(xd[d] * ystr[d]);
          dims.push_back(xd[d]), in_str.push_back(xs[d]), out_str.push_back(ystr[d]);
        }
        copy(x, in, t.out, dims, in_str, out_str);
        return {};
      }
      // DepthToSpace: y[c][h*b+i][w*b+j] = x[channel(c, i, j)][h][w], walked over
      // (c, h, i, w, j); SpaceToDepth is the inverse (x and y swapped).
      const int64_t b = n.attr("blocksize", 1);
      const bool d2s = n.op == Op::DepthToSpace;
      const auto &img = d2s ? yt.shape : xd; // the spatial side
      const auto &sp = d2s ? ystr : xs;      // its strides
      const auto &dp = d2s ? xs : ystr;      // the depth side's strides
      const int64_t C = img[1], H = img[2] / b, W = img[3] / b;
      const bool crd = d2s && n.strings.count("mode") && n.strings.at("mode") == "CRD";
      // depth channel of (c, i, j): DCR (i*b + j)*C + c; CRD (and SpaceToDepth) c*b*b + i*b + j
      // (SpaceToDepth: (i*b + j)*C + c, as DCR).
      const bool dcr = !crd;
      const int64_t c_str = dcr ? dp[1] : dp[1] * b * b;
      const int64_t i_str = dcr ? dp[1] * b * C : dp[1] * b;
      const int64_t j_str = dcr ? dp[1] * C : dp[1];
      std::vector<int64_t> dims{C, H, b, W, b};
      std::vector<int64_t> s_str{sp[1], sp[2] * b, sp[2], sp[3] * b, sp[3]};
      std::vector<int64_t> d_str{c_str, dp[2], i_str, dp[3], j_str};
      if (d2s)
        copy(x, in, t.out, dims, d_str, s_str);
      else
        copy(x, in, t.out, dims, s_str, d_str);
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
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto [in, x] = operand(i);
      const Tensor &xt = g.tensors[n.inputs[i]];
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
    std::vector<Act> operands;
    for (size_t i = 0; i < 2; ++i) {
      const auto [in, x] = operand(i);
      operands.push_back(x);
      const Tensor &xt = g.tensors[n.inputs[i]];
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
    const Act &xa = operands[0], &xb = operands[1];
    strided_calls(yt.shape, str, bases, [&](std::vector<mcl_tile> &tiles) {
      mcl_eltwise_args a{};
      a.output = tiles[0];
      a.a = tiles[1];
      a.b = tiles[2];
      a.op = n.op == Op::Add   ? MCL_ELTWISE_ADD
             : n.op == Op::Sub ? MCL_ELTWISE_SUB
             : n.op == Op::Mul ? MCL_ELTWISE_MUL
             : n.op == Op::Max ? MCL_ELTWISE_MAX
             : n.op == Op::Min ? MCL_ELTWISE_MIN
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
  case Lowering::Reduce: {
    // Reduced dimensions (merged where contiguous) are the tile's rows and pixels, the
    // innermost kept one its channels; one call per index of the other kept dimensions.
    const Act &x = acts[op.ins[0]];
    const Tensor &xt = g.tensors[n.inputs[0]];
    const mcl_tile in = input_tile(0);
    auto xs = strides_or_error(x, xt, in);
    if (!xs)
      return xs.error();
    const auto axes = n.attrs("axes");
    const bool keep = n.attr("keepdims", 1) != 0;
    std::vector<int64_t> red_dims, red_str, kept_dims, kept_in, kept_out;
    size_t yd = 0;
    for (size_t d = 0; d < xt.shape.size(); ++d) {
      const bool reduced = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
      if (reduced) {
        if (xt.shape[d] > 1)
          red_dims.push_back(xt.shape[d]), red_str.push_back(xs.value()[d]);
        yd += keep ? 1 : 0;
        continue;
      }
      kept_dims.push_back(xt.shape[d]);
      kept_in.push_back(xs.value()[d]);
      kept_out.push_back(ystr[yd++]);
    }
    // Merge reduced dimensions that are contiguous (largest stride first).
    std::vector<size_t> order(red_dims.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return red_str[a] > red_str[b]; });
    std::vector<int64_t> rd, rs;
    for (size_t k : order) {
      if (!rd.empty() && rs.back() == red_str[k] * red_dims[k]) {
        rd.back() *= red_dims[k];
        rs.back() = red_str[k];
        continue;
      }
      rd.push_back(red_dims[k]);
      rs.push_back(red_str[k]);
    }
    if (rd.size() > 2)
      return make_error(where(n) + ": more than two non-adjacent groups of reduced axes");
    while (rd.size() < 2)
      rd.insert(rd.begin(), 1), rs.insert(rs.begin(), 0);
    // The innermost kept dimension (smallest output stride) is the channels.
    size_t inner = kept_dims.size();
    for (size_t k = 0; k < kept_dims.size(); ++k)
      if (kept_dims[k] > 1 && (inner == kept_dims.size() || kept_out[k] < kept_out[inner]))
        inner = k;
    mcl_reduce_args base{};
    base.input = in;
    base.input.h = uint32_t(rd[0]), base.input.w = uint32_t(rd[1]);
    base.input.row_stride = uint32_t(rs[0]), base.input.pixel_stride = uint32_t(rs[1]);
    base.input.c = inner < kept_dims.size() ? uint32_t(kept_dims[inner]) : 1;
    base.input.channel_stride = inner < kept_dims.size() ? uint32_t(kept_in[inner]) : 0;
    base.output = t.out;
    base.output.h = base.output.w = 1;
    base.output.c = base.input.c;
    base.output.row_stride = base.output.pixel_stride = 0;
    base.output.channel_stride = inner < kept_dims.size() ? uint32_t(kept_out[inner]) : 1;
    base.op = n.op == Op::ReduceSum         ? MCL_REDUCE_SUM
              : n.op == Op::ReduceMean      ? MCL_REDUCE_MEAN
              : n.op == Op::ReduceMax       ? MCL_REDUCE_MAX
              : n.op == Op::ReduceMin       ? MCL_REDUCE_MIN
              : n.op == Op::ReduceProd      ? MCL_REDUCE_PROD
              : n.op == Op::ReduceL1        ? MCL_REDUCE_L1
              : n.op == Op::ReduceL2        ? MCL_REDUCE_L2
              : n.op == Op::ReduceSumSquare ? MCL_REDUCE_SUM_SQUARE
              : n.op == Op::ReduceLogSum    ? MCL_REDUCE_LOG_SUM
                                            : MCL_REDUCE_LOG_SUM_EXP;
    int64_t calls = 1;
    for (size_t k = 0; k < kept_dims.size(); ++k)
      if (k != inner)
        calls *= kept_dims[k];
    for (int64_t i = 0; i < calls; ++i) {
      mcl_reduce_args a = base;
      int64_t rest = i;
      for (size_t k = kept_dims.size(); k-- > 0;) {
        if (k == inner)
          continue;
        const int64_t idx = rest % kept_dims[k];
        rest /= kept_dims[k];
        a.input.offset += uint32_t(idx * kept_in[k] * x.es);
        a.output.offset += uint32_t(idx * kept_out[k] * y.es);
      }
      call.add(MCL_NATIVE_FN_REDUCE, a);
    }
    return {};
  }
  default:
    return make_error(where(n) + ": internal error: no strided lowering");
  }
}

} // namespace kann::tiler
