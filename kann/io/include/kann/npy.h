// Minimal .npy (version 1/2) reading and writing of little-endian float32 arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "manycl/result.h"

namespace kann::npy {

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

manycl::Result<Array> read(const std::string &path);
manycl::Result<void> write(const std::string &path, const Array &array);

} // namespace kann::npy
