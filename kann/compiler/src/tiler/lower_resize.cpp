// Lowering of Resize (nearest / bilinear): input rows per output band, call geometry.
#include "tiler/tiler.h"

namespace kann::tiler {

// Source rows of output rows [y0, y1): the ratio of sizes (or of size-1 for align_corners),
// with two rows of margin for interpolation and rounding.
Box Compiler::need_resize(const PlannedOp &op, const Act &in, const Box &o) const {
  const Act &out = acts[op.out];
  const double r = std::max(double(in.H) / double(out.H),
                            double(in.H - 1) / double(std::max<int64_t>(1, out.H - 1)));
  const int64_t a = std::max<int64_t>(0, int64_t(std::floor(double(o.y0) * r)) - 2);
  const int64_t b = std::min<int64_t>(in.H, int64_t(std::ceil(double(o.y1) * r)) + 2);
  return {a, std::max(b, a + 1), 0, in.C};
}

void Compiler::call_resize(const PlannedOp &op, const CallTiles &t, Call &call) const {
  const Node &n = g.nodes[op.node];
  const Act &x = acts[op.ins[0]];
  const Act &y = acts[op.out];
  const Box &ob = t.out_box;
  const Box &ib = t.in_box;
  const mcl_tile &in0 = t.in;
  const mcl_tile &out_tile = t.out;
  mcl_resize_args a{};
  a.input = in0;
  a.output = out_tile;
  const std::string mode = n.strings.count("mode") ? n.strings.at("mode") : "nearest";
  const std::string coord = n.strings.count("coordinate_transformation_mode")
                                ? n.strings.at("coordinate_transformation_mode")
                                : "half_pixel";
  const std::string nearest =
      n.strings.count("nearest_mode") ? n.strings.at("nearest_mode") : "round_prefer_floor";
  a.mode = mode == "linear" ? MCL_RESIZE_BILINEAR : MCL_RESIZE_NEAREST;
  a.coord_mode = coord == "asymmetric"           ? MCL_COORD_ASYMMETRIC
                 : coord == "align_corners"      ? MCL_COORD_ALIGN_CORNERS
                 : coord == "pytorch_half_pixel" ? MCL_COORD_PYTORCH_HALF_PIXEL
                                                 : MCL_COORD_HALF_PIXEL;
  a.nearest_mode = nearest == "round_prefer_ceil" ? MCL_NEAREST_ROUND_PREFER_CEIL
                   : nearest == "floor"           ? MCL_NEAREST_FLOOR
                   : nearest == "ceil"            ? MCL_NEAREST_CEIL
                                                  : MCL_NEAREST_ROUND_PREFER_FLOOR;
  a.scale_h = n.attrf("scale_h", 1.0f);
  a.scale_w = n.attrf("scale_w", 1.0f);
  a.full_in_h = uint32_t(x.H), a.full_in_w = uint32_t(x.W);
  a.full_out_h = uint32_t(y.H), a.full_out_w = uint32_t(y.W);
  a.in_y0 = int32_t(ib.y0), a.in_x0 = 0;
  a.out_y0 = int32_t(ob.y0), a.out_x0 = 0;
  a.in_quant = {x.scale, x.zero_point};
  a.out_quant = {y.scale, y.zero_point};
  call.add(MCL_NATIVE_FN_RESIZE, a);
}

} // namespace kann::tiler
