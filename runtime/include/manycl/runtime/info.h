// The one helper that writes every clGet*Info answer: size checks, param_value_size_ret.
#pragma once

#include <CL/cl.h>

#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace manycl::rt {

class InfoWriter {
public:
  InfoWriter(size_t size, void *value, size_t *size_ret)
      : size_(size), value_(value), size_ret_(size_ret) {}

  cl_int bytes(const void *data, size_t n) {
    if (value_) {
      if (size_ < n)
        return CL_INVALID_VALUE;
      if (n)
        std::memcpy(value_, data, n);
    }
    if (size_ret_)
      *size_ret_ = n;
    return CL_SUCCESS;
  }
  template <class T>
    requires std::is_trivially_copyable_v<T>
  cl_int scalar(const T &v) {
    return bytes(&v, sizeof(T));
  }
  cl_int string(std::string_view s) {
    std::string copy(s);
    return bytes(copy.c_str(), copy.size() + 1);
  }
  template <class T> cl_int array(const std::vector<T> &v) {
    return bytes(v.data(), v.size() * sizeof(T));
  }
  template <class T> cl_int array(const T *data, size_t count) { return bytes(data, count * sizeof(T)); }

private:
  size_t size_;
  void *value_;
  size_t *size_ret_;
};

} // namespace manycl::rt
