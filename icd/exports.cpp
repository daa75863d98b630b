// The only symbols the ICD exports (see manycl.map): what the ocl-icd and Khronos loaders
// look up with dlsym. Everything else is reached through the dispatch table. They go
// through the same guard as the table's functions.
#include "manycl/runtime/api.h"
#include "manycl/runtime/api_guard.h"

namespace api = manycl::api;

extern "C" {

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL
clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms) {
  return api::guarded<"clIcdGetPlatformIDsKHR", &api::clIcdGetPlatformIDsKHR>(num_entries, platforms,
                                                                            num_platforms);
}

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL
clGetPlatformInfo(cl_platform_id platform, cl_platform_info param_name, size_t param_value_size, void *param_value,
                  size_t *param_value_size_ret) {
  return api::guarded<"clGetPlatformInfo", &api::clGetPlatformInfo>(platform, param_name, param_value_size,
                                                                    param_value, param_value_size_ret);
}

__attribute__((visibility("default"))) CL_API_ENTRY void *CL_API_CALL
clGetExtensionFunctionAddress(const char *func_name) {
  return api::guarded<"clGetExtensionFunctionAddress", &api::clGetExtensionFunctionAddress>(func_name);
}

} // extern "C"
