// The OpenCL entry points of ManyCL, one per dispatch-table slot, declared from the
// function types of CL/cl_icd.h so that a signature mismatch fails to link.
#pragma once

#include <type_traits>

#include <CL/cl_icd.h>

namespace manycl::api {
#define X(name) extern std::remove_pointer_t<cl_api_##name> name;
#define V(name)
#define U(name, error)
#include "manycl/runtime/dispatch_slots.def"
#undef X
#undef V
#undef U

// cl_khr_icd entry points reached through clGetExtensionFunctionAddress.
cl_int CL_API_CALL clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms);
cl_int CL_API_CALL clIcdSetPlatformDispatchDataKHR(cl_platform_id platform, void *dispatch_data);
void *CL_API_CALL clIcdGetFunctionAddressForPlatformKHR(cl_platform_id platform, const char *name);
} // namespace manycl::api
