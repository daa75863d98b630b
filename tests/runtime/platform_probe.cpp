// A minimal OpenCL application for test_config_errors.cpp: it looks for the ManyCL platform
// through the ICD loader (twice, as applications often do) and prints what it found on
// stdout, leaving stderr to whatever ManyCL itself prints.
#include <CL/cl.h>

#include "../common/manycl_platform.h"

#include <cstdio>

namespace {

bool has_manycl() { return manycl_test::find_manycl_platform() != nullptr; }

} // namespace

int main() {
  const bool first = has_manycl();
  const bool second = has_manycl();
  std::printf("manycl=%d\n", first && second ? 1 : first || second ? 2 : 0);
  return 0;
}
