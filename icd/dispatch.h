#pragma once

#include <string_view>

#include <CL/cl_icd.h>

namespace manycl::icd {

const cl_icd_dispatch &dispatch_table();
// Extension functions (cl_khr_icd and ManyCL's vendor functions), or nullptr.
void *extension_function(std::string_view name);
// Any entry point by name: core, unsupported-but-present, or extension.
void *any_function(std::string_view name);

} // namespace manycl::icd
