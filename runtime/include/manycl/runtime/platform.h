// The ManyCL platform: a process-wide singleton owning the simulated devices named by the
// environment (MANYCL_DEVICES) and their root OpenCL devices.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "manycl/device/device.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

class Device;

inline constexpr const char *kPlatformName = "ManyCL";
inline constexpr const char *kPlatformVendor = "ManyCL";
inline constexpr const char *kIcdSuffix = "MCL";
inline constexpr const char *kDriverVersion = "0.1.0";

class Platform : public Object<Platform, _cl_platform_id, Kind::Platform> {
public:
  static Platform &get();

  const std::vector<Device *> &root_devices() const { return roots_; }
  // Why no device could be created (bad MANYCL_DEVICES), or empty.
  const std::string &init_error() const { return init_error_; }

  cl_int info(cl_platform_info param, size_t size, void *value, size_t *size_ret);

  // Registers a shared library whose exported functions OpenCL C code may declare with
  // __attribute__((mppa_native)) and call (MANYCL_NATIVE_PATH, clAddNativeLibraryMCL).
  cl_int add_native_library(const std::string &path);

  // cl_khr_icd 2.0: the loader's dispatch data, copied into every object created after.
  void set_dispatch_data(void *data);

private:
  Platform();
  std::vector<std::unique_ptr<device::Device>> hardware_;
  std::vector<Device *> roots_;
  std::string init_error_;
  std::mutex native_mutex_;
  std::string native_errors_;
};

} // namespace manycl::rt
