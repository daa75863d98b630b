#include "manycl/runtime/platform.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "manycl/compiler/compiler.h"
#include <future>

#include "manycl/env.h"
#include "manycl/runtime/device.h"
#include "manycl/runtime/info.h"

namespace manycl::rt {

namespace {
std::atomic<void *> g_dispatch_data{nullptr};
}

void *platform_dispatch_data() { return g_dispatch_data.load(std::memory_order_acquire); }

Platform &Platform::get() {
  // Never destroyed: the loaders call into the ICD from their own atexit handlers and
  // worker threads must not outlive the objects they use.
  static Platform *platform = new Platform();
  return *platform;
}

Platform::Platform() {
  auto configs = device::configs_from_environment();
  if (!configs) {
    init_error_ = configs.error().message;
  } else {
    for (auto &config : configs.value()) {
      if (auto valid = config.validate(); !valid) {
        init_error_ = "MANYCL_DEVICES: " + config.name + ": " + valid.error().message;
        continue;
      }
      hardware_.push_back(std::make_unique<device::Device>(config));
      roots_.push_back(new Device(*hardware_.back()));
    }
  }
  if (!init_error_.empty()) {
    // The loader then skips the platform and applications can only say "no platform": this
    // line, once per process, is the only place a user learns what to fix.
    std::fprintf(stderr, "ManyCL: %s; %s\n", init_error_.c_str(),
                 roots_.empty() ? "the ManyCL platform is hidden" : "that device is left out");
  }
  if (!configs)
    return;
  // Native libraries whose functions OpenCL C code may call through mppa_native.
  if (const char *paths = env::get("MANYCL_NATIVE_PATH")) {
    std::string list = paths;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      std::string path = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!path.empty())
        add_native_library(path);
      if (end == std::string::npos)
        break;
      start = end + 1;
    }
  }
}

cl_int Platform::add_native_library(const std::string &path) {
  auto status = compiler::addNativeLibrary(path);
  if (!status.ok()) {
    std::lock_guard lock(native_mutex_);
    native_errors_ += path + ": " + status.message + "\n";
    return CL_INVALID_VALUE;
  }
  return CL_SUCCESS;
}

void Platform::set_dispatch_data(void *data) {
  g_dispatch_data.store(data, std::memory_order_release);
  this->dispatch_data = data;
  for (Device *device : roots_)
    device->dispatch_data = data;
}

cl_int Platform::info(cl_platform_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_PLATFORM_PROFILE:
    return out.string("FULL_PROFILE");
  case CL_PLATFORM_VERSION:
    return out.string(std::string("OpenCL 1.2 ManyCL ") + kDriverVersion);
  case CL_PLATFORM_NAME:
    return out.string(kPlatformName);
  case CL_PLATFORM_VENDOR:
    return out.string(kPlatformVendor);
  case CL_PLATFORM_EXTENSIONS:
    return out.string("cl_khr_icd cl_manycl_device_config cl_manycl_command_stats cl_manycl_native_library");
  case CL_PLATFORM_ICD_SUFFIX_KHR:
    return out.string(kIcdSuffix);
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
