// Host cost of the OpenCL C cost instrumentation, without the runtime around it: the
// ocl_peer_bench reduction and vector add built with the kernel compiler's API and run group
// after group on one thread, every group costed as on `mppa3` SPMD (16 PEs), as the runtime
// runs them. Prints the median thread CPU time of a pass over the NDRange (CPU time, which
// preemption on a shared host does not inflate) and the pass's modeled cycles.
//
// The instrumentation is chosen when the kernels are built (MANYCL_COST, read once per
// process): compare processes, e.g. interleaved
//   MANYCL_CACHE=0 MANYCL_COST=0 build/bench/runtime/cost_overhead_bench --repeats 9
//   MANYCL_CACHE=0 MANYCL_COST=1 build/bench/runtime/cost_overhead_bench --repeats 9
// (docs/performance.md, "Cost instrumentation overhead").
#include "manycl/compiler/compiler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {
using namespace manycl::compiler;

const char *kKernels = R"CLC(
kernel void vadd(global const float *a, global const float *b, global float *c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}

kernel void reduce(global const float *in, global float *out, local float *scratch) {
  size_t l = get_local_id(0);
  scratch[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      scratch[l] += scratch[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = scratch[0];
}
)CLC";

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

[[noreturn]] void die(const std::string &what) {
  std::fprintf(stderr, "cost_overhead_bench: %s\n", what.c_str());
  std::exit(1);
}

// One pass over the NDRange; returns its modeled cycles (sum over groups).
uint64_t pass(const Launch &launch, uint64_t groups, std::vector<std::byte> &arena, unsigned pes) {
  uint64_t cycles = 0;
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t id[3] = {g, 0, 0};
    GroupCost cost;
    cost.pes = pes;
    Status st = launch.runGroup(id, arena.data(), arena.size(), ExecMode::SPMD, nullptr, &cost);
    if (!st.ok())
      die("runGroup: " + st.message);
    cycles += cost.cycles;
  }
  return cycles;
}

} // namespace

int main(int argc, char **argv) {
  int repeats = 9;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc)
      repeats = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--repeats N]\n", argv[0]);
      return 2;
    }
  }
  DeviceDesc dev;
  dev.mode = ExecMode::SPMD;
  dev.pes_per_cluster = 16;
  BuildResult b = build(kKernels, "", dev);
  if (!b.ok())
    die("build: " + b.log);
  auto program = load(b.binary);
  if (!program.ok())
    die("load: " + program.status().message);

  const size_t n = size_t(16) << 20, local = 256;
  std::vector<float> a(n, 1.0f), c(n, 2.0f), out(n);
  std::vector<std::byte> arena(size_t(4) << 20);
  struct Case {
    const char *name;
    std::vector<ArgValue> args;
  };
  Case cases[] = {
      {"reduce",
       {ArgValue::pointer(a.data()), ArgValue::pointer(out.data()),
        ArgValue::local(local * sizeof(float))}},
      {"vadd",
       {ArgValue::pointer(a.data()), ArgValue::pointer(c.data()), ArgValue::pointer(out.data())}},
  };
  std::printf("| kernel (16M floats, groups of %zu) | cost | CPU ms per pass (median of %d) | "
              "modeled cycles |\n|---|---|---:|---:|\n",
              local, repeats);
  const char *env = std::getenv("MANYCL_COST");
  for (Case &k : cases) {
    const Kernel *kernel = (*program)->kernel(k.name);
    if (!kernel)
      die(std::string("no kernel ") + k.name);
    NDRange r;
    r.global[0] = n;
    r.local[0] = local;
    auto launch = Launch::prepare(*kernel, k.args, r);
    if (!launch.ok())
      die("prepare: " + launch.status().message);
    uint64_t cycles = pass(*launch, n / local, arena, 16); // warm-up
    std::vector<double> ms;
    for (int i = 0; i < repeats; ++i) {
      double t0 = thread_cpu_ms();
      pass(*launch, n / local, arena, 16);
      ms.push_back(thread_cpu_ms() - t0);
    }
    std::printf("| %s | %s | %.2f | %llu |\n", k.name, env ? env : "1", median(ms),
                static_cast<unsigned long long>(cycles));
  }
  return 0;
}
