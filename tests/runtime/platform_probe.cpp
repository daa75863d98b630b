// A minimal OpenCL application for test_config_errors.cpp: it looks for the ManyCL platform
// through the ICD loader (twice, as applications often do) and prints what it found on
// stdout, leaving stderr to whatever ManyCL itself prints.
#include <CL/cl.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

bool has_manycl() {
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0)
    return false;
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    char name[64] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, nullptr);
    if (std::strcmp(name, "ManyCL") == 0)
      return true;
  }
  return false;
}

} // namespace

int main() {
  const bool first = has_manycl();
  const bool second = has_manycl();
  std::printf("manycl=%d\n", first && second ? 1 : first || second ? 2 : 0);
  return 0;
}
