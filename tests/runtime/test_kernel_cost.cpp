// Modeled cycles of OpenCL C kernels (docs/device-model.md, "OpenCL C kernels"): exact
// figures derived by hand from the cost table for a small kernel on the "small" device
// (2 clusters of 4 PEs) in SPMD and LWI modes, determinism, non-zero modeled time, work that
// only some work-items do charged to the PE that does it, and the compute shown in the trace
// and the statistics.
// MANYCL_DEVICES=small,devices/small_lwi.json gives one device of each mode.
#include "child_process.h"
#include "rt_common.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {
using namespace rt_test;

struct Dev {
  cl_device_id id = nullptr;
  bool lwi = false;
};

std::vector<Dev> cost_devices() {
  std::vector<Dev> out;
  cl_platform_id p = manycl_platform();
  if (!p)
    return out;
  for (cl_device_id d : manycl_devices(p)) {
    char name[128] = {};
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, nullptr);
    out.push_back({d, std::string(name).find("lwi") != std::string::npos});
  }
  return out;
}

// Runs `kernel_name` of `src` (built with `options`) over `global` items in groups of `local`;
// returns the command's modeled cycles (CL_EVENT_COMMAND_STATS_MCL).
// `global1`, `local1`: a second dimension (rows of work-items) when above 1.
uint64_t modeled_cycles(cl_device_id dev, const char *src, const char *kernel_name,
                        const char *options, size_t global, size_t local, int n, size_t global1 = 1,
                        size_t local1 = 1) {
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, nullptr, &err);
  EXPECT_EQ(clBuildProgram(prog, 1, &dev, options, nullptr, nullptr), CL_SUCCESS);
  cl_kernel k = clCreateKernel(prog, kernel_name, &err);
  EXPECT_EQ(err, CL_SUCCESS);
  const size_t items = global * global1;
  cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * sizeof(float), nullptr, &err);
  cl_mem in = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * sizeof(float), nullptr, &err);
  float zero = 0.5f;
  clEnqueueFillBuffer(q, in, &zero, sizeof zero, 0, items * sizeof(float), 0, nullptr, nullptr);
  clSetKernelArg(k, 0, sizeof out, &out);
  clSetKernelArg(k, 1, sizeof in, &in);
  if (n >= 0) {
    clSetKernelArg(k, 2, local * local1 * sizeof(float), nullptr);
    clSetKernelArg(k, 3, sizeof n, &n);
  }
  cl_event ev = nullptr;
  const size_t globals[2] = {global, global1}, locals[2] = {local, local1};
  EXPECT_EQ(
      clEnqueueNDRangeKernel(q, k, global1 > 1 ? 2 : 1, nullptr, globals, locals, 0, nullptr, &ev),
      CL_SUCCESS);
  clFinish(q);
  size_t size = 0;
  clGetEventInfo(ev, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size);
  std::string json(size, '\0');
  clGetEventInfo(ev, CL_EVENT_COMMAND_STATS_MCL, size, json.data(), nullptr);
  uint64_t cycles = 0;
  if (auto pos = json.find("\"modeled_cycles\":"); pos != std::string::npos)
    cycles = std::stoull(json.substr(pos + 17));
  cl_ulong start = 0, end = 0;
  clGetEventProfilingInfo(ev, CL_PROFILING_MODELED_START_MCL, sizeof start, &start, nullptr);
  clGetEventProfilingInfo(ev, CL_PROFILING_MODELED_END_MCL, sizeof end, &end, nullptr);
  // Nanoseconds: a command of a cycle or two may start and end within the same nanosecond.
  EXPECT_GE(end, start);
  EXPECT_GE(end - start + 2, cycles * 1000 / 1200); // at least the cycles at <= 1.2 GHz
  clReleaseEvent(ev);
  clReleaseMemObject(in);
  clReleaseMemObject(out);
  clReleaseKernel(k);
  clReleaseProgram(prog);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return cycles;
}

const char *kStraight = R"(
kernel void axpb(global float *out, global const float *in) {
  size_t i = get_global_id(0);
  out[i] = in[i] * 2.0f + 1.0f;
})";

const char *kLoopBarrier = R"(
kernel void lb(global float *out, global const float *in, local float *t, int n) {
  size_t l = get_local_id(0);
  float s = in[get_global_id(0)];
  for (int j = 0; j < n; ++j)
    s = s * 0.5f + 1.0f;
  t[l] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[get_local_size(0) - 1 - l];
})";

uint64_t on(bool lwi, const char *src, const char *name, const char *opt, size_t global,
            size_t local, int n, size_t global1 = 1, size_t local1 = 1) {
  for (const Dev &d : cost_devices())
    if (d.lwi == lwi)
      return modeled_cycles(d.id, src, name, opt, global, local, n, global1, local1);
  ADD_FAILURE() << "no " << (lwi ? "LWI" : "SPMD") << " device";
  return 0;
}

// Derivations (docs/device-model.md cost table; ticks = 1/384 cycle, a slot = 64 ticks, a
// __global float access = 1 slot + 4 B x 120 / 64 cycles = 64 + 2880 ticks, __local = 64).
// The "small" device: 2 clusters of 4 PEs; 64 items in groups of 16: groups 0, 2 on cluster 0,
// 1, 3 on cluster 1. -cl-opt-disable code (LLVM 16, O1), per block of __manycl_wg_axpb:
//   entry 2 arg loads, 2 icmp, br: 320; setup 2 and, br: 192; row head br: 64;
//   row setup 1 ctx load (the group's first global id), br: 128; exit add, icmp, br: 192;
//   ret: 64 (960 in all);
//   per item: add (the global id), gep, load global, fmuladd, gep, store global, add, icmp, br
//   = 576 + 2 x 2880 = 6336.
// SPMD: each PE gets 4 items: 960 + 4 x 6336 = 26304 ticks -> 69 cycles per group, two groups
// per cluster: 138. LWI: one PE runs 16 items: 960 + 16 x 6336 = 102336 -> 267 cycles; each
// cluster's two groups run on PEs 0 and 1: 267.
TEST(KernelCost, StraightLineSpmdAndLwi) {
  EXPECT_EQ(on(false, kStraight, "axpb", "-cl-opt-disable", 64, 16, -1), 138u);
  EXPECT_EQ(on(true, kStraight, "axpb", "-cl-opt-disable", 64, 16, -1), 267u);
}

// __manycl_region_lb, -cl-opt-disable. Region 0 (items: load global, the loop, store __local):
// fixed 448 (entry: 5 SPM loads, icmp, switch) + 128 + 256 + 64 + 320 + 192 + 64 = 1472, less
// 192 since the global id is the group's first one (one ctx load) plus the local id, not group
// id x local size + offset (two loads and a multiply more): 1280; per item 3136 (3 slots +
// global load) + 320 (store __local, 4 slots) + n x 256 (fmuladd, add, icmp, br). Region 1 (load
// __local, store global): 1280 fixed, per item 576 + 2944 = 3520.
// SPMD (4 items per PE, one barrier of 20 cycles):
//   n=0: ceil(15104/384)=40 + ceil(15360/384)=40 + 20 = 100 per group, 200 per cluster;
//   n=1: 42 + 40 + 20 = 102 -> 204;  n=5: 53 + 40 + 20 = 113 -> 226.
// LWI (16 items on one PE, barriers free): region 1 = ceil(57600/384) = 150;
//   n=0: 148 + 150 = 298;  n=1: 158 + 150 = 308;  n=5: 201 + 150 = 351.
TEST(KernelCost, LoopLocalBarrierSpmd) {
  EXPECT_EQ(on(false, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 0), 200u);
  EXPECT_EQ(on(false, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 1), 204u);
  EXPECT_EQ(on(false, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 5), 226u);
}
TEST(KernelCost, LoopLocalBarrierLwi) {
  EXPECT_EQ(on(true, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 0), 298u);
  EXPECT_EQ(on(true, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 1), 308u);
  EXPECT_EQ(on(true, kLoopBarrier, "lb", "-cl-opt-disable", 64, 16, 5), 351u);
}

// Optimized code costs what it executes: never zero, and not far from the unoptimized figure
// (vectorization only saves loop overhead in the model).
TEST(KernelCost, OptimizedCloseToUnoptimized) {
  for (bool lwi : {false, true}) {
    uint64_t o0 = on(lwi, kLoopBarrier, "lb", "-cl-opt-disable", 4096, 64, 3);
    uint64_t o3 = on(lwi, kLoopBarrier, "lb", "", 4096, 64, 3);
    EXPECT_GT(o3, o0 * 8 / 10) << lwi;
    EXPECT_LT(o3, o0 * 12 / 10) << lwi;
  }
}

// Many groups taken by whichever cluster is free: modeled cycles do not depend on it
// (ctest runs this with MANYCL_PE_THREADS=4; the figures are the same with 1).
TEST(KernelCost, DeterministicOverRuns) {
  for (bool lwi : {false, true}) {
    uint64_t first = on(lwi, kLoopBarrier, "lb", "", 16384, 64, 2);
    EXPECT_GT(first, 0u);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(on(lwi, kLoopBarrier, "lb", "", 16384, 64, 2), first) << lwi;
    uint64_t s = on(lwi, kStraight, "axpb", "", 16384, 128, -1);
    for (int r = 0; r < 4; ++r)
      EXPECT_EQ(on(lwi, kStraight, "axpb", "", 16384, 128, -1), s) << lwi;
  }
}

// Every NDRange kernel is costed, also one that does nothing: its work-group functions still
// run their set-up code on every PE.
TEST(KernelCost, EveryKernelHasModeledTime) {
  const char *empty = "kernel void nothing(global float *o, global const float *i) {}";
  for (bool lwi : {false, true})
    for (const char *opt : {"", "-cl-opt-disable"}) {
      SCOPED_TRACE(std::string(lwi ? "LWI" : "SPMD") + " '" + opt + "'");
      {
        SCOPED_TRACE("empty kernel");
        EXPECT_GT(on(lwi, empty, "nothing", opt, 64, 16, -1), 0u);
      }
      SCOPED_TRACE("one item");
      EXPECT_GT(on(lwi, kStraight, "axpb", opt, 1, 1, -1), 0u);
    }
}

// Work that only some work-items do is charged to the PE that does it, not spread over the
// group: in SPMD (4 PEs, 16 items per group, 4 per PE) the slowest PE runs 4 heavy items when
// every item is heavy and 1 when only item 0 is, so modeled time drops about 4x, not 16x; in
// LWI one PE runs all 16 items, so it drops about 16x. With and without a barrier (work-group
// and region functions).
const char *kHeavy = R"(
float heavy(float s, int n) {
  for (int j = 0; j < n; ++j)
    s = s * 0.5f + 1.0f;
  return s;
}
kernel void all_heavy(global float *out, global const float *in, local float *t, int n) {
  out[get_global_id(0)] = heavy(in[get_global_id(0)], n);
}
kernel void one_heavy(global float *out, global const float *in, local float *t, int n) {
  float s = in[get_global_id(0)];
  if (get_local_id(0) == 0)
    s = heavy(s, n);
  out[get_global_id(0)] = s;
}
kernel void all_heavy_b(global float *out, global const float *in, local float *t, int n) {
  t[get_local_id(0)] = heavy(in[get_global_id(0)], n);
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[get_local_size(0) - 1 - get_local_id(0)];
}
kernel void one_heavy_b(global float *out, global const float *in, local float *t, int n) {
  float s = in[get_global_id(0)];
  if (get_local_id(0) == 0)
    s = heavy(s, n);
  t[get_local_id(0)] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[get_local_size(0) - 1 - get_local_id(0)];
})";

TEST(KernelCost, DivergentWorkChargedToThePeThatDoesIt) {
  for (bool lwi : {false, true})
    for (const char *opt : {"", "-cl-opt-disable"})
      for (const char *suffix : {"", "_b"}) {
        SCOPED_TRACE(std::string(lwi ? "LWI" : "SPMD") + " '" + opt + "' " + suffix);
        const std::string all = std::string("all_heavy") + suffix;
        const std::string one = std::string("one_heavy") + suffix;
        double a = double(on(lwi, kHeavy, all.c_str(), opt, 64, 16, 2000));
        double o = double(on(lwi, kHeavy, one.c_str(), opt, 64, 16, 2000));
        ASSERT_GT(o, 0);
        if (lwi) {
          EXPECT_GT(a / o, 12.0);
          EXPECT_LT(a / o, 17.0);
        } else {
          EXPECT_GT(a / o, 3.0);
          EXPECT_LT(a / o, 4.5);
        }
      }
}

// Loop barriers (on by default) run a uniform loop's trips as calls over the group; the
// instrumentation charges each item a trip's loop overhead instead of the plain function's
// latch. The modeled cycles stay close to those of the plain function (MANYCL_LOOP_BARRIERS=0):
// within 25 % on a 2-flop trip (the worst case: the overhead is half the trip) and a clpeak-like
// 16-op chain, SPMD and LWI, groups of 16 and 64.
// Sets an environment variable for a scope (the compiler reads MANYCL_LOOP_BARRIERS per build).
struct ScopedEnvVar {
  std::string name, old;
  bool had = false;
  ScopedEnvVar(const char *n, const char *value) : name(n) {
    if (const char *o = std::getenv(n))
      old = o, had = true;
    setenv(n, value, 1);
  }
  ~ScopedEnvVar() {
    if (had)
      setenv(name.c_str(), old.c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

const char *kUniformLoops = R"(
kernel void two_flops(global float *out, global const float *in, local float *t, int n) {
  float s = in[get_global_id(0)];
  for (int j = 0; j < n; ++j)
    s = s * 0.5f + 1.0f;
  out[get_global_id(0)] = s;
}
kernel void int_chain(global float *out, global const float *in, local float *t, int n) {
  int a = (int)in[get_global_id(0)], b = (int)get_local_id(0);
  for (int j = 0; j < n; ++j) {
    a = b * a + b; b = a * b + a; a = b * a + b; b = a * b + a;
    a = b * a + b; b = a * b + a; a = b * a + b; b = a * b + a;
  }
  out[get_global_id(0)] = (float)(a ^ b);
})";

TEST(KernelCost, LoopBarriersKeepModeledCyclesClose) {
  for (bool lwi : {false, true})
    for (const char *name : {"two_flops", "int_chain"})
      for (size_t local : {16, 64}) {
        uint64_t plain = 0, exchanged = 0;
        {
          ScopedEnvVar off("MANYCL_LOOP_BARRIERS", "0");
          plain = on(lwi, kUniformLoops, name, "", 256, local, 1000);
        }
        {
          ScopedEnvVar onlb("MANYCL_LOOP_BARRIERS", "1");
          exchanged = on(lwi, kUniformLoops, name, "", 256, local, 1000);
        }
        SCOPED_TRACE(std::string(lwi ? "LWI " : "SPMD ") + name + " local " +
                     std::to_string(local) + ": plain " + std::to_string(plain) +
                     ", loop barriers " + std::to_string(exchanged));
        ASSERT_GT(plain, 0u);
        EXPECT_GT(double(exchanged) / double(plain), 0.75);
        EXPECT_LT(double(exchanged) / double(plain), 1.25);
        if (std::getenv("MANYCL_TEST_VERBOSE"))
          std::printf("%s %s local %zu: plain %llu, loop barriers %llu\n", lwi ? "LWI" : "SPMD",
                      name, local, (unsigned long long)plain, (unsigned long long)exchanged);
      }
}

// Loops whose trip count is known on entry add their ticks once, multiplied by the count,
// instead of once per trip (cost_instrument.cpp): the modeled cycles must be those of the
// per-trip counting that MANYCL_COST=per-trip keeps (read once per process: the child process
// below). Barrier kernels (regions) with work-item loops, loops inside them whose trip count
// varies per item or is uniform, divergent work, a tree reduction, rows of a 2-D group; SPMD
// and LWI, optimized (vector loops and their remainders) and -cl-opt-disable.
const char *kTrips = R"(
kernel void tree(global float *out, global const float *in, local float *t, int n) {
  size_t l = get_local_id(0);
  t[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      t[l] += t[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = t[0] * n;
}
kernel void rows(global float *out, global const float *in, local float *t, int n) {
  int lx = get_local_id(0), ly = get_local_id(1), w = get_local_size(0);
  size_t g = get_global_id(1) * get_global_size(0) + get_global_id(0);
  float s = in[g];
  for (int j = 0; j < n + lx; ++j)
    s = s * 0.5f + 1.0f;
  t[ly * w + lx] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  float a = 0.0f;
  for (int k = 0; k < w; ++k)
    a += t[ly * w + k];
  out[g] = a;
})";

struct TripCase {
  bool lwi;
  const char *src, *name, *opt;
  size_t global, local;
  int n;
  size_t global1 = 1, local1 = 1;
};

std::vector<TripCase> trip_cases() {
  std::vector<TripCase> cases;
  for (bool lwi : {false, true})
    for (const char *opt : {"", "-cl-opt-disable"}) {
      cases.push_back({lwi, kLoopBarrier, "lb", opt, 256, 64, 3});
      cases.push_back({lwi, kLoopBarrier, "lb", opt, 60, 20, 0});
      cases.push_back({lwi, kHeavy, "one_heavy_b", opt, 64, 16, 50});
      cases.push_back({lwi, kHeavy, "all_heavy", opt, 100, 25, 7});
      cases.push_back({lwi, kTrips, "tree", opt, 1024, 256, 2});
      cases.push_back({lwi, kTrips, "tree", opt, 96, 24, 2});
      cases.push_back({lwi, kTrips, "rows", opt, 64, 16, 2, 16, 8});
      cases.push_back({lwi, kTrips, "rows", opt, 36, 9, 1, 6, 3});
    }
  return cases;
}

uint64_t run_trip_case(const TripCase &c) {
  return on(c.lwi, c.src, c.name, c.opt, c.global, c.local, c.n, c.global1, c.local1);
}

TEST(KernelCostChild, PrintTripCaseCycles) {
  if (!std::getenv("MANYCL_TEST_COST_TRIPS_CHILD"))
    GTEST_SKIP() << "runs in the child process of TripCountsGiveThePerTripCycles";
  std::vector<TripCase> cases = trip_cases();
  for (size_t i = 0; i < cases.size(); ++i)
    std::printf("trip case %zu cycles %llu\n", i,
                static_cast<unsigned long long>(run_trip_case(cases[i])));
}

TEST(KernelCost, TripCountsGiveThePerTripCycles) {
  ASSERT_EQ(std::getenv("MANYCL_COST"), nullptr) << "this process must fold trip counts";
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  rt_test::ChildRun child =
      rt_test::run_child("env MANYCL_COST=per-trip MANYCL_TEST_COST_TRIPS_CHILD=1 " + self +
                         " --gtest_filter=KernelCostChild.PrintTripCaseCycles");
  ASSERT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out << child.err;
  std::map<size_t, uint64_t> per_trip;
  std::istringstream lines(child.out);
  for (std::string line; std::getline(lines, line);) {
    unsigned long long cycles = 0;
    size_t i = 0;
    if (std::sscanf(line.c_str(), "trip case %zu cycles %llu", &i, &cycles) == 2)
      per_trip[i] = cycles;
  }
  std::vector<TripCase> cases = trip_cases();
  ASSERT_EQ(per_trip.size(), cases.size()) << child.out;
  for (size_t i = 0; i < cases.size(); ++i) {
    const TripCase &c = cases[i];
    SCOPED_TRACE(std::string(c.lwi ? "LWI " : "SPMD ") + c.name + " '" + c.opt +
                 "' n=" + std::to_string(c.n) + " global " + std::to_string(c.global) + "x" +
                 std::to_string(c.global1));
    EXPECT_GT(per_trip[i], 0u);
    EXPECT_EQ(run_trip_case(c), per_trip[i]);
  }
}

// MANYCL_TRACE and MANYCL_STATS, read once per process: the test runs itself again in a child
// process with them set (KernelCostChild.RunKernel does the work there, and is skipped
// otherwise). Each cluster that ran work-groups of the OpenCL C kernel shows an "opencl c"
// span on its compute track and compute cycles in the statistics.
TEST(KernelCostChild, RunKernel) {
  if (!std::getenv("MANYCL_TEST_COST_CHILD"))
    GTEST_SKIP() << "runs in the child process of TraceAndStatsShowEachClustersCompute";
  // 4 groups on the 2 clusters of the SPMD device: two each.
  EXPECT_GT(on(false, kStraight, "axpb", "", 64, 16, -1), 0u);
}

TEST(KernelCost, TraceAndStatsShowEachClustersCompute) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(getpid());
  const fs::path trace = dir / ("manycl_cost_trace_" + tag + ".json");
  const fs::path stats = dir / ("manycl_cost_stats_" + tag + ".txt");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  rt_test::ChildRun child = rt_test::run_child(
      "env MANYCL_TEST_COST_CHILD=1 MANYCL_TRACE=" + trace.string() +
      " MANYCL_STATS=" + stats.string() + " " + self + " --gtest_filter=KernelCostChild.RunKernel");
  ASSERT_NE(child.out.find("[  PASSED  ] 1 test"), std::string::npos) << child.out << child.err;

  // Trace: the device process whose commands include 'ndrange axpb'; its cluster compute
  // tracks by name; the "opencl c" spans on them.
  std::ifstream tin(trace);
  ASSERT_TRUE(tin.good()) << trace;
  nlohmann::json t = nlohmann::json::parse(tin, nullptr, false);
  ASSERT_FALSE(t.is_discarded());
  std::map<std::pair<int, int>, std::string> tracks; // (pid, tid) -> name
  std::set<int> modeled, ndrange_pids;               // device processes; those that ran axpb
  for (const auto &e : t["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name" &&
        e["args"]["name"].get<std::string>().find("(modeled time)") != std::string::npos)
      modeled.insert(e["pid"].get<int>());
  }
  for (const auto &e : t["traceEvents"])
    if (e.value("name", "").find("ndrange axpb") != std::string::npos &&
        modeled.count(e["pid"].get<int>()))
      ndrange_pids.insert(e["pid"].get<int>());
  ASSERT_EQ(ndrange_pids.size(), 1u);
  const int pid = *ndrange_pids.begin();
  std::map<std::string, double> compute; // track name -> modeled microseconds of "opencl c"
  for (const auto &e : t["traceEvents"])
    if (e.value("name", "") == "opencl c" && e["pid"].get<int>() == pid)
      compute[tracks[{pid, e["tid"].get<int>()}]] += e.value("dur", 0.0);
  for (const char *track : {"cluster 0 compute", "cluster 1 compute"}) {
    SCOPED_TRACE(track);
    ASSERT_TRUE(compute.count(track));
    EXPECT_GT(compute[track], 0.0);
  }

  // Statistics: the command's line, then one line per cluster with its compute cycles.
  std::ifstream sin(stats);
  ASSERT_TRUE(sin.good()) << stats;
  std::string line;
  bool in_command = false;
  std::map<int, uint64_t> cluster_compute;
  while (std::getline(sin, line)) {
    if (line.rfind("manycl stats: command", 0) == 0)
      in_command = line.find("'ndrange axpb'") != std::string::npos;
    else if (in_command && line.rfind("  cluster ", 0) == 0) {
      int c = std::stoi(line.substr(10));
      auto pos = line.find(", compute ");
      ASSERT_NE(pos, std::string::npos) << line;
      cluster_compute[c] = std::stoull(line.substr(pos + 10));
    }
  }
  ASSERT_EQ(cluster_compute.size(), 2u);
  for (auto &[c, cycles] : cluster_compute)
    EXPECT_GT(cycles, 0u) << "cluster " << c;
  fs::remove(trace);
  fs::remove(stats);
}

} // namespace
