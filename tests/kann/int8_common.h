// Helpers shared by the INT8 tests: quantized initializers for OnnxBuilder models, the ONNX
// QuantizeLinear formula, running a compiled program and .npy files for the tool.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kann/compile.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "manycl/kbin_runner.h"
#include "onnx_builder.h"

namespace kann::test {

// An int8 / uint8 / int32 initializer.
inline void int_initializer(OnnxBuilder &b, const std::string &name, int onnx_type,
                            std::vector<int64_t> shape, const std::vector<int32_t> &values) {
  auto &t = *b.model().mutable_graph()->add_initializer();
  t.set_name(name);
  t.set_data_type(onnx_type);
  for (int64_t d : shape)
    t.add_dims(d);
  for (int32_t v : values)
    t.add_int32_data(v);
}

// ONNX QuantizeLinear in FP32: saturate(round_half_even(v / scale) + zero_point).
inline int32_t quantize(float v, float scale, int32_t zero_point, bool is_signed) {
  const float q = std::nearbyint(v / scale) + float(zero_point);
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  return int32_t(std::min(hi, std::max(lo, q)));
}

// The quantized value a DequantizeLinear output came from (exact for |q - zp| <= 255).
inline int32_t requantized(float y, float scale, int32_t zero_point) {
  return int32_t(std::nearbyint(y / scale)) + zero_point;
}

inline std::vector<uint8_t> float_bytes(const std::vector<float> &v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<float> bytes_floats(const std::vector<uint8_t> &b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// Import + optimize + compile (fp32 options unless given) and run on the simulated device:
// the first output as floats. Fails the test on any error.
inline std::vector<float> compile_and_run(const std::string &onnx, const std::vector<float> &input,
                                          CompileOptions options, int *int8_nodes = nullptr) {
  auto graph = import_onnx_bytes(onnx);
  EXPECT_TRUE(graph.ok()) << graph.error().message;
  if (!graph.ok())
    return {};
  EXPECT_TRUE(passes::optimize(graph.value()).ok());
  if (int8_nodes) {
    *int8_nodes = 0;
    for (const auto &n : graph.value().nodes)
      *int8_nodes += !n.dead && n.ints.count("int8");
  }
  auto out = compile_graph(graph.value(), options);
  EXPECT_TRUE(out.ok()) << out.error().message;
  if (!out.ok())
    return {};
  manycl::device::Device device(options.device);
  const auto &prog = out.value().program;
  std::vector<std::vector<uint8_t>> args(prog.arg_count);
  args[0] = float_bytes(input);
  auto run = manycl::interp::run_kbin(device, prog, args);
  EXPECT_TRUE(run.ok()) << run.error().message;
  if (!run.ok())
    return {};
  for (const auto &t : prog.tensors)
    if (t.role == KBIN_ROLE_OUTPUT)
      return bytes_floats(run.value().outputs[t.arg_index]);
  return {};
}

// float32 .npy (C order).
inline void write_npy(const std::string &path, const std::vector<int64_t> &shape,
                      const std::vector<float> &data) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = uint16_t(header.size());
  f.write(reinterpret_cast<const char *>(&n), 2);
  f << header;
  f.write(reinterpret_cast<const char *>(data.data()), std::streamsize(data.size() * 4));
}

// The float32 payload of a .npy file written by `kann simulate` (count values at the end).
inline std::vector<float> read_npy_tail(const std::string &path, size_t count) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  if (bytes.size() < count * 4 + 64)
    return {};
  std::vector<float> v(count);
  std::memcpy(v.data(), bytes.data() + bytes.size() - count * 4, count * 4);
  return v;
}

} // namespace kann::test
