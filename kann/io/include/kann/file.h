// Whole-file reads of kann binaries and models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "manycl/result.h"

namespace kann::io {

// The bytes of `path`, read at once into a buffer of the file's size (a character iterator
// costs more than the checksum of a 100 MB binary), or an error naming the path.
manycl::Result<std::vector<uint8_t>> read_file(const std::string &path);

} // namespace kann::io
