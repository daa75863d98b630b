// The shape check of an input array against a network input: the same number of values in
// another shape ([64] for [1,1,8,8]) is almost always a mistake in the caller's
// preprocessing, so `kann run` and `kann simulate` refuse it and show both shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kann::cli {

template <class T> std::string shape_text(const std::vector<T> &dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

// The samples an array of `shape` holds for an input of `dims`: 1 when the shapes are equal;
// N when `stacking` and the array is N inputs stacked on the first axis (dims[0] * N rows,
// the other axes equal). 0 otherwise, with `error` saying expected and got.
inline uint64_t samples_of_shape(const std::vector<int64_t> &shape,
                                 const std::vector<uint64_t> &dims, bool stacking,
                                 std::string &error) {
  bool rest_equal = shape.size() == dims.size() && !dims.empty();
  for (size_t i = 1; rest_equal && i < dims.size(); ++i)
    rest_equal = shape[i] >= 0 && uint64_t(shape[i]) == dims[i];
  if (rest_equal && shape[0] >= 0 && uint64_t(shape[0]) == dims[0])
    return 1;
  if (stacking && rest_equal && dims[0] > 0 && shape[0] > 0 && uint64_t(shape[0]) % dims[0] == 0)
    return uint64_t(shape[0]) / dims[0];
  error = "shape " + shape_text(shape) + " does not match the input's shape " + shape_text(dims);
  if (stacking && !dims.empty()) {
    std::vector<std::string> stacked{
        "N" + (dims[0] == 1 ? std::string() : "*" + std::to_string(dims[0]))};
    for (size_t i = 1; i < dims.size(); ++i)
      stacked.push_back(std::to_string(dims[i]));
    std::string text;
    for (const auto &d : stacked)
      text += (text.empty() ? "" : ", ") + d;
    error += " (or (" + text + ") for N samples)";
  }
  return 0;
}

} // namespace kann::cli
