// OpenCL C work-groups run on the host pool (issue 12 item 2, docs/architecture.md "Programs,
// kernels and NDRange execution"): barrier kernels with many more work-groups and PEs than the
// pool has workers (mppa3: 5 clusters of 16 PEs, teams and lanes of 16, pools of 1 and 2
// workers) give the right results and the same modeled cycles whatever the pool's size and the
// lanes per cluster, and the process has no host thread per simulated PE.
//
// Configurations covered, each in children of this executable (the settings are read once per
// process): SPMD and LWI; costed kernels (groups as pool tasks) and uncosted ones
// (MANYCL_COST=0: SPMD groups spread over a team of pool fibers that yield at barriers); barrier
// kernels as regions and as work-item fibers (MANYCL_WG_METHOD=fibers: work-item fibers inside
// team fibers).
#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "../common/manycl_platform.h"

namespace {

constexpr unsigned kClusters = 5, kPes = 16; // mppa3

// Hillis-Steele scan: every barrier is needed, so a member of a team that ran ahead of the
// others shows in the result.
const char *kSources = R"(
kernel void block_scan(global const int *in, global int *out, local int *a, local int *b) {
  size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
  a[l] = in[g];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t step = 1; step < n; step <<= 1) {
    b[l] = l >= step ? a[l] + a[l - step] : a[l];
    barrier(CLK_LOCAL_MEM_FENCE);
    a[l] = b[l];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  out[g] = a[l];
}

// Tree reduction with work that only some work-items do between the barriers.
kernel void group_sum(global const int *in, global int *sums, local int *part) {
  size_t l = get_local_id(0);
  part[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      part[l] += part[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    sums[get_group_id(0)] = part[0];
}

// No barrier: whole groups per lane.
kernel void affine(global const int *in, global int *out) {
  size_t g = get_global_id(0);
  out[g] = 3 * in[g] + (int)get_group_id(0);
}
)";

// ---- the child: runs the kernels, prints "<kernel> <local> ok|bad <modeled cycles>" lines
// and "threads <n>" ----

uint64_t modeled_cycles(cl_event event) {
  size_t size = 0;
  clGetEventInfo(event, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size);
  std::string json(size, '\0');
  clGetEventInfo(event, CL_EVENT_COMMAND_STATS_MCL, size, json.data(), nullptr);
  const auto pos = json.find("\"modeled_cycles\":");
  return pos == std::string::npos ? 0 : std::stoull(json.substr(pos + 17));
}

unsigned thread_count() {
  unsigned n = 0;
  for ([[maybe_unused]] const auto &entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

int child_main() {
  alarm(240); // a barrier that blocked a pool worker would hang: fail instead
  cl_platform_id platform = manycl_test::find_manycl_platform();
  cl_device_id device = nullptr;
  if (!platform || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr))
    return 2;
  cl_int err = CL_SUCCESS;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  const char *text = kSources;
  cl_program program = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
  if (clBuildProgram(program, 1, &device, "", nullptr, nullptr) != CL_SUCCESS) {
    std::string log(16384, '\0');
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), nullptr);
    std::fprintf(stderr, "build failed: %s\n", log.c_str());
    return 2;
  }
  cl_kernel scan = clCreateKernel(program, "block_scan", &err);
  cl_kernel sum = clCreateKernel(program, "group_sum", &err);
  cl_kernel affine = clCreateKernel(program, "affine", &err);
  if (!scan || !sum || !affine)
    return 2;

  for (size_t local : {16u, 64u, 256u}) {
    // More groups than clusters x PEs, so every cluster runs many of them on every lane.
    const size_t groups = 3 * kClusters * kPes + 7, n = local * groups;
    std::vector<int> host(n);
    for (size_t i = 0; i < n; ++i)
      host[i] = static_cast<int>((i * 7919) % 23) - 11;
    cl_mem in = clCreateBuffer(context, CL_MEM_COPY_HOST_PTR, n * 4, host.data(), &err);
    cl_mem out = clCreateBuffer(context, CL_MEM_READ_WRITE, n * 4, nullptr, &err);
    cl_mem sums = clCreateBuffer(context, CL_MEM_READ_WRITE, groups * 4, nullptr, &err);
    std::vector<int> result(n), group_sums(groups);

    cl_event event = nullptr;
    clSetKernelArg(scan, 0, sizeof in, &in);
    clSetKernelArg(scan, 1, sizeof out, &out);
    clSetKernelArg(scan, 2, local * 4, nullptr);
    clSetKernelArg(scan, 3, local * 4, nullptr);
    clEnqueueNDRangeKernel(queue, scan, 1, nullptr, &n, &local, 0, nullptr, &event);
    clEnqueueReadBuffer(queue, out, CL_TRUE, 0, n * 4, result.data(), 0, nullptr, nullptr);
    bool ok = true;
    for (size_t g = 0; g < groups && ok; ++g) {
      int running = 0;
      for (size_t l = 0; l < local && ok; ++l) {
        running += host[g * local + l];
        ok = result[g * local + l] == running;
      }
    }
    std::printf("block_scan %zu %s %llu\n", local, ok ? "ok" : "bad",
                static_cast<unsigned long long>(modeled_cycles(event)));
    clReleaseEvent(event);

    clSetKernelArg(sum, 0, sizeof in, &in);
    clSetKernelArg(sum, 1, sizeof sums, &sums);
    clSetKernelArg(sum, 2, local * 4, nullptr);
    clEnqueueNDRangeKernel(queue, sum, 1, nullptr, &n, &local, 0, nullptr, &event);
    clEnqueueReadBuffer(queue, sums, CL_TRUE, 0, groups * 4, group_sums.data(), 0, nullptr,
                        nullptr);
    ok = true;
    for (size_t g = 0; g < groups && ok; ++g) {
      int expected = 0;
      for (size_t l = 0; l < local; ++l)
        expected += host[g * local + l];
      ok = group_sums[g] == expected;
    }
    std::printf("group_sum %zu %s %llu\n", local, ok ? "ok" : "bad",
                static_cast<unsigned long long>(modeled_cycles(event)));
    clReleaseEvent(event);

    clSetKernelArg(affine, 0, sizeof in, &in);
    clSetKernelArg(affine, 1, sizeof out, &out);
    clEnqueueNDRangeKernel(queue, affine, 1, nullptr, &n, &local, 0, nullptr, &event);
    clEnqueueReadBuffer(queue, out, CL_TRUE, 0, n * 4, result.data(), 0, nullptr, nullptr);
    ok = true;
    for (size_t i = 0; i < n && ok; ++i)
      ok = result[i] == 3 * host[i] + static_cast<int>(i / local);
    std::printf("affine %zu %s %llu\n", local, ok ? "ok" : "bad",
                static_cast<unsigned long long>(modeled_cycles(event)));
    clReleaseEvent(event);

    clReleaseMemObject(in);
    clReleaseMemObject(out);
    clReleaseMemObject(sums);
  }
  // Every cluster has run teams and lanes of 16: with a host thread per PE there would be at
  // least clusters x (PEs - 1) of them by now.
  std::printf("threads %u\n", thread_count());
  clReleaseKernel(scan);
  clReleaseKernel(sum);
  clReleaseKernel(affine);
  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return 0;
}

// ---- the parent ----

struct ChildResult {
  std::string command;
  int status = -1;
  std::map<std::string, std::string> lines; // "<kernel> <local>" -> "ok|bad <cycles>"
  unsigned threads = 0;
};

ChildResult run_child(const std::string &env) {
  ChildResult r;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return r;
  r.command = "env " + env + " " + std::string(self, size_t(n)) + " --child";
  FILE *p = popen(r.command.c_str(), "r");
  if (!p)
    return r;
  char line[256];
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string kernel, local, verdict, cycles;
    in >> kernel;
    if (kernel == "threads") {
      in >> r.threads;
      continue;
    }
    in >> local >> verdict >> cycles;
    r.lines[kernel + " " + local] = verdict + " " + cycles;
  }
  r.status = pclose(p);
  return r;
}

struct Config {
  const char *name;
  const char *env;
};

// gtest names a failing configuration with this.
[[maybe_unused]] void PrintTo(const Config &config, std::ostream *out) {
  *out << config.env;
}

class WorkGroupsOnPool : public ::testing::TestWithParam<Config> {};

TEST_P(WorkGroupsOnPool, ResultsAndModeledCyclesDoNotDependOnHostWorkersOrLanes) {
  const Config &config = GetParam();
  std::vector<ChildResult> results;
  // Pools of one worker (every barrier wait must yield it) and two; lanes and teams of 16
  // (one per PE) and of 3.
  for (const char *workers : {"1", "2"})
    for (const char *lanes : {"16", "3"})
      results.push_back(run_child(std::string(config.env) + " MANYCL_HOST_THREADS=" + workers +
                                  " MANYCL_PE_THREADS=" + lanes));
  const ChildResult &first = results.front();
  ASSERT_EQ(first.status, 0) << first.command;
  ASSERT_EQ(first.lines.size(), 9u) << first.command;
  for (const auto &r : results) {
    ASSERT_EQ(r.status, 0) << r.command;
    EXPECT_GT(r.threads, 0u) << r.command;
    EXPECT_LT(r.threads, kClusters * (kPes - 1)) << "a host thread per PE? " << r.command;
    for (const auto &[what, line] : first.lines) {
      ASSERT_TRUE(r.lines.count(what)) << what << ": " << r.command;
      EXPECT_EQ(r.lines.at(what).substr(0, 3), "ok ") << what << ": " << r.command;
      // The same modeled cycles (and results) in every child of the configuration.
      EXPECT_EQ(r.lines.at(what), line) << what << ": " << r.command << " vs " << first.command;
    }
  }
  // Costed kernels model their compute: the barrier kernels take time.
  if (std::string(config.env).find("MANYCL_COST=0") == std::string::npos) {
    EXPECT_NE(first.lines.at("block_scan 256"), "ok 0") << first.command;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, WorkGroupsOnPool,
    ::testing::Values(Config{"SpmdCosted", "MANYCL_DEVICE_MODE=spmd"},
                      Config{"SpmdTeams", "MANYCL_DEVICE_MODE=spmd MANYCL_COST=0"},
                      Config{"SpmdTeamsOfWorkItemFibers",
                             "MANYCL_DEVICE_MODE=spmd MANYCL_COST=0 MANYCL_WG_METHOD=fibers"},
                      Config{"SpmdCostedWorkItemFibers",
                             "MANYCL_DEVICE_MODE=spmd MANYCL_WG_METHOD=fibers"},
                      Config{"LwiCosted", "MANYCL_DEVICE_MODE=lwi"}),
    [](const ::testing::TestParamInfo<Config> &info) { return std::string(info.param.name); });

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--child")
    return child_main();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
