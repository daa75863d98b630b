// Per-layer convolution timing: ManyCL native functions vs oneDNN, on the convolution shapes
// of ResNet-50, MobileNetV2 and YOLOv3-416, FP32 and INT8, 1 and 2 threads. Prints a
// Markdown table (medians, ratio ManyCL/oneDNN, geometric means).
//
//   manycl_native_conv_bench [--quick] [--cpu] [--cold] [--winograd [--weight-cache]]
//                            [--net resnet50|mobilenetv2|yolov3|calls]
//                            [--prec fp32|int8] [--threads N] [--pes N] [--reps N]
//                            [--layer SUBSTRING]
// --quick: every 4th layer (CI); --cpu: process CPU time instead of wall time; --winograd: the
// FP32 3x3 stride-1 layers as Winograd F(4x4, 3x3); --weight-cache: their parameters in stable
// bytes, as a loaded program's (the transformed weights are cached: the warm-up call fills the
// cache, the timed calls hit it); --cold: the caches evicted before each timed call (as in a
// network); --pes: the PE count the calls are split for (default: the thread count; a cluster
// of the mppa3 preset has 16, which is how the device splits them).
//
// The "SPM" here is a large host buffer holding whole layers: the point is the speed of the
// compute functions, not tiling (tiles only divide the same loops).
#include "manycl/native/native.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#ifdef MANYCL_BENCH_HAVE_DNNL
#include <dnnl.hpp>
#include <omp.h>
#endif

namespace {

struct Layer {
  const char *net;
  std::string name;
  uint32_t h, w, cin, cout, k, stride, groups;
};

std::vector<Layer> all_layers() {
  std::vector<Layer> v;
  auto add = [&](const char *net, uint32_t h, uint32_t cin, uint32_t cout, uint32_t k, uint32_t s,
                 uint32_t g = 1) {
    char name[64];
    std::snprintf(name, sizeof name, "%s%ux%u %u>%u k%u s%u", g > 1 ? "dw " : "", h, h, cin, cout, k, s);
    v.push_back({net, name, h, h, cin, cout, k, s, g});
  };
  // ResNet-50 (v1.5), unique convolution shapes; h is the input size.
  const char *r = "resnet50";
  add(r, 224, 3, 64, 7, 2);
  add(r, 56, 64, 64, 1, 1);
  add(r, 56, 64, 64, 3, 1);
  add(r, 56, 64, 256, 1, 1);
  add(r, 56, 256, 64, 1, 1);
  add(r, 56, 256, 128, 1, 1);
  add(r, 56, 128, 128, 3, 2);
  add(r, 28, 128, 512, 1, 1);
  add(r, 56, 256, 512, 1, 2);
  add(r, 28, 512, 128, 1, 1);
  add(r, 28, 128, 128, 3, 1);
  add(r, 28, 512, 256, 1, 1);
  add(r, 28, 256, 256, 3, 2);
  add(r, 14, 256, 1024, 1, 1);
  add(r, 28, 512, 1024, 1, 2);
  add(r, 14, 1024, 256, 1, 1);
  add(r, 14, 256, 256, 3, 1);
  add(r, 14, 1024, 512, 1, 1);
  add(r, 14, 512, 512, 3, 2);
  add(r, 7, 512, 2048, 1, 1);
  add(r, 14, 1024, 2048, 1, 2);
  add(r, 7, 2048, 512, 1, 1);
  add(r, 7, 512, 512, 3, 1);
  // MobileNetV2 (224).
  const char *m = "mobilenetv2";
  add(m, 224, 3, 32, 3, 2);
  add(m, 112, 32, 32, 3, 1, 32);
  add(m, 112, 32, 16, 1, 1);
  add(m, 112, 16, 96, 1, 1);
  add(m, 112, 96, 96, 3, 2, 96);
  add(m, 56, 96, 24, 1, 1);
  add(m, 56, 24, 144, 1, 1);
  add(m, 56, 144, 144, 3, 1, 144);
  add(m, 56, 144, 24, 1, 1);
  add(m, 56, 144, 144, 3, 2, 144);
  add(m, 28, 144, 32, 1, 1);
  add(m, 28, 32, 192, 1, 1);
  add(m, 28, 192, 192, 3, 1, 192);
  add(m, 28, 192, 32, 1, 1);
  add(m, 28, 192, 192, 3, 2, 192);
  add(m, 14, 192, 64, 1, 1);
  add(m, 14, 64, 384, 1, 1);
  add(m, 14, 384, 384, 3, 1, 384);
  add(m, 14, 384, 64, 1, 1);
  add(m, 14, 384, 96, 1, 1);
  add(m, 14, 96, 576, 1, 1);
  add(m, 14, 576, 576, 3, 1, 576);
  add(m, 14, 576, 96, 1, 1);
  add(m, 14, 576, 576, 3, 2, 576);
  add(m, 7, 576, 160, 1, 1);
  add(m, 7, 160, 960, 1, 1);
  add(m, 7, 960, 960, 3, 1, 960);
  add(m, 7, 960, 160, 1, 1);
  add(m, 7, 960, 320, 1, 1);
  add(m, 7, 320, 1280, 1, 1);
  // YOLOv3-416 (Darknet-53 backbone and the three heads), unique shapes.
  const char *y = "yolov3";
  add(y, 416, 3, 32, 3, 1);
  add(y, 416, 32, 64, 3, 2);
  add(y, 208, 64, 32, 1, 1);
  add(y, 208, 32, 64, 3, 1);
  add(y, 208, 64, 128, 3, 2);
  add(y, 104, 128, 64, 1, 1);
  add(y, 104, 64, 128, 3, 1);
  add(y, 104, 128, 256, 3, 2);
  add(y, 52, 256, 128, 1, 1);
  add(y, 52, 128, 256, 3, 1);
  add(y, 52, 256, 512, 3, 2);
  add(y, 26, 512, 256, 1, 1);
  add(y, 26, 256, 512, 3, 1);
  add(y, 26, 512, 1024, 3, 2);
  add(y, 13, 1024, 512, 1, 1);
  add(y, 13, 512, 1024, 3, 1);
  add(y, 13, 1024, 255, 1, 1);
  add(y, 13, 512, 256, 1, 1);
  add(y, 26, 768, 256, 1, 1);
  add(y, 26, 512, 255, 1, 1);
  add(y, 26, 256, 128, 1, 1);
  add(y, 52, 384, 128, 1, 1);
  add(y, 52, 256, 255, 1, 1);
  // The 3x3 stride-1 calls kann emits for these networks on 5 clusters of mppa3 (FP32, the
  // largest share of each network's 3x3 MACs; `kann inspect --records`): output bands and
  // output-channel slices, the shapes the per-call Winograd choice is made on.
  auto call = [&](const char *net, uint32_t h, uint32_t w, uint32_t cin, uint32_t cout,
                  uint32_t k = 3) {
    char name[64];
    std::snprintf(name, sizeof name, "call %ux%u %u>%u k%u s1", h, w, cin, cout, k);
    v.push_back({net, name, h, w, cin, cout, k, 1, 1});
  };
  call("calls", 13, 13, 512, 32);  // YOLOv3-416, 16 blocks of 4x4
  call("calls", 26, 26, 256, 32);  // YOLOv3-416, 49 blocks
  call("calls", 10, 52, 128, 80);  // YOLOv3-416, 39 blocks
  call("calls", 21, 104, 64, 128); // YOLOv3-416, 156 blocks
  call("calls", 13, 13, 256, 48);  // YOLOv3-tiny, 16 blocks
  call("calls", 26, 26, 384, 32);  // YOLOv3-tiny, 49 blocks
  call("calls", 42, 208, 16, 32);  // YOLOv3-tiny, 572 blocks
  call("calls", 11, 55, 16, 64);   // SqueezeNet 1.1, 42 blocks
  call("calls", 5, 27, 32, 128);   // SqueezeNet 1.1, 14 blocks
  call("calls", 3, 14, 256, 128);  // ResNet-50, 4 blocks
  call("calls", 11, 56, 64, 64);   // ResNet-50, 42 blocks
  call("calls", 6, 28, 128, 64);   // ResNet-50, 14 blocks
  call("calls", 3, 13, 64, 256);   // SqueezeNet 1.1, 4 blocks (a band of 13x13)
  call("calls", 3, 13, 48, 192);   // SqueezeNet 1.1, 4 blocks
  call("calls", 7, 7, 512, 32);    // ResNet-50, 4 blocks (a channel slice of 7x7)
  // 1x1 calls of the same binaries: a cluster's band of a small map, or its slice of the
  // output channels.
  call("calls", 13, 13, 512, 208, 1); // SqueezeNet 1.1 classifier, a fifth of 1000 channels
  call("calls", 3, 13, 64, 256, 1);   // SqueezeNet 1.1 expand1x1, a band
  call("calls", 3, 14, 96, 576, 1);   // MobileNetV2, a band of 14x14
  call("calls", 3, 14, 576, 96, 1);   // MobileNetV2
  call("calls", 2, 5, 960, 320, 1);   // MobileNetV2, a 10-pixel band of 7x7
  call("calls", 2, 5, 160, 960, 1);   // MobileNetV2
  call("calls", 3, 14, 1024, 256, 1); // ResNet-50, a band of 14x14
  call("calls", 2, 7, 2048, 512, 1);  // ResNet-50, a band of 7x7
  return v;
}

uint32_t out_size(const Layer &l, uint32_t in) { return (in + 2 * (l.k / 2) - l.k) / l.stride + 1; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Clock used for timing: wall time, or the process CPU time (--cpu), which is robust on a
// shared machine for single-thread runs (a descheduled thread does not accumulate it).
bool g_cpu_clock = false;
bool g_winograd = false; // MCL_CONV_WINOGRAD on the FP32 3x3 stride-1 layers
bool g_weight_cache = false; // the parameters in stable bytes (mcl_native_exec::stable_*)
uint64_t g_generation = 0;
double now_ms() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double median_ms, min_ms;
};

// Times fn: one warm-up, then at least `reps` runs and at least 0.15 s. The median is the
// figure of merit; the minimum shows the undisturbed speed on a shared, noisy host.
// --cold: before each timed call a 64 MiB buffer is written, so that the call finds its
// weights and activations in memory, not in the caches (as in a network, where the other
// layers have run in between).
bool g_cold = false;
void evict_caches() {
  static std::vector<uint64_t> junk(8u << 20);
  static uint64_t stamp = 0;
  ++stamp;
  for (uint64_t &x : junk)
    x = stamp;
}

template <class F> Timing time_ms(F &&fn, int reps) {
  fn();
  std::vector<double> t;
  double total = 0;
  while ((int)t.size() < reps || (total < 150.0 && t.size() < 50)) {
    if (g_cold)
      evict_caches();
    const double t0 = now_ms();
    fn();
    const double ms = now_ms() - t0;
    t.push_back(ms);
    total += ms;
  }
  return {median(t), *std::min_element(t.begin(), t.end())};
}

struct ManyclConv {
  std::vector<uint8_t> spm;
  mcl_conv_args args{};
  mcl_native_host_pool *pool = nullptr;
  mcl_native_exec exec{};

  ManyclConv(const Layer &l, bool int8, uint32_t threads, uint32_t pes, std::mt19937 &rng) {
    const uint32_t oh = out_size(l, l.h), ow = out_size(l, l.w), pad = l.k / 2;
    const uint32_t dt = int8 ? MCL_DTYPE_U8 : MCL_DTYPE_F32, es = int8 ? 1 : 4;
    uint64_t top = 0;
    auto alloc = [&](uint64_t bytes) {
      top = (top + 63) / 64 * 64;
      uint64_t at = top;
      top += bytes;
      return (uint32_t)at;
    };
    args.input = {alloc((uint64_t)l.h * l.w * l.cin * es), l.h, l.w, l.cin, l.w * l.cin, l.cin, 1, dt};
    args.output = {alloc((uint64_t)oh * ow * l.cout * es), oh, ow, l.cout, ow * l.cout, l.cout, 1, dt};
    args.groups = l.groups;
    args.kernel_h = args.kernel_w = (uint16_t)l.k;
    args.stride_h = args.stride_w = (uint16_t)l.stride;
    args.dilation_h = args.dilation_w = 1;
    args.origin_y = args.origin_x = -(int32_t)pad;
    args.act.kind = MCL_ACT_RELU;
    args.output_min = 0, args.output_max = 255;
    args.pad_row_offset = alloc((uint64_t)l.cin * es);
    const size_t entries = mcl_native_conv_table_size(&args);
    args.table_offset = alloc(entries * 4);
    const size_t psize = mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &args);
    args.params_offset = alloc(psize);
    spm.assign(top + 64, 0);
    std::uniform_real_distribution<float> uni(-1, 1);
    for (uint64_t i = 0; i < (uint64_t)l.h * l.w * l.cin; ++i) {
      if (int8)
        spm[args.input.offset + i] = (uint8_t)(rng() & 0xff);
      else {
        float f = uni(rng);
        std::memcpy(&spm[args.input.offset + i * 4], &f, 4);
      }
    }
    // As kann emits convolutions: the address table is derived from the geometry at run time.
    (void)entries;
    args.flags |= MCL_CONV_IMPLICIT_TABLE;
    if (g_winograd && !int8 && l.k == 3 && l.stride == 1 && l.groups == 1)
      args.flags |= MCL_CONV_WINOGRAD;
    const size_t nw = (size_t)l.cout * (l.cin / l.groups) * l.k * l.k;
    std::vector<float> wf(nw);
    std::vector<int8_t> w8(nw);
    for (size_t i = 0; i < nw; ++i) {
      wf[i] = uni(rng) * 0.1f;
      w8[i] = (int8_t)(rng() % 255 - 127);
    }
    const float ws = 0.01f;
    mcl_weight_quant q{0.02f, 0.5f, &ws, nullptr, 1};
    mcl_native_pack_conv(MCL_NATIVE_FN_CONV2D, &args, int8 ? (const void *)w8.data() : (const void *)wf.data(),
                         nullptr, int8 ? &q : nullptr, &spm[args.params_offset], psize);
    pool = mcl_native_host_pool_create(threads);
    mcl_native_host_exec_init(&exec, pool, spm.data(), spm.size());
    if (pes)
      exec.pe_count = pes;
    if (g_weight_cache) {
      exec.stable_base = spm.data() + args.params_offset;
      exec.stable_size = psize;
      exec.stable_generation = ++g_generation;
    }
  }
  ~ManyclConv() {
    mcl_native_forget_generation(exec.stable_generation);
    mcl_native_host_pool_destroy(pool);
  }
  bool run() {
    char msg[256];
    int rc = mcl_native_run(&exec, MCL_NATIVE_FN_CONV2D, &args, sizeof args, msg, sizeof msg);
    if (rc != MCL_NATIVE_OK)
      std::fprintf(stderr, "manycl conv failed: %s\n", msg);
    return rc == MCL_NATIVE_OK;
  }
};

#ifdef MANYCL_BENCH_HAVE_DNNL
struct DnnlConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward prim;
  std::unordered_map<int, dnnl::memory> margs;

  DnnlConv(const Layer &l, bool int8) {
    using namespace dnnl;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    const memory::dim oh = out_size(l, l.h), ow = out_size(l, l.w), pad = l.k / 2;
    const dt adt = int8 ? dt::u8 : dt::f32, wdt = int8 ? dt::s8 : dt::f32;
    memory::desc src_md({1, l.cin, l.h, l.w}, adt, tag::nhwc);
    memory::desc dst_md({1, l.cout, oh, ow}, adt, tag::nhwc);
    memory::dims wdims = l.groups > 1 ? memory::dims{l.groups, l.cout / l.groups, l.cin / l.groups, l.k, l.k}
                                      : memory::dims{l.cout, l.cin, l.k, l.k};
    memory::desc w_any(wdims, wdt, tag::any);
    memory::desc w_plain(wdims, wdt, l.groups > 1 ? tag::goihw : tag::oihw);
    memory::desc b_md({l.cout}, dt::f32, tag::x);
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src_md, w_any, b_md,
                                dst_md, {l.stride, l.stride}, {pad, pad}, {pad, pad});
    primitive_attr attr;
    post_ops ops;
    ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
    if (int8)
      attr.set_output_scales(0, {0.02f * 0.01f / 0.5f});
    convolution_forward::primitive_desc pd(d, attr, eng);
    prim = convolution_forward(pd);
    memory src(pd.src_desc(), eng), dst(pd.dst_desc(), eng), bias(b_md, eng);
    memory w_user(w_plain, eng), w(pd.weights_desc(), eng);
    std::mt19937 rng(1);
    auto fill = [&](memory &m, bool integer) {
      const size_t n = m.get_desc().get_size();
      uint8_t *p = static_cast<uint8_t *>(m.get_data_handle());
      if (integer) {
        for (size_t i = 0; i < n; ++i)
          p[i] = (uint8_t)(rng() & 0x7f);
      } else {
        float *f = reinterpret_cast<float *>(p);
        for (size_t i = 0; i < n / 4; ++i)
          f[i] = (float)((int)(rng() % 200) - 100) * 0.01f;
      }
    };
    fill(src, int8);
    fill(w_user, int8);
    fill(bias, false);
    reorder(w_user, w).execute(strm, w_user, w); // weights packed once, like ours
    strm.wait();
    margs = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
  }
  void run() {
    prim.execute(strm, margs);
    strm.wait();
  }
};
#endif

} // namespace

int main(int argc, char **argv) {
  bool quick = false;
  std::string only_net, only_prec, only_layer;
  int reps = 5;
  std::vector<uint32_t> thread_counts = {1, 2};
  uint32_t pes = 0; // the thread count
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--quick")
      quick = true;
    else if (a == "--cpu")
      g_cpu_clock = true;
    else if (a == "--cold")
      g_cold = true;
    else if (a == "--winograd")
      g_winograd = true;
    else if (a == "--weight-cache")
      g_weight_cache = true;
    else if (a == "--net")
      only_net = next();
    else if (a == "--prec")
      only_prec = next();
    else if (a == "--layer")
      only_layer = next();
    else if (a == "--reps")
      reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--threads")
      thread_counts = {(uint32_t)std::max(1, std::atoi(next().c_str()))};
    else if (a == "--pes")
      pes = (uint32_t)std::max(1, std::atoi(next().c_str()));
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--cpu] [--cold] [--winograd [--weight-cache]] [--net N] [--prec fp32|int8] [--threads N] [--pes N] [--reps N] [--layer S]\n", argv[0]);
      return 2;
    }
  }
  std::printf("ManyCL native conv benchmark, kernels: %s, clock: %s\n\n", mcl_native_isa(),
              g_cpu_clock ? "process CPU time" : "wall");
  std::printf("| net | layer | prec | thr | ManyCL ms | oneDNN ms | ratio | ManyCL min | oneDNN min | "
              "min ratio |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  std::mt19937 rng(42);
  std::map<std::string, std::vector<double>> log_ratios, log_min_ratios; // key: prec/threads
  std::map<std::string, double> worst;
  std::map<std::string, std::string> worst_name;
  const auto layers = all_layers();
  for (const char *prec : {"fp32", "int8"}) {
    if (!only_prec.empty() && only_prec != prec)
      continue;
    const bool int8 = std::strcmp(prec, "int8") == 0;
    for (uint32_t threads : thread_counts)
      for (size_t li = 0; li < layers.size(); ++li) {
        const Layer &l = layers[li];
        if (!only_net.empty() && only_net != l.net)
          continue;
        if (!only_layer.empty() && l.name.find(only_layer) == std::string::npos)
          continue;
        if (quick && li % 4 != 0)
          continue;
        ManyclConv ours(l, int8, threads, pes, rng);
        if (!ours.run())
          return 1;
        const Timing t_ours = time_ms([&] { ours.run(); }, reps);
        Timing t_peer{NAN, NAN};
#ifdef MANYCL_BENCH_HAVE_DNNL
        omp_set_num_threads((int)threads);
        DnnlConv peer(l, int8);
        t_peer = time_ms([&] { peer.run(); }, reps);
#endif
        const double ratio = t_ours.median_ms / t_peer.median_ms;
        const double min_ratio = t_ours.min_ms / t_peer.min_ms;
        std::printf("| %s | %s | %s | %u | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", l.net, l.name.c_str(),
                    prec, threads, t_ours.median_ms, t_peer.median_ms, ratio, t_ours.min_ms, t_peer.min_ms,
                    min_ratio);
        std::fflush(stdout);
        if (std::isfinite(ratio)) {
          const std::string key = std::string(prec) + " " + std::to_string(threads) + "T";
          log_ratios[key].push_back(std::log(ratio));
          log_min_ratios[key].push_back(std::log(min_ratio));
          if (ratio > worst[key]) {
            worst[key] = ratio;
            worst_name[key] = std::string(l.net) + " " + l.name;
          }
        }
      }
  }
  std::printf("\n| precision, threads | layers | geomean ManyCL/oneDNN (medians) | worst layer (medians) | "
              "geomean of min ratios |\n|---|---:|---:|---|---:|\n");
  auto geomean = [](const std::vector<double> &logs) {
    double s = 0;
    for (double x : logs)
      s += x;
    return std::exp(s / logs.size());
  };
  for (const auto &[key, v] : log_ratios)
    std::printf("| %s | %zu | %.2f | %.2f (%s) | %.2f |\n", key.c_str(), v.size(), geomean(v), worst[key],
                worst_name[key].c_str(), geomean(log_min_ratios[key]));
  return 0;
}
