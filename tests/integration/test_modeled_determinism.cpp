// Modeled time is a pure function of the commands (issue 12 item 1, docs/device-model.md
// "Determinism"): a SqueezeNet-1.1-sized network on all five clusters of mppa3, and the
// same network on five one-cluster sub-devices at once (one host thread each), give
// bit-identical modeled cycles over repeated runs, with MANYCL_PE_THREADS 1 and 2, host pools
// of 1 to 3 workers (MANYCL_HOST_THREADS), with and without a busy host thread competing for
// the cores.
//
// MANYCL_PE_THREADS and MANYCL_HOST_THREADS are read once per process: the test runs this executable again as a child
// (`--child`) under each setting and compares what the children print. Nothing here depends
// on cost constants: runs are compared with each other.
#include <CL/cl.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/manycl_platform.h"
#include "../kann/onnx_builder.h"
#include "kann/compile.h"
#include "kann/format.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/session.h"
#include "manycl/device/config.h"

namespace {

constexpr unsigned kRootRuns = 3;   // inferences on the whole device, per child
constexpr unsigned kSubRuns = 2;    // inferences per sub-device, per child
constexpr unsigned kSubDevices = 5; // one per cluster of mppa3

// SqueezeNet 1.1's layers (torchvision): conv 3x3/2 64, max pools 3/2 with ceil_mode, eight
// fire modules, conv 1x1 to 1000 classes, global average pool; input 1x3x224x224. Weights are
// the builder's deterministic pseudo-random values.
std::string squeezenet_onnx() {
  kann::test::OnnxBuilder b;
  b.input("image", {1, 3, 224, 224});
  int id = 0;
  auto conv = [&](const std::string &x, int cin, int cout, int k, int stride, int pad) {
    const std::string n = "c" + std::to_string(id++);
    b.weight(n + "_w", {cout, cin, k, k}, 1.0f / std::sqrt(float(cin * k * k)));
    b.weight(n + "_b", {cout}, 0.05f);
    auto &node = b.node("Conv", {x, n + "_w", n + "_b"}, {n});
    kann::test::OnnxBuilder::ints(node, "kernel_shape", {k, k});
    kann::test::OnnxBuilder::ints(node, "strides", {stride, stride});
    kann::test::OnnxBuilder::ints(node, "pads", {pad, pad, pad, pad});
    b.node("Relu", {n}, {n + "_r"});
    return n + "_r";
  };
  auto pool = [&](const std::string &x) {
    const std::string n = "p" + std::to_string(id++);
    auto &node = b.node("MaxPool", {x}, {n});
    kann::test::OnnxBuilder::ints(node, "kernel_shape", {3, 3});
    kann::test::OnnxBuilder::ints(node, "strides", {2, 2});
    kann::test::OnnxBuilder::int1(node, "ceil_mode", 1);
    return n;
  };
  auto fire = [&](const std::string &x, int cin, int squeeze, int expand) {
    std::string s = conv(x, cin, squeeze, 1, 1, 0);
    std::string e1 = conv(s, squeeze, expand, 1, 1, 0);
    std::string e3 = conv(s, squeeze, expand, 3, 1, 1);
    const std::string n = "f" + std::to_string(id++);
    auto &cat = b.node("Concat", {e1, e3}, {n});
    kann::test::OnnxBuilder::int1(cat, "axis", 1);
    return n;
  };
  std::string x = pool(conv("image", 3, 64, 3, 2, 0));
  x = fire(x, 64, 16, 64);
  x = pool(fire(x, 128, 16, 64));
  x = fire(x, 128, 32, 128);
  x = pool(fire(x, 256, 32, 128));
  x = fire(x, 256, 48, 192);
  x = fire(x, 384, 48, 192);
  x = fire(x, 384, 64, 256);
  x = fire(x, 512, 64, 256);
  x = conv(x, 512, 1000, 1, 1, 0);
  b.node("GlobalAveragePool", {x}, {"scores"});
  b.output("scores");
  return b.bytes();
}

manycl::Result<std::vector<uint8_t>> compile_for(const std::string &onnx, unsigned clusters) {
  auto graph = kann::import_onnx_bytes(onnx);
  if (!graph)
    return graph.error();
  if (auto optimized = kann::passes::optimize(graph.value()); !optimized)
    return optimized.error();
  kann::CompileOptions options;
  options.device = manycl::device::preset("mppa3").value();
  options.clusters = clusters;
  auto out = kann::compile_graph(graph.value(), options);
  if (!out)
    return out.error();
  return kann::format::write_kbin(out.value().program);
}

std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---- the child: runs the networks, prints "root <cycles>" and "sub <k> <cycles>" lines ----

struct Inference {
  uint64_t cycles = 0;
  std::vector<float> output;
};

// Runs `runs` inferences of `session` on `queue`; an empty result on error (printed).
std::vector<Inference> infer(kann::Session &session, cl_command_queue queue, unsigned runs) {
  std::vector<Inference> done;
  std::vector<float> input(session.inputs()[0].elements());
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = std::sin(0.01f * float(i));
  for (unsigned r = 0; r < runs; ++r) {
    auto wrote = session.write_input(queue, 0, input);
    auto event = wrote ? session.run(queue) : manycl::Result<cl_event>(wrote.error());
    if (!event) {
      std::fprintf(stderr, "run failed: %s\n", event.error().message.c_str());
      return {};
    }
    auto out = session.read_output(queue, 0, event.value());
    if (!out) {
      std::fprintf(stderr, "read failed: %s\n", out.error().message.c_str());
      return {};
    }
    done.push_back({session.stats(event.value()).modeled_cycles, std::move(out.value())});
    clReleaseEvent(event.value());
  }
  return done;
}

int child_main(const std::string &kbin5_path, const std::string &kbin1_path, bool busy) {
  const auto kbin5 = read_file(kbin5_path), kbin1 = read_file(kbin1_path);
  std::string why;
  cl_platform_id platform = manycl_test::find_manycl_platform(&why);
  cl_device_id root = nullptr;
  if (!platform || clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr)) {
    std::fprintf(stderr, "no ManyCL device: %s\n", why.c_str());
    return 2;
  }
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
  std::vector<cl_device_id> subs(kSubDevices);
  cl_uint made = 0;
  if (clCreateSubDevices(root, props, kSubDevices, subs.data(), &made) != CL_SUCCESS ||
      made != kSubDevices) {
    std::fprintf(stderr, "cannot make %u one-cluster sub-devices\n", kSubDevices);
    return 2;
  }
  std::vector<cl_device_id> all = {root};
  all.insert(all.end(), subs.begin(), subs.end());
  cl_int err = CL_SUCCESS;
  cl_context context =
      clCreateContext(nullptr, cl_uint(all.size()), all.data(), nullptr, nullptr, &err);
  if (err != CL_SUCCESS)
    return 2;

  // The competing host load: a thread that never sleeps while the networks run.
  std::atomic<bool> stop{false};
  std::thread spinner;
  if (busy)
    spinner = std::thread([&] {
      volatile uint64_t x = 1;
      while (!stop.load(std::memory_order_relaxed))
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    });

  int status = 0;
  {
    auto session = kann::Session::load(context, root, kbin5);
    cl_command_queue queue = clCreateCommandQueue(context, root, CL_QUEUE_PROFILING_ENABLE, &err);
    if (!session || err != CL_SUCCESS) {
      std::fprintf(stderr, "root session: %s\n",
                   session ? "queue" : session.error().message.c_str());
      status = 2;
    } else {
      auto runs = infer(*session.value(), queue, kRootRuns);
      status = runs.size() == kRootRuns ? status : 2;
      for (const auto &r : runs)
        std::printf("root %llu %s\n", static_cast<unsigned long long>(r.cycles),
                    r.output == runs[0].output ? "same" : "different");
      clReleaseCommandQueue(queue);
    }
  }
  // Five sub-devices at once, one host thread each.
  std::vector<std::vector<Inference>> per_sub(kSubDevices);
  std::vector<std::thread> threads;
  for (unsigned k = 0; k < kSubDevices; ++k)
    threads.emplace_back([&, k] {
      cl_int e = CL_SUCCESS;
      auto session = kann::Session::load(context, subs[k], kbin1);
      cl_command_queue queue =
          clCreateCommandQueue(context, subs[k], CL_QUEUE_PROFILING_ENABLE, &e);
      if (session && e == CL_SUCCESS)
        per_sub[k] = infer(*session.value(), queue, kSubRuns);
      if (queue)
        clReleaseCommandQueue(queue);
    });
  for (auto &t : threads)
    t.join();
  for (unsigned k = 0; k < kSubDevices; ++k) {
    status = per_sub[k].size() == kSubRuns ? status : 2;
    for (const auto &r : per_sub[k])
      std::printf("sub %u %llu %s\n", k, static_cast<unsigned long long>(r.cycles),
                  r.output == per_sub[0][0].output ? "same" : "different");
  }
  stop = true;
  if (spinner.joinable())
    spinner.join();
  for (cl_device_id d : subs)
    clReleaseDevice(d);
  clReleaseContext(context);
  return status;
}

// ---- the test ----

struct ChildResult {
  std::vector<std::string> root; // "cycles same|different" per inference
  std::map<unsigned, std::vector<std::string>> sub;
  int status = -1;
  std::string command;
};

ChildResult run_child(const std::string &env, const std::string &kbin5, const std::string &kbin1,
                      bool busy) {
  ChildResult r;
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return r;
  r.command = "env " + env + " " + std::string(self, size_t(n)) + " --child " + kbin5 + " " +
              kbin1 + (busy ? " busy" : " idle");
  FILE *p = popen(r.command.c_str(), "r");
  if (!p)
    return r;
  char line[256];
  while (fgets(line, sizeof line, p)) {
    std::istringstream in(line);
    std::string kind, cycles, same;
    in >> kind;
    if (kind == "root") {
      in >> cycles >> same;
      r.root.push_back(cycles + " " + same);
    } else if (kind == "sub") {
      unsigned k = 0;
      in >> k >> cycles >> same;
      r.sub[k].push_back(cycles + " " + same);
    }
  }
  r.status = pclose(p);
  return r;
}

TEST(ModeledDeterminism, SqueezeNetSizedOnFiveClustersAndOnFiveSubDevicesRepeatExactly) {
  const std::string onnx = squeezenet_onnx();
  const std::string stem = std::string(WORK_DIR) + "/determinism." + std::to_string(getpid());
  const std::string kbin5 = stem + ".c5.kbin", kbin1 = stem + ".c1.kbin";
  for (auto [path, clusters] : {std::pair{kbin5, 5u}, std::pair{kbin1, 1u}}) {
    auto bytes = compile_for(onnx, clusters);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.value().data()),
               std::streamsize(bytes.value().size()));
  }

  std::vector<ChildResult> results;
  // MANYCL_HOST_THREADS sizes the host pool that runs the clusters' record streams as
  // cooperative fibers and their native functions' tasks: one worker (every wait yields to
  // another cluster), two, and three (more workers than this host may have cores).
  for (const char *threads : {"1", "2"})
    for (const char *host : {"1", "2", "3"})
      for (bool busy : {false, true})
        results.push_back(run_child(std::string("MANYCL_PE_THREADS=") + threads +
                                        " MANYCL_HOST_THREADS=" + host,
                                    kbin5, kbin1, busy));
  std::remove(kbin5.c_str());
  std::remove(kbin1.c_str());

  const ChildResult &first = results.front();
  ASSERT_EQ(first.status, 0) << first.command;
  ASSERT_EQ(first.root.size(), kRootRuns) << first.command;
  ASSERT_EQ(first.sub.size(), kSubDevices) << first.command;
  const std::string root_ref = first.root[0], sub_ref = first.sub.at(0)[0];
  EXPECT_NE(root_ref.find(" same"), std::string::npos);
  for (const auto &r : results) {
    ASSERT_EQ(r.status, 0) << r.command;
    ASSERT_EQ(r.root.size(), kRootRuns) << r.command;
    for (const auto &line : r.root)
      EXPECT_EQ(line, root_ref) << "five clusters: " << r.command;
    ASSERT_EQ(r.sub.size(), kSubDevices) << r.command;
    for (const auto &[k, lines] : r.sub) {
      ASSERT_EQ(lines.size(), kSubRuns) << r.command;
      for (const auto &line : lines)
        EXPECT_EQ(line, sub_ref) << "sub-device " << k << ": " << r.command;
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 5 && std::string(argv[1]) == "--child")
    return child_main(argv[2], argv[3], std::string(argv[4]) == "busy");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
