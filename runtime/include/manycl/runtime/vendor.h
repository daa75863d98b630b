#pragma once

#include "CL/cl_ext_manycl.h"

namespace manycl::api {
cl_int CL_API_CALL clGetDeviceConfigMCL(cl_device_id device, size_t size, char *value, size_t *size_ret);
cl_int CL_API_CALL clAddNativeLibraryMCL(cl_platform_id platform, const char *path);
}
