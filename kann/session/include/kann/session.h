// kann::Session: runs a compiled network (a kbin) on an OpenCL device or sub-device, built
// only on the public OpenCL API (it works through the ICD loader like any application).
//
//   auto session = kann::Session::load(context, device, kbin_bytes);
//   session->write_input(queue, 0, data);              // or use input_buffer(i) directly
//   cl_event done = session->run(queue);                // asynchronous
//   session->read_output(queue, 0, out, done);          // blocking read after `done`
//
// One Session owns one set of input/output buffers: run several Sessions (one per
// sub-device, or several on one device) for concurrent inferences.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "manycl/result.h"

// What libkann.so exports; the library is built with hidden visibility, so template
// instances and helpers of its implementation never become part of its ABI.
#define KANN_API __attribute__((visibility("default")))

namespace kann {

struct KANN_API TensorInfo {
  std::string name;
  bool is_input = true;
  uint32_t arg_index = 0;     // kernel argument of its buffer
  std::vector<uint64_t> dims; // ONNX order
  uint32_t dtype = 1;         // mcl_dtype: 1 f32, 2 f16, 3 s8, 4 u8
  uint64_t byte_size = 0;
  float scale = 1.0f;         // quantized tensors: real = scale * (q - zero_point)
  int32_t zero_point = 0;
  uint64_t elements() const;
};

struct RunStats {
  double host_seconds = 0;    // enqueue to completion, host wall time
  double modeled_seconds = 0; // the device's modeled time for the network command
  uint64_t modeled_cycles = 0;
  uint64_t ddr_bytes_read = 0;
  uint64_t ddr_bytes_written = 0;
};

class KANN_API Session {
public:
  // Creates the program from the kbin, builds it for `device` (the build log explains a
  // rejection: wrong cluster count, SPM too small, corrupt binary) and allocates buffers.
  static manycl::Result<std::unique_ptr<Session>> load(cl_context context, cl_device_id device,
                                                       const std::vector<uint8_t> &kbin);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  const std::vector<TensorInfo> &inputs() const { return inputs_; }
  const std::vector<TensorInfo> &outputs() const { return outputs_; }
  unsigned cluster_count() const { return cluster_count_; }
  cl_mem input_buffer(size_t i) const;
  cl_mem output_buffer(size_t i) const;
  cl_kernel kernel() const { return kernel_; }

  // Copies float data into input i, converting to the tensor's element type (f16, int8 with
  // its scale and zero point). Non-blocking; `data` is copied before the call returns.
  manycl::Result<void> write_input(cl_command_queue queue, size_t i, const std::vector<float> &data);
  // Enqueues the network; returns its event (the caller releases it).
  manycl::Result<cl_event> run(cl_command_queue queue, const std::vector<cl_event> &wait = {});
  // Reads output i as floats (dequantized), blocking, after `after` if given.
  manycl::Result<std::vector<float>> read_output(cl_command_queue queue, size_t i, cl_event after = nullptr);
  // Statistics of a completed run event (modeled time via the ManyCL vendor extension).
  RunStats stats(cl_event run_event) const;

private:
  Session() = default;
  cl_context context_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
  std::vector<cl_mem> buffers_; // by kernel argument index
  std::vector<TensorInfo> inputs_, outputs_;
  unsigned cluster_count_ = 1;
};

} // namespace kann
