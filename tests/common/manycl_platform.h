// The ManyCL platform as a test program finds it through the ICD loader (OCL_ICD_VENDORS
// pointing at <build>/vendors), like any OpenCL application.
#pragma once

#include <CL/cl.h>

#include <string>
#include <vector>

namespace manycl_test {

// A ManyCL platform with a bad configuration hides itself after printing the cause once on
// stderr ("ManyCL: ..."), so a test failure points there as well as at the loader setup.
inline constexpr const char *kNoPlatformHint =
    "a bad MANYCL_DEVICES or MANYCL_DEVICE_MODE hides the platform: see the 'ManyCL:' line on "
    "stderr";

// nullptr when the loader lists no ManyCL platform; `why` then says what is missing.
inline cl_platform_id find_manycl_platform(std::string *why = nullptr) {
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) {
    if (why)
      *why = std::string("no OpenCL platform (is OCL_ICD_VENDORS set to <build>/vendors?); ") +
             kNoPlatformHint;
    return nullptr;
  }
  std::vector<cl_platform_id> platforms(n);
  clGetPlatformIDs(n, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    char name[64] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, nullptr);
    if (std::string(name) == "ManyCL")
      return p;
  }
  if (why)
    *why = std::string("the ICD loader lists no ManyCL platform; ") + kNoPlatformHint;
  return nullptr;
}

} // namespace manycl_test
