// trace_demo: C = A × B (FP32) on the "small" device preset, written the way native code
// for ManyCL is written: B is read from DDR once and multicast to every cluster, each
// cluster streams its band of A through a double buffer with 2-D strided transfers (A's
// rows are padded in DDR), computes on its PEs with mcl_parallel_for while the next tile
// loads, and writes C back. The run's modeled timeline goes to a Chrome/Perfetto trace.
//
//   manycl_trace_demo [trace.json]      (default: $MANYCL_TRACE, else trace_demo.json)
//
// Open the file at https://ui.perfetto.dev: one track per cluster for compute, DMA and
// waits in modeled time, and a host track in wall time.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "manycl/device/command.h"
#include "manycl/device/device.h"
#include "manycl/device/report.h"
#include "manycl/device_api.h"

namespace {

constexpr uint32_t M = 128, K = 64, N = 64; // C[M][N] = A[M][K] × B[K][N]
constexpr uint32_t kLda = K + 8;            // A is stored with padded rows
constexpr uint32_t kTileRows = 16;

// SPM layout of every cluster (bytes).
constexpr uint64_t kSpmB = 0;
constexpr uint64_t kSpmA[2] = {K * N * 4, K *N * 4 + kTileRows *K * 4};
constexpr uint64_t kSpmC[2] = {kSpmA[1] + kTileRows * K * 4,
                               kSpmA[1] + kTileRows *K * 4 + kTileRows *N * 4};
constexpr uint32_t kSignalB = 0;

struct Buffers {
  mcl_ddr_window a, b, c;
};

struct TileJob {
  const float *a;
  const float *b;
  float *c;
};

// One output row per task: the PE computes it and accounts its FMAs.
void row_task(void *arg, uint32_t row, uint32_t /*pe*/) {
  auto *job = static_cast<TileJob *>(arg);
  const float *a = job->a + row * K;
  float *c = job->c + row * N;
  if (mcl_check_spm_range(a, K * 4) != MCL_OK || mcl_check_spm_range(c, N * 4) != MCL_OK)
    return;
  for (uint32_t j = 0; j < N; ++j)
    c[j] = 0;
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t j = 0; j < N; ++j)
      c[j] += a[k] * job->b[k * N + j];
  mcl_account_macs(MCL_ELEM_FP32, K * N, 1);
}

// The program every cluster runs (SPMD over the command's clusters).
void program(const Buffers &buf) {
  const uint32_t me = mcl_cluster_id(), clusters = mcl_cluster_count();
  auto *spm = static_cast<uint8_t *>(mcl_spm_base());
  const uint32_t rows = M / clusters, first_row = me * rows, tiles = rows / kTileRows;

  if (me == 0) {
    // B once from DDR to every cluster; each learns of its arrival through a signal.
    std::vector<uint32_t> all(clusters);
    for (uint32_t c = 0; c < clusters; ++c)
      all[c] = c;
    mcl_dma_desc d{};
    d.src = {MCL_DMA_DDR, 0, 0, &buf.b};
    d.dst = {MCL_DMA_SPM, 0, kSpmB, nullptr};
    d.shape = mcl_shape_1d(K * N * 4);
    d.multicast = all.data();
    d.multicast_count = clusters;
    d.notify_signal = kSignalB;
    d.label = "B multicast";
    if (!mcl_dma_start(&d))
      return;
  }
  // A tile: kTileRows rows of K floats, read with the padded stride, packed in SPM.
  const mcl_dma_shape a_tile = mcl_shape_2d(K * 4, kTileRows, kLda * 4, K * 4);
  const mcl_dma_shape c_tile = mcl_shape_1d(kTileRows * N * 4);
  mcl_dma_handle a_loaded[2] = {0, 0}, c_stored[2] = {0, 0};
  a_loaded[0] = mcl_dma_get(&buf.a, uint64_t(first_row) * kLda * 4, kSpmA[0], &a_tile);
  mcl_signal_wait(kSignalB, 1);

  for (uint32_t t = 0; t < tiles; ++t) {
    const uint32_t cur = t % 2, next = 1 - cur;
    if (t + 1 < tiles) // prefetch the next tile while this one computes
      a_loaded[next] = mcl_dma_get(&buf.a, uint64_t(first_row + (t + 1) * kTileRows) * kLda * 4,
                                   kSpmA[next], &a_tile);
    if (mcl_dma_wait(a_loaded[cur]) != MCL_OK)
      return;
    if (c_stored[cur] && mcl_dma_wait(c_stored[cur]) != MCL_OK) // C buffer free again
      return;
    TileJob job{reinterpret_cast<const float *>(spm + kSpmA[cur]),
                reinterpret_cast<const float *>(spm + kSpmB),
                reinterpret_cast<float *>(spm + kSpmC[cur])};
    mcl_parallel_for(kTileRows, row_task, &job);
    c_stored[cur] =
        mcl_dma_put(kSpmC[cur], &buf.c, uint64_t(first_row + t * kTileRows) * N * 4, &c_tile);
  }
  mcl_dma_wait_all();
  mcl_barrier();
  mcl_log("cluster %u done", me);
}

} // namespace

int main(int argc, char **argv) {
  using namespace manycl::device;
  std::string trace = argc > 1 ? argv[1] : "";
  if (trace.empty()) {
    const char *env = std::getenv("MANYCL_TRACE");
    trace = env && *env ? env : "trace_demo.json";
  }
  Reports::instance().set_trace_path(trace);

  auto config = preset("small");
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().message.c_str());
    return 1;
  }
  Device device(config.value());
  Ddr &ddr = device.ddr();
  Buffers buf{};
  auto a = ddr.allocate(uint64_t(M) * kLda * 4), b = ddr.allocate(K * N * 4),
       c = ddr.allocate(M * N * 4);
  if (!a || !b || !c) {
    std::fprintf(stderr, "DDR allocation failed\n");
    return 1;
  }
  buf.a = {a.value(), uint64_t(M) * kLda * 4};
  buf.b = {b.value(), K * N * 4};
  buf.c = {c.value(), M * N * 4};
  auto *ha = reinterpret_cast<float *>(ddr.at(buf.a.base));
  auto *hb = reinterpret_cast<float *>(ddr.at(buf.b.base));
  auto *hc = reinterpret_cast<float *>(ddr.at(buf.c.base));
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t k = 0; k < kLda; ++k)
      ha[i * kLda + k] = k < K ? float((i * 7 + k * 3) % 17) - 8 : NAN; // padding never read
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t j = 0; j < N; ++j)
      hb[k * N + j] = float((k * 5 + j) % 13) * 0.25f;

  std::vector<unsigned> clusters;
  for (unsigned i = 0; i < device.cluster_count(); ++i)
    clusters.push_back(i);
  auto rec = CommandRecorder::begin(device, "matmul 128x64x64 fp32", clusters);
  if (!rec) {
    std::fprintf(stderr, "%s\n", rec.error().message.c_str());
    return 1;
  }
  auto run = rec.value()->run([&](ClusterContext &) { program(buf); });
  const CommandStats &stats = rec.value()->end();
  std::fputs(stats.to_text().c_str(), stdout);
  if (!run) {
    std::fprintf(stderr, "device program failed: %s\n", run.error().message.c_str());
    return 1;
  }

  int wrong = 0;
  for (uint32_t i = 0; i < M; ++i)
    for (uint32_t j = 0; j < N; ++j) {
      float expected = 0;
      for (uint32_t k = 0; k < K; ++k)
        expected += ha[i * kLda + k] * hb[k * N + j];
      if (std::fabs(expected - hc[i * N + j]) > 1e-3f * (1 + std::fabs(expected)))
        ++wrong;
    }
  if (wrong) {
    std::fprintf(stderr, "%d wrong results\n", wrong);
    return 1;
  }
  if (auto flushed = Reports::instance().flush(); !flushed) {
    std::fprintf(stderr, "%s\n", flushed.error().message.c_str());
    return 1;
  }
  std::printf("results correct; trace written to %s (open it in https://ui.perfetto.dev)\n",
              trace.c_str());
  return 0;
}
