#include "kann/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kann::io {

manycl::Result<std::vector<uint8_t>> read_file(const std::string &path) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return manycl::make_error("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes;
  bool ok = std::fseek(f, 0, SEEK_END) == 0;
  const long size = ok ? std::ftell(f) : -1;
  ok = ok && size >= 0 && std::fseek(f, 0, SEEK_SET) == 0;
  if (ok) {
    bytes.resize(static_cast<size_t>(size));
    ok = std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size();
  }
  // Not a regular file (a pipe, /dev/stdin): read it in blocks.
  if (!ok && size < 0) {
    std::clearerr(f);
    bytes.clear();
    uint8_t block[1 << 16];
    size_t got;
    while ((got = std::fread(block, 1, sizeof block, f)) > 0)
      bytes.insert(bytes.end(), block, block + got);
    ok = !std::ferror(f);
  }
  std::fclose(f);
  if (!ok)
    return manycl::make_error("cannot read '" + path + "'");
  return bytes;
}

} // namespace kann::io
