#include "kann/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace kann::npy {

using manycl::make_error;

manycl::Result<Array> read(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return make_error("cannot open '" + path + "'");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return make_error(path + ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t n;
    f.read(reinterpret_cast<char *>(&n), 2);
    header_len = n;
  } else {
    f.read(reinterpret_cast<char *>(&header_len), 4);
  }
  if (!f || header_len > (1u << 20))
    return make_error(path + ": bad .npy header");
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  if (header.find("'<f4'") == std::string::npos)
    return make_error(path + ": only little-endian float32 arrays are supported");
  if (header.find("'fortran_order': True") != std::string::npos)
    return make_error(path + ": Fortran-ordered arrays are not supported");
  auto open = header.find("'shape': (");
  auto close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos)
    return make_error(path + ": no shape in the .npy header");
  Array a;
  std::stringstream dims(header.substr(open + 10, close - open - 10));
  std::string item;
  int64_t count = 1;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(" ") == std::string::npos)
      continue;
    int64_t d = std::stoll(item);
    if (d < 0 || d > (1ll << 30))
      return make_error(path + ": bad dimension");
    a.shape.push_back(d);
    count *= d;
    if (count > (1ll << 30))
      return make_error(path + ": array too large");
  }
  a.data.resize(size_t(count));
  if (!f.read(reinterpret_cast<char *>(a.data.data()), std::streamsize(count * 4)))
    return make_error(path + ": truncated data");
  return a;
}

manycl::Result<void> write(const std::string &path, const Array &a) {
  std::string shape = "(";
  for (int64_t d : a.shape)
    shape += std::to_string(d) + ",";
  if (a.shape.size() > 1)
    shape.pop_back();
  shape += ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f)
    return make_error("cannot write '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t n = uint16_t(header.size());
  f.write(reinterpret_cast<const char *>(&n), 2);
  f << header;
  f.write(reinterpret_cast<const char *>(a.data.data()), std::streamsize(a.data.size() * 4));
  if (!f)
    return make_error("writing '" + path + "' failed");
  return {};
}

} // namespace kann::npy
