#include "vendor_extensions.h"

#include "manycl/runtime/api_guard.h"
#include "manycl/runtime/vendor.h"

namespace manycl::icd {

void *vendor_extension_function(std::string_view name) {
  if (name == "clGetDeviceConfigMCL")
    return reinterpret_cast<void *>(api::guarded<"clGetDeviceConfigMCL", &api::clGetDeviceConfigMCL>);
  if (name == "clAddNativeLibraryMCL")
    return reinterpret_cast<void *>(api::guarded<"clAddNativeLibraryMCL", &api::clAddNativeLibraryMCL>);
  return nullptr;
}

} // namespace manycl::icd
