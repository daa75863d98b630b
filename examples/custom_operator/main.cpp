// A custom operator end to end: a network whose com.example::ScaledSoftsign node kann does
// not know runs the user's function from libmy_ops.so (my_ops.c) on every cluster.
//
//   kann compile model.onnx -o model.kbin --clusters 5 --custom-ops libmy_ops.so
//   custom_operator model.kbin libmy_ops.so [TOLERANCE] # registers the library, runs, checks
//                                                      # (max |error|, default 1e-6: FP32)
//   custom_operator model.kbin --without-library       # the load must fail, naming the function
//
// The application registers the library with clAddNativeLibraryMCL (the cl_manycl_native_library
// extension) before it creates the program: the runtime resolves every custom function a
// binary names when it loads it. The output is checked against the formula computed here
// with a plain loop, independently of the library.
#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kann/session.h"

namespace {

cl_platform_id manycl_platform() {
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS)
    return nullptr;
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    char name[64] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, nullptr);
    if (!std::strcmp(name, "ManyCL"))
      return p;
  }
  return nullptr;
}

int fail(const std::string &message) {
  std::fprintf(stderr, "custom_operator: %s\n", message.c_str());
  return 1;
}

// The network of make_model.py: Neg, the custom node with its attributes, Sigmoid.
constexpr float kAlpha = 1.5f, kBeta = -0.25f;
float reference(float x) {
  const float s = kAlpha * -x / (1.0f + std::fabs(x)) + kBeta;
  return 1.0f / (1.0f + std::exp(-s));
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.kbin LIB.so|--without-library [TOLERANCE]\n", argv[0]);
    return 2;
  }
  std::ifstream file(argv[1], std::ios::binary);
  std::vector<uint8_t> kbin((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
  if (kbin.empty())
    return fail(std::string("cannot read ") + argv[1]);
  const bool without_library = !std::strcmp(argv[2], "--without-library");
  const double tolerance = argc == 4 ? std::atof(argv[3]) : 1e-6;

  cl_platform_id platform = manycl_platform();
  if (!platform)
    return fail("no ManyCL platform (set OCL_ICD_VENDORS to <build>/vendors)");
  if (!without_library) {
    auto add_library = reinterpret_cast<clAddNativeLibraryMCL_fn>(
        clGetExtensionFunctionAddressForPlatform(platform, "clAddNativeLibraryMCL"));
    if (!add_library)
      return fail("the platform lacks clAddNativeLibraryMCL");
    if (add_library(platform, argv[2]) != CL_SUCCESS)
      return fail(std::string("clAddNativeLibraryMCL(") + argv[2] + ") failed");
  }
  cl_device_id device = nullptr;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr) != CL_SUCCESS)
    return fail("no ManyCL device");
  cl_int err = CL_SUCCESS;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_command_queue queue = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);
  int status = 0;
  {
    auto session = kann::Session::load(context, device, kbin);
    if (without_library) {
      // The binary names a function no registered library exports: a clear load error.
      if (session.ok())
        status = fail("the program loaded although no library exports its custom function");
      else if (session.error().message.find("scaled_softsign") == std::string::npos)
        status = fail("the load error does not name the function: " + session.error().message);
      else
        std::printf("rejected as expected: %s\n", session.error().message.c_str());
    } else if (!session.ok()) {
      status = fail("cannot load the program: " + session.error().message);
    } else {
      auto &s = *session.value();
      std::vector<float> input(s.inputs()[0].elements());
      std::mt19937 random(14);
      std::uniform_real_distribution<float> values(-4.0f, 4.0f);
      for (float &v : input)
        v = values(random);
      cl_event done = nullptr;
      auto written = s.write_input(queue, 0, input);
      auto ran = written.ok() ? s.run(queue) : manycl::Result<cl_event>(written.error());
      if (!ran.ok()) {
        status = fail("run failed: " + ran.error().message);
      } else {
        done = ran.value();
        auto output = s.read_output(queue, 0, done);
        if (!output.ok()) {
          status = fail("reading the output failed: " + output.error().message);
        } else if (output.value().size() != input.size()) {
          status = fail("output has " + std::to_string(output.value().size()) + " elements");
        } else {
          double worst = 0;
          for (size_t i = 0; i < input.size(); ++i)
            worst = std::max(worst, (double)std::fabs(output.value()[i] - reference(input[i])));
          const auto stats = s.stats(done);
          std::printf("%zu elements on %u clusters, max |error| %.3g vs the reference loop; "
                      "modeled device time %llu cycles\n",
                      input.size(), s.cluster_count(), worst,
                      (unsigned long long)stats.modeled_cycles);
          if (!(worst <= tolerance))
            status = fail("output differs from the reference");
        }
        clReleaseEvent(done);
      }
    }
  }
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return status;
}
