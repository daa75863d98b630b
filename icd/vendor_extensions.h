#pragma once

#include <string_view>

namespace manycl::icd {
// ManyCL's vendor extension functions by name (each ends with the ICD suffix "MCL").
void *vendor_extension_function(std::string_view name);
} // namespace manycl::icd
