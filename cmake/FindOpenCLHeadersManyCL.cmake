# OpenCL headers (Debian opencl-headers). We build an ICD, so we need the headers
# and cl_icd.h, never a link to libOpenCL for the ICD itself.
find_path(OpenCLHeadersManyCL_INCLUDE_DIR NAMES CL/cl_icd.h)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenCLHeadersManyCL REQUIRED_VARS OpenCLHeadersManyCL_INCLUDE_DIR)
if(OpenCLHeadersManyCL_FOUND AND NOT TARGET ManyCL::OpenCLHeaders)
  add_library(ManyCL::OpenCLHeaders INTERFACE IMPORTED)
  set_target_properties(ManyCL::OpenCLHeaders PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenCLHeadersManyCL_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "CL_TARGET_OPENCL_VERSION=300;CL_USE_DEPRECATED_OPENCL_1_0_APIS;CL_USE_DEPRECATED_OPENCL_1_1_APIS;CL_USE_DEPRECATED_OPENCL_1_2_APIS;CL_USE_DEPRECATED_OPENCL_2_0_APIS")
endif()
