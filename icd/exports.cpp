// The only symbols the ICD exports (see manycl.map): what the ocl-icd and Khronos loaders
// look up with dlsym. Everything else is reached through the dispatch table.
#include "manycl/runtime/api.h"

extern "C" {

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL
clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms) {
  return manycl::api::clIcdGetPlatformIDsKHR(num_entries, platforms, num_platforms);
}

__attribute__((visibility("default"))) CL_API_ENTRY cl_int CL_API_CALL
clGetPlatformInfo(cl_platform_id platform, cl_platform_info param_name, size_t param_value_size, void *param_value,
                  size_t *param_value_size_ret) {
  return manycl::api::clGetPlatformInfo(platform, param_name, param_value_size, param_value, param_value_size_ret);
}

__attribute__((visibility("default"))) CL_API_ENTRY void *CL_API_CALL
clGetExtensionFunctionAddress(const char *func_name) {
  return manycl::api::clGetExtensionFunctionAddress(func_name);
}

} // extern "C"
