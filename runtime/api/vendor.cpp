// ManyCL vendor extension functions (suffix MCL); see CL/cl_ext_manycl.h.
#include "CL/cl_ext_manycl.h"

#include <nlohmann/json.hpp>

#include "common.h"
#include "manycl/runtime/info.h"
#include "manycl/runtime/vendor.h"

namespace manycl::api {

cl_int CL_API_CALL clGetDeviceConfigMCL(cl_device_id device, size_t size, char *value, size_t *size_ret) {
  Device *d = Device::from(device);
  if (!d)
    return CL_INVALID_DEVICE;
  auto config = d->config();
  config.clusters = static_cast<unsigned>(d->clusters().size());
  nlohmann::json j = nlohmann::json::parse(device::config_to_json(config));
  j["cluster_ids"] = d->clusters();
  return rt::InfoWriter(size, value, size_ret).string(j.dump());
}

cl_int CL_API_CALL clAddNativeLibraryMCL(cl_platform_id platform, const char *path) {
  Platform *p = Platform::from(platform);
  if (!p)
    return CL_INVALID_PLATFORM;
  if (!path || !*path)
    return CL_INVALID_VALUE;
  return p->add_native_library(path);
}

} // namespace manycl::api
