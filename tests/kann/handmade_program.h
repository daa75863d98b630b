// A small hand-written kbin program used by the format and interpreter tests: a 3x3 "same"
// convolution (2 -> 3 channels, ReLU) on an 8x6 channel-last image split in two bands of
// output rows over 2 clusters. Cluster 0 multicasts the packed weights to both clusters,
// each cluster loads its own input band (with halo) and address table, all wait and meet at
// a barrier, convolve, and store their rows into the output argument.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "kann/format.h"
#include "manycl/native/native.h"

namespace kann::test {

struct Handmade {
  static constexpr uint32_t H = 8, W = 6, CIN = 2, COUT = 3;
  std::vector<float> input;   // [H][W][CIN]
  std::vector<float> weights; // [COUT][CIN][3][3]
  std::vector<float> bias;    // [COUT]
  format::Program program;

  std::vector<float> reference() const {
    std::vector<float> out(H * W * COUT);
    for (uint32_t y = 0; y < H; ++y)
      for (uint32_t x = 0; x < W; ++x)
        for (uint32_t o = 0; o < COUT; ++o) {
          double acc = bias[o];
          for (uint32_t i = 0; i < CIN; ++i)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                int iy = int(y) + ky - 1, ix = int(x) + kx - 1;
                if (iy < 0 || ix < 0 || iy >= int(H) || ix >= int(W))
                  continue;
                acc += double(input[(iy * W + ix) * CIN + i]) *
                       weights[((o * CIN + i) * 3 + ky) * 3 + kx];
              }
          out[(y * W + x) * COUT + o] = float(std::max(acc, 0.0));
        }
    return out;
  }
};

inline mcl_tile tile(uint32_t offset, uint32_t h, uint32_t w, uint32_t c) {
  return mcl_tile{offset, h, w, c, w * c, c, 1, MCL_DTYPE_F32};
}

inline Handmade make_handmade() {
  Handmade m;
  const uint32_t H = Handmade::H, W = Handmade::W, CIN = Handmade::CIN, COUT = Handmade::COUT;
  for (uint32_t i = 0; i < H * W * CIN; ++i)
    m.input.push_back(std::sin(0.37f * i));
  for (uint32_t i = 0; i < COUT * CIN * 9; ++i)
    m.weights.push_back(std::cos(0.11f * i) * 0.5f);
  m.bias = {0.1f, -0.2f, 0.05f};

  format::Program &p = m.program;
  p.cluster_count = 2;
  p.pes_per_cluster = 4;
  p.spm_bytes = 256 << 10;
  p.preset = "small";
  p.arg_count = 2;
  p.tensors.push_back({"image",
                       KBIN_ROLE_INPUT,
                       0,
                       MCL_DTYPE_F32,
                       KBIN_LAYOUT_ONNX,
                       {1, H, W, CIN},
                       H * W * CIN * 4,
                       1.0f,
                       0});
  p.tensors.push_back({"features",
                       KBIN_ROLE_OUTPUT,
                       1,
                       MCL_DTYPE_F32,
                       KBIN_LAYOUT_ONNX,
                       {1, H, W, COUT},
                       H * W * COUT * 4,
                       1.0f,
                       0});

  // SPM map (same on both clusters): params, table, pad row, input band, output band.
  const uint32_t band = H / 2; // output rows per cluster
  const uint32_t params_at = 0;
  mcl_conv_args base{};
  base.groups = 1;
  base.kernel_h = base.kernel_w = 3;
  base.stride_h = base.stride_w = 1;
  base.dilation_h = base.dilation_w = 1;
  base.act.kind = MCL_ACT_RELU;
  base.input = tile(0, band + 1, W, CIN);
  base.output = tile(0, band, W, COUT);
  const uint32_t params_size = uint32_t(mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &base));
  const uint32_t table_at = (params_at + params_size + 63) / 64 * 64;
  const uint32_t table_bytes = uint32_t(mcl_native_conv_table_size(&base) * 4);
  const uint32_t pad_at = (table_at + table_bytes + 63) / 64 * 64;
  const uint32_t in_at = pad_at + 64;
  const uint32_t in_bytes = (band + 1) * W * CIN * 4;
  const uint32_t out_at = (in_at + in_bytes + 63) / 64 * 64;
  p.spm_required = out_at + band * W * COUT * 4;

  std::vector<uint8_t> packed(params_size);
  base.params_offset = params_at;
  mcl_native_pack_conv(MCL_NATIVE_FN_CONV2D, &base, m.weights.data(), m.bias.data(), nullptr,
                       packed.data(), packed.size());
  p.params = packed;
  p.streams.resize(2);
  for (uint32_t k = 0; k < 2; ++k) {
    // Cluster 0 has output rows 0..3 and needs input rows 0..4; cluster 1 rows 4..7 / 3..7.
    const uint32_t in_y0 = k == 0 ? 0 : band - 1;
    mcl_conv_args a = base;
    a.input = tile(in_at, band + 1, W, CIN);
    a.output = tile(out_at, band, W, COUT);
    a.params_offset = params_at;
    a.table_offset = table_at;
    a.pad_row_offset = pad_at;
    a.origin_y = int32_t(k * band) - 1 - int32_t(in_y0);
    a.origin_x = -1;
    std::vector<int32_t> table(mcl_native_conv_table_size(&a));
    mcl_native_plan_conv(MCL_NATIVE_FN_CONV2D, &a, table.data(), table.size());
    const uint64_t table_in_params = (p.params.size() + 63) / 64 * 64;
    p.params.resize(table_in_params);
    p.params.insert(p.params.end(), reinterpret_cast<uint8_t *>(table.data()),
                    reinterpret_cast<uint8_t *>(table.data() + table.size()));

    auto &s = p.streams[k];
    kbin_dma_args d{};
    d.notify_signal = -1;
    if (k == 0) {
      d.kind = KBIN_DMA_MULTICAST;
      d.cluster_mask = 0x3;
      d.ddr = {KBIN_DDR_PARAMS, 0, 0};
      d.spm_offset = params_at;
      d.shape = {params_size, 1, 1, params_size, params_size, params_size, params_size};
      s.push_back(format::Record::make(KBIN_FN_DMA, d));
    }
    d = {};
    d.notify_signal = -1;
    d.kind = KBIN_DMA_LOAD;
    d.ddr = {KBIN_DDR_PARAMS, 0, table_in_params};
    d.spm_offset = table_at;
    d.shape = {table_bytes, 1, 1, table_bytes, table_bytes, table_bytes, table_bytes};
    s.push_back(format::Record::make(KBIN_FN_DMA, d));
    d.ddr = {KBIN_DDR_ARG, 0, uint64_t(in_y0) * W * CIN * 4};
    d.spm_offset = in_at;
    d.shape = {in_bytes, 1, 1, in_bytes, in_bytes, in_bytes, in_bytes};
    s.push_back(format::Record::make(KBIN_FN_DMA, d));
    s.push_back(format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{0, 0}));
    s.push_back(format::Record{KBIN_FN_BARRIER, {}});
    s.push_back(format::Record::make(MCL_NATIVE_FN_CONV2D, a));
    d = {};
    d.notify_signal = -1;
    d.kind = KBIN_DMA_STORE;
    d.spm_offset = out_at;
    d.ddr = {KBIN_DDR_ARG, 1, uint64_t(k) * band * W * COUT * 4};
    const uint64_t out_bytes = band * W * COUT * 4;
    d.shape = {out_bytes, 1, 1, out_bytes, out_bytes, out_bytes, out_bytes};
    s.push_back(format::Record::make(KBIN_FN_DMA, d));
    s.push_back(format::Record::make(KBIN_FN_WAIT_DMA, kbin_wait_dma_args{0, 0}));
  }
  return m;
}

inline std::vector<uint8_t> as_bytes(const std::vector<float> &v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
inline std::vector<float> as_floats(const std::vector<uint8_t> &b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

} // namespace kann::test
