// Runs one sample of a compiled network with kann::Session on the ManyCL platform and compares
// the first output with reference values.
// usage: consumer MODEL.kbin INPUTS.npy REFERENCE.npy  (float32 .npy; row 0 of each is used)
#include <kann/session.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<uint8_t> read_bytes(const char *path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The first `count` float32 values of a little-endian .npy file (format 1.x or 2.x).
bool read_npy_floats(const char *path, size_t count, std::vector<float> &out) {
  std::vector<uint8_t> b = read_bytes(path);
  if (b.size() < 12 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return false;
  size_t header = b[6] == 1 ? 10 + (b[8] | b[9] << 8) : 12 + (b[8] | b[9] << 8 | b[10] << 16);
  std::string dict(b.begin() + 10, b.begin() + std::min(header, b.size()));
  if (dict.find("'<f4'") == std::string::npos || b.size() < header + count * 4)
    return false;
  out.resize(count);
  std::memcpy(out.data(), b.data() + header, count * 4);
  return true;
}

int fail(const std::string &what) {
  std::fprintf(stderr, "consumer: %s\n", what.c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4)
    return fail("usage: consumer MODEL.kbin INPUTS.npy REFERENCE.npy");
  cl_platform_id platforms[16];
  cl_uint n = 0;
  if (clGetPlatformIDs(16, platforms, &n) != CL_SUCCESS)
    return fail("no OpenCL platform");
  cl_platform_id platform = nullptr;
  for (cl_uint i = 0; i < n && i < 16; ++i) {
    char name[64] = {};
    clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
    if (std::string(name) == "ManyCL")
      platform = platforms[i];
  }
  if (!platform)
    return fail("no ManyCL platform");
  cl_device_id device;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &device, nullptr) != CL_SUCCESS)
    return fail("no device");
  // A 1-cluster binary needs a 1-cluster sub-device.
  cl_device_partition_property by_counts[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1,
                                              CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  cl_device_id sub;
  if (clCreateSubDevices(device, by_counts, 1, &sub, nullptr) != CL_SUCCESS)
    return fail("cannot make a 1-cluster sub-device");
  cl_int err;
  cl_context context = clCreateContext(nullptr, 1, &sub, nullptr, nullptr, &err);
  cl_command_queue queue = clCreateCommandQueueWithProperties(context, sub, nullptr, &err);

  auto session = kann::Session::load(context, sub, read_bytes(argv[1]));
  if (!session)
    return fail(session.error().message);
  auto &s = *session.value();
  std::vector<float> input, reference;
  if (!read_npy_floats(argv[2], s.inputs()[0].elements(), input) ||
      !read_npy_floats(argv[3], s.outputs()[0].elements(), reference))
    return fail("cannot read the .npy files");
  if (auto w = s.write_input(queue, 0, input); !w)
    return fail(w.error().message);
  auto done = s.run(queue);
  if (!done)
    return fail(done.error().message);
  auto out = s.read_output(queue, 0, done.value());
  if (!out)
    return fail(out.error().message);
  kann::RunStats stats = s.stats(done.value());
  double diff = 0;
  for (size_t i = 0; i < reference.size(); ++i)
    diff = std::fmax(diff, std::fabs(out.value()[i] - reference[i]));
  std::printf("consumer: %s: %zu outputs, max |diff| %.3g, modeled %.3f us\n",
              s.outputs()[0].name.c_str(), reference.size(), diff, stats.modeled_seconds * 1e6);
  clReleaseEvent(done.value());
  session.value().reset();
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  clReleaseDevice(sub);
  return diff <= 1e-4 && stats.modeled_seconds > 0 ? 0 : 1;
}
