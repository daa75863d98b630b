// kann program binaries through the ICD loader: kann::Session on devices and sub-devices,
// concurrency, and rejection of bad binaries with an explaining build log.
#include <CL/cl.h>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/manycl_platform.h"
#include "kann/kbin.h"
#include "kann/session.h"
#include "kann/npy.h"

namespace {

std::vector<uint8_t> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Compiles the bundled digits model with the kann CLI for `clusters` clusters (into a file of
// this process's own: ctest runs the tests of this file in parallel processes).
std::vector<uint8_t> digits_kbin(unsigned clusters) {
  std::string out = std::string(WORK_DIR) + "/digits_" + std::to_string(clusters) + "." +
                    std::to_string(getpid()) + ".kbin";
  std::string cmd = std::string(KANN_EXE) + " compile " + DIGITS_DIR + "/model.onnx -o " + out +
                    " --clusters " + std::to_string(clusters) + " > /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto bytes = read_file(out);
  std::remove(out.c_str());
  return bytes;
}

class KbinIcd : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    platform = manycl_test::find_manycl_platform(&why);
    ASSERT_NE(platform, nullptr) << why;
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr), CL_SUCCESS);
    clGetDeviceInfo(root, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
  }

  // One sub-device per cluster (by affinity domain).
  std::vector<cl_device_id> per_cluster_subdevices() {
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                            CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
    cl_uint made = 0;
    EXPECT_EQ(clCreateSubDevices(root, props, 0, nullptr, &made), CL_SUCCESS);
    std::vector<cl_device_id> subs(made);
    EXPECT_EQ(clCreateSubDevices(root, props, made, subs.data(), nullptr), CL_SUCCESS);
    return subs;
  }

  struct Env {
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    ~Env() {
      if (queue)
        clReleaseCommandQueue(queue);
      if (context)
        clReleaseContext(context);
    }
  };
  void make_env(cl_device_id device, Env &env) {
    cl_int err;
    env.context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    env.queue = clCreateCommandQueue(env.context, device, CL_QUEUE_PROFILING_ENABLE, &err);
    ASSERT_EQ(err, CL_SUCCESS);
  }

  std::vector<float> infer(kann::Session &session, cl_command_queue queue,
                           const std::vector<float> &input) {
    EXPECT_TRUE(session.write_input(queue, 0, input).ok());
    auto event = session.run(queue);
    EXPECT_TRUE(event.ok());
    auto out = session.read_output(queue, 0, event.value());
    EXPECT_TRUE(out.ok());
    clReleaseEvent(event.value());
    return out.ok() ? out.value() : std::vector<float>{};
  }

  cl_platform_id platform = nullptr;
  cl_device_id root = nullptr;
  cl_uint units = 0;
};

size_t argmax(const float *v, size_t n) {
  return static_cast<size_t>(std::max_element(v, v + n) - v);
}

TEST_F(KbinIcd, DigitsOnAllClustersMatchesTheFramework) {
  auto kbin = digits_kbin(5);
  ASSERT_FALSE(kbin.empty());
  Env env;
  make_env(root, env);
  auto session = kann::Session::load(env.context, root, kbin);
  ASSERT_TRUE(session.ok()) << session.error().message;
  ASSERT_EQ(session.value()->inputs().size(), 1u);
  ASSERT_EQ(session.value()->outputs().size(), 1u);
  auto inputs = kann::npy::read(std::string(DIGITS_DIR) + "/test_inputs.npy");
  auto reference = kann::npy::read(std::string(DIGITS_DIR) + "/reference_logits.npy");
  ASSERT_TRUE(inputs.ok() && reference.ok());
  for (size_t s = 0; s < 40; ++s) {
    std::vector<float> x(inputs->data.begin() + s * 64, inputs->data.begin() + (s + 1) * 64);
    auto logits = infer(*session.value(), env.queue, x);
    ASSERT_EQ(logits.size(), 10u);
    for (size_t k = 0; k < 10; ++k)
      EXPECT_NEAR(logits[k], reference->data[s * 10 + k], 1e-3) << "sample " << s << " logit " << k;
    EXPECT_EQ(argmax(logits.data(), 10), argmax(&reference->data[s * 10], 10));
  }
}

TEST_F(KbinIcd, ModeledStatisticsAreReported) {
  auto kbin = digits_kbin(5);
  Env env;
  make_env(root, env);
  auto session = kann::Session::load(env.context, root, kbin);
  ASSERT_TRUE(session.ok()) << session.error().message;
  std::vector<float> x(64, 0.5f);
  ASSERT_TRUE(session.value()->write_input(env.queue, 0, x).ok());
  auto event = session.value()->run(env.queue);
  ASSERT_TRUE(event.ok());
  ASSERT_EQ(clWaitForEvents(1, &event.value()), CL_SUCCESS);
  auto stats = session.value()->stats(event.value());
  EXPECT_GT(stats.modeled_cycles, 0u);
  EXPECT_GT(stats.modeled_seconds, 0.0);
  // Every parameter byte is read from DDR (multicast counts once), the input too.
  EXPECT_GE(stats.ddr_bytes_read, 256u);
  EXPECT_GE(stats.ddr_bytes_written, 40u);
  clReleaseEvent(event.value());
}

TEST_F(KbinIcd, ConcurrentSubDevicesGiveTheSequentialResults) {
  auto kbin = digits_kbin(1);
  auto subs = per_cluster_subdevices();
  ASSERT_GE(subs.size(), 2u);
  auto inputs = kann::npy::read(std::string(DIGITS_DIR) + "/test_inputs.npy");
  ASSERT_TRUE(inputs.ok());
  const size_t samples = 24;

  std::vector<std::vector<float>> sequential;
  {
    Env env;
    make_env(subs[0], env);
    auto session = kann::Session::load(env.context, subs[0], kbin);
    ASSERT_TRUE(session.ok()) << session.error().message;
    for (size_t s = 0; s < samples; ++s)
      sequential.push_back(infer(
          *session.value(), env.queue,
          std::vector<float>(inputs->data.begin() + s * 64, inputs->data.begin() + (s + 1) * 64)));
  }
  std::vector<std::vector<std::vector<float>>> results(subs.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < subs.size(); ++k) {
    threads.emplace_back([&, k] {
      Env env;
      make_env(subs[k], env);
      auto session = kann::Session::load(env.context, subs[k], kbin);
      if (!session.ok())
        return;
      for (size_t s = 0; s < samples; ++s)
        results[k].push_back(infer(*session.value(), env.queue,
                                   std::vector<float>(inputs->data.begin() + s * 64,
                                                      inputs->data.begin() + (s + 1) * 64)));
    });
  }
  for (auto &t : threads)
    t.join();
  for (size_t k = 0; k < subs.size(); ++k)
    EXPECT_EQ(results[k], sequential) << "sub-device " << k;
  for (auto d : subs)
    clReleaseDevice(d);
}

TEST_F(KbinIcd, ClusterCountMismatchIsABuildFailureWithALog) {
  auto kbin = digits_kbin(2);
  auto subs = per_cluster_subdevices(); // one cluster each: the binary needs two
  Env env;
  make_env(subs[0], env);
  const unsigned char *bytes = kbin.data();
  size_t length = kbin.size();
  cl_int status = 0, err = 0;
  cl_program program =
      clCreateProgramWithBinary(env.context, 1, &subs[0], &length, &bytes, &status, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  EXPECT_EQ(clBuildProgram(program, 1, &subs[0], "", nullptr, nullptr), CL_INVALID_BINARY);
  char log[2048] = {};
  clGetProgramBuildInfo(program, subs[0], CL_PROGRAM_BUILD_LOG, sizeof log, log, nullptr);
  EXPECT_NE(std::string(log).find("cluster"), std::string::npos) << log;
  cl_build_status build_status;
  clGetProgramBuildInfo(program, subs[0], CL_PROGRAM_BUILD_STATUS, sizeof build_status,
                        &build_status, nullptr);
  EXPECT_EQ(build_status, CL_BUILD_ERROR);
  clReleaseProgram(program);
  for (auto d : subs)
    clReleaseDevice(d);
}

TEST_F(KbinIcd, CorruptedBinariesAreRejectedNeverRun) {
  auto kbin = digits_kbin(5);
  Env env;
  make_env(root, env);
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto bad = kbin;
    // Truncations, and bit flips anywhere (the checksum covers weights and records too;
    // flips that cancel out leave the original, valid binary).
    if (trial % 3 == 0) {
      bad.resize(std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng));
    } else {
      for (int f = 0; f < 1 + trial % 3; ++f) {
        size_t at = std::uniform_int_distribution<size_t>(0, bad.size() - 1)(rng);
        bad[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
    }
    if (bad.empty())
      bad.push_back(0);
    const unsigned char *bytes = bad.data();
    size_t length = bad.size();
    cl_int status = 0, err = 0;
    cl_program program =
        clCreateProgramWithBinary(env.context, 1, &root, &length, &bytes, &status, &err);
    if (err != CL_SUCCESS) {
      EXPECT_EQ(err, CL_INVALID_BINARY);
      ++rejected;
      continue;
    }
    cl_int build = clBuildProgram(program, 1, &root, "", nullptr, nullptr);
    if (build != CL_SUCCESS) {
      EXPECT_EQ(build, CL_INVALID_BINARY);
      char log[4096] = {};
      clGetProgramBuildInfo(program, root, CL_PROGRAM_BUILD_LOG, sizeof log, log, nullptr);
      EXPECT_GT(std::strlen(log), 0u);
      ++rejected;
    } else {
      // Accepted means valid: it must run to completion (whatever it computes) without harm.
      auto session = kann::Session::load(env.context, root, bad);
      if (session.ok()) {
        std::vector<float> x(session.value()->inputs()[0].elements(), 0.25f);
        infer(*session.value(), env.queue, x);
      }
    }
    clReleaseProgram(program);
  }
  EXPECT_GT(rejected, 40);
}

// Byte offset of the first byte of a section's contents, from the section table.
uint64_t section_offset(const std::vector<uint8_t> &kbin, uint32_t kind) {
  kbin_header h;
  std::memcpy(&h, kbin.data(), sizeof h);
  for (uint32_t i = 0; i < h.section_count; ++i) {
    kbin_section s;
    std::memcpy(&s, kbin.data() + sizeof h + i * sizeof s, sizeof s);
    if (s.kind == kind)
      return s.offset;
  }
  ADD_FAILURE() << "no section of kind " << kind;
  return 0;
}

// One flipped byte inside a valid range (a weight, a record argument, an informational
// header field) would otherwise be a valid, different network: the checksum refuses it at
// clBuildProgram, and the build log says so.
TEST_F(KbinIcd, FlippedBytesFailTheChecksumAtBuild) {
  const auto kbin = digits_kbin(5);
  Env env;
  make_env(root, env);
  kbin_stream_entry first_stream;
  const uint64_t streams = section_offset(kbin, KBIN_SECTION_STREAMS);
  std::memcpy(&first_stream, kbin.data() + streams, sizeof first_stream);
  const struct {
    const char *what;
    uint64_t at;
  } flips[] = {
      {"a parameter byte", section_offset(kbin, KBIN_SECTION_PARAMS) + 100},
      // Past the 8-byte record header: inside the first record's argument block.
      {"a record byte", streams + first_stream.offset + sizeof(kbin_record_header) + 4},
      {"the header's PE count", offsetof(kbin_header, pes_per_cluster)},
  };
  for (const auto &flip : flips) {
    SCOPED_TRACE(flip.what);
    ASSERT_LT(flip.at, kbin.size());
    auto bad = kbin;
    bad[flip.at] ^= 0x01;
    const unsigned char *bytes = bad.data();
    size_t length = bad.size();
    cl_int status = 0, err = 0;
    cl_program program =
        clCreateProgramWithBinary(env.context, 1, &root, &length, &bytes, &status, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    EXPECT_EQ(clBuildProgram(program, 1, &root, "", nullptr, nullptr), CL_INVALID_BINARY);
    char log[4096] = {};
    clGetProgramBuildInfo(program, root, CL_PROGRAM_BUILD_LOG, sizeof log, log, nullptr);
    EXPECT_NE(std::string(log).find("checksum does not match"), std::string::npos) << log;
    clReleaseProgram(program);
  }
  // The unmodified binary builds.
  const unsigned char *bytes = kbin.data();
  size_t length = kbin.size();
  cl_int status = 0, err = 0;
  cl_program program =
      clCreateProgramWithBinary(env.context, 1, &root, &length, &bytes, &status, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  EXPECT_EQ(clBuildProgram(program, 1, &root, "", nullptr, nullptr), CL_SUCCESS);
  clReleaseProgram(program);
}

struct Shell {
  int status;
  std::string output;
};

Shell shell(const std::string &cmd) {
  Shell r{-1, ""};
  if (FILE *p = popen((cmd + " 2>&1").c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof buf, p))
      r.output += buf;
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  return r;
}

// `kann run` takes an input only in the network input's shape (or that shape with N samples
// on the first axis): 64 values as (64,) or (8, 8) for a (1, 1, 8, 8) input are refused,
// and so are counts that are not whole numbers in range.
TEST_F(KbinIcd, KannRunRefusesOtherShapesAndBadCounts) {
  const std::string kbin = std::string(WORK_DIR) + "/run_shape." + std::to_string(getpid());
  {
    auto bytes = digits_kbin(5);
    std::ofstream(kbin + ".kbin", std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  }
  const std::string run = std::string(KANN_EXE) + " run " + kbin + ".kbin --input ";
  const std::vector<float> values(64, 0.5f);
  const struct {
    std::vector<int64_t> shape;
    const char *text;
  } wrong[] = {
      {{64}, "(64,)"}, {{8, 8}, "(8, 8)"}, {{1, 64}, "(1, 64)"}, {{1, 8, 8, 1}, "(1, 8, 8, 1)"}};
  for (const auto &w : wrong) {
    kann::npy::Array array{w.shape, values};
    ASSERT_TRUE(kann::npy::write(kbin + ".npy", array).ok());
    auto r = shell(run + kbin + ".npy");
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find(std::string("shape ") + w.text +
                            " does not match the input's shape (1, 1, 8, 8) (or (N, 1, 8, 8) "
                            "for N samples) for input 'input'"),
              std::string::npos)
        << r.output;
  }
  // The input's own shape and three samples stacked on the first axis run.
  for (const std::vector<int64_t> &shape : {std::vector<int64_t>{1, 1, 8, 8}, {3, 1, 8, 8}}) {
    kann::npy::Array array{shape, std::vector<float>(size_t(shape[0]) * 64, 0.5f)};
    ASSERT_TRUE(kann::npy::write(kbin + ".npy", array).ok());
    auto r = shell(run + kbin + ".npy");
    EXPECT_EQ(r.status, 0) << r.output;
  }
  for (const char *bad : {"--subdevices 0", "--subdevices -1", "--iterations 0", "--iterations 2x",
                          "--iterations 99999999999999999999"}) {
    auto r = shell(run + kbin + ".npy " + bad);
    EXPECT_EQ(r.status, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("kann run: --"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("expected an integer in 1.."), std::string::npos) << r.output;
  }
  for (const char *bad : {"--warmup -1", "--warmup 2x", "--warmup"}) {
    auto r = shell(run + kbin + ".npy " + bad);
    EXPECT_EQ(r.status, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("kann run: --warmup"), std::string::npos) << r.output;
  }
  // Warm-up passes are run but not counted: 3 timed iterations x 3 samples.
  auto warm = shell(run + kbin + ".npy --warmup 2 --iterations 3");
  EXPECT_EQ(warm.status, 0) << warm.output;
  EXPECT_NE(warm.output.find("ran 9 inference(s) on 1 device (3 iteration(s) x "
                             "3 sample(s) each, after 2 untimed warm-up iteration(s))"),
            std::string::npos)
      << warm.output;
  std::remove((kbin + ".kbin").c_str());
  std::remove((kbin + ".npy").c_str());
}

TEST_F(KbinIcd, LaunchChecks) {
  auto kbin = digits_kbin(5);
  Env env;
  make_env(root, env);
  auto session = kann::Session::load(env.context, root, kbin);
  ASSERT_TRUE(session.ok()) << session.error().message;
  cl_kernel kernel = session.value()->kernel();
  size_t wrong = 3, one = 1;
  EXPECT_EQ(
      clEnqueueNDRangeKernel(env.queue, kernel, 1, nullptr, &wrong, &one, 0, nullptr, nullptr),
      CL_INVALID_GLOBAL_WORK_SIZE);
  size_t reqd[3] = {};
  ASSERT_EQ(clGetKernelWorkGroupInfo(kernel, root, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof reqd,
                                     reqd, nullptr),
            CL_SUCCESS);
  EXPECT_EQ(reqd[0], 1u);
  // A buffer smaller than the input tensor is refused at enqueue.
  cl_int err;
  cl_mem tiny = clCreateBuffer(env.context, CL_MEM_READ_WRITE, 16, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  ASSERT_EQ(clSetKernelArg(kernel, 0, sizeof(cl_mem), &tiny), CL_SUCCESS);
  size_t five = 5;
  EXPECT_EQ(clEnqueueNDRangeKernel(env.queue, kernel, 1, nullptr, &five, &one, 0, nullptr, nullptr),
            CL_INVALID_KERNEL_ARGS);
  clReleaseMemObject(tiny);
}

TEST_F(KbinIcd, ProgramBinariesRoundTrip) {
  auto kbin = digits_kbin(5);
  Env env;
  make_env(root, env);
  auto session = kann::Session::load(env.context, root, kbin);
  ASSERT_TRUE(session.ok());
  cl_program program;
  ASSERT_EQ(clGetKernelInfo(session.value()->kernel(), CL_KERNEL_PROGRAM, sizeof program, &program,
                            nullptr),
            CL_SUCCESS);
  size_t size = 0;
  ASSERT_EQ(clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr),
            CL_SUCCESS);
  ASSERT_EQ(size, kbin.size());
  std::vector<unsigned char> copy(size);
  unsigned char *ptr = copy.data();
  ASSERT_EQ(clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr), CL_SUCCESS);
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), kbin.begin()));
}

} // namespace
