#include "kann/session.h"

#include <CL/cl_ext_manycl.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "kann/format.h"

namespace kann {

namespace {

manycl::Error cl_error(const std::string &what, cl_int code) {
  return manycl::make_error(what + " failed (OpenCL error " + std::to_string(code) + ")", code);
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mantissa = x & 0x7fffff;
  int exponent = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mantissa ? 0x200 : 0));
  if (exponent >= 31)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (exponent <= 0) {
    if (exponent < -10)
      return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exponent);
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, x;
  if (exponent == 0) {
    if (mantissa == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while (!(mantissa & 0x400));
      x = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ff) << 13;
    }
  } else if (exponent == 31) {
    x = sign | 0x7f800000 | mantissa << 13;
  } else {
    x = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

size_t element_size(uint32_t dtype) { return dtype == 1 ? 4 : dtype == 2 ? 2 : 1; }

} // namespace

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims)
    n *= d;
  return n;
}

manycl::Result<std::unique_ptr<Session>> Session::load(cl_context context, cl_device_id device,
                                                       const std::vector<uint8_t> &kbin) {
  // The descriptors are read here for the host side only; the runtime validates the whole
  // binary against the device in clBuildProgram.
  auto parsed = kann::format::read_kbin(kbin.data(), kbin.size(), {}, kann::format::ReadParams::Skip);
  if (!parsed)
    return manycl::make_error("not a valid kann binary: " + parsed.error().message, CL_INVALID_BINARY);
  std::unique_ptr<Session> s(new Session());
  s->context_ = context;
  s->device_ = device;
  clRetainContext(context);
  s->cluster_count_ = parsed->cluster_count;
  for (const auto &t : parsed->tensors) {
    TensorInfo info{t.name, t.role == KBIN_ROLE_INPUT, t.arg_index, t.dims, t.dtype, t.byte_size, t.scale, t.zero_point};
    (info.is_input ? s->inputs_ : s->outputs_).push_back(info);
  }

  cl_int err;
  const unsigned char *binary = kbin.data();
  size_t length = kbin.size();
  cl_int binary_status;
  s->program_ = clCreateProgramWithBinary(context, 1, &device, &length, &binary, &binary_status, &err);
  if (err != CL_SUCCESS)
    return cl_error("clCreateProgramWithBinary", err);
  err = clBuildProgram(s->program_, 1, &device, "", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t size = 0;
    clGetProgramBuildInfo(s->program_, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(s->program_, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
      log.pop_back();
    return manycl::make_error("the device rejected the network: " + log, err);
  }
  s->kernel_ = clCreateKernel(s->program_, "kann_network", &err);
  if (err != CL_SUCCESS)
    return cl_error("clCreateKernel(kann_network)", err);
  s->buffers_.assign(parsed->arg_count, nullptr);
  for (const auto &t : parsed->tensors) {
    cl_mem buffer = clCreateBuffer(context, t.role == KBIN_ROLE_INPUT ? CL_MEM_READ_ONLY : CL_MEM_WRITE_ONLY,
                                   t.byte_size, nullptr, &err);
    if (err != CL_SUCCESS)
      return cl_error("clCreateBuffer for " + t.name, err);
    s->buffers_[t.arg_index] = buffer;
    err = clSetKernelArg(s->kernel_, t.arg_index, sizeof(cl_mem), &buffer);
    if (err != CL_SUCCESS)
      return cl_error("clSetKernelArg for " + t.name, err);
  }
  return s;
}

Session::~Session() {
  for (cl_mem b : buffers_)
    if (b)
      clReleaseMemObject(b);
  if (kernel_)
    clReleaseKernel(kernel_);
  if (program_)
    clReleaseProgram(program_);
  if (context_)
    clReleaseContext(context_);
}

cl_mem Session::input_buffer(size_t i) const { return buffers_[inputs_.at(i).arg_index]; }
cl_mem Session::output_buffer(size_t i) const { return buffers_[outputs_.at(i).arg_index]; }

manycl::Result<void> Session::write_input(cl_command_queue queue, size_t i, const std::vector<float> &data) {
  if (i >= inputs_.size())
    return manycl::make_error("no input " + std::to_string(i), CL_INVALID_VALUE);
  const TensorInfo &t = inputs_[i];
  if (data.size() != t.elements())
    return manycl::make_error("input '" + t.name + "' takes " + std::to_string(t.elements()) + " values, got " +
                                  std::to_string(data.size()),
                              CL_INVALID_VALUE);
  const size_t esize = element_size(t.dtype);
  if (t.dtype == 1 && data.size() * esize == t.byte_size) {
    // FP32: the values are the buffer's bytes (a blocking write reads them before returning).
    cl_int err = clEnqueueWriteBuffer(queue, buffers_[t.arg_index], CL_TRUE, 0, t.byte_size,
                                      data.data(), 0, nullptr, nullptr);
    if (err != CL_SUCCESS)
      return cl_error("clEnqueueWriteBuffer", err);
    return {};
  }
  std::vector<uint8_t> bytes(t.byte_size);
  const size_t count = std::min(data.size(), bytes.size() / std::max<size_t>(esize, 1));
  if (t.dtype == 1) {
    std::memcpy(bytes.data(), data.data(), count * 4);
  } else if (t.dtype == 2) {
    for (size_t k = 0; k < count; ++k) {
      uint16_t h = float_to_half(data[k]);
      std::memcpy(&bytes[k * 2], &h, 2);
    }
  } else {
    // Quantize as ONNX QuantizeLinear: round half to even, saturate.
    for (size_t k = 0; k < count; ++k) {
      float q = std::nearbyint(data[k] / t.scale) + static_cast<float>(t.zero_point);
      if (t.dtype == 3)
        bytes[k] = static_cast<uint8_t>(static_cast<int8_t>(std::fmax(-128.f, std::fmin(127.f, q))));
      else
        bytes[k] = static_cast<uint8_t>(std::fmax(0.f, std::fmin(255.f, q)));
    }
  }
  // A blocking write: the staging vector dies with this call.
  cl_int err = clEnqueueWriteBuffer(queue, buffers_[t.arg_index], CL_TRUE, 0, bytes.size(), bytes.data(), 0,
                                    nullptr, nullptr);
  if (err != CL_SUCCESS)
    return cl_error("clEnqueueWriteBuffer", err);
  return {};
}

manycl::Result<cl_event> Session::run(cl_command_queue queue, const std::vector<cl_event> &wait) {
  size_t global = cluster_count_, local = 1;
  cl_event event = nullptr;
  cl_int err = clEnqueueNDRangeKernel(queue, kernel_, 1, nullptr, &global, &local, static_cast<cl_uint>(wait.size()),
                                      wait.empty() ? nullptr : wait.data(), &event);
  if (err != CL_SUCCESS)
    return cl_error("clEnqueueNDRangeKernel(kann_network)", err);
  return event;
}

manycl::Result<std::vector<float>> Session::read_output(cl_command_queue queue, size_t i, cl_event after) {
  if (i >= outputs_.size())
    return manycl::make_error("no output " + std::to_string(i), CL_INVALID_VALUE);
  const TensorInfo &t = outputs_[i];
  if (t.dtype == 1 && t.elements() * 4 == t.byte_size) {
    // FP32: the buffer's bytes are the values.
    std::vector<float> values(t.elements());
    cl_int err =
        clEnqueueReadBuffer(queue, buffers_[t.arg_index], CL_TRUE, 0, t.byte_size, values.data(),
                            after ? 1 : 0, after ? &after : nullptr, nullptr);
    if (err != CL_SUCCESS)
      return cl_error("clEnqueueReadBuffer", err);
    return values;
  }
  std::vector<uint8_t> bytes(t.byte_size);
  cl_int err = clEnqueueReadBuffer(queue, buffers_[t.arg_index], CL_TRUE, 0, bytes.size(), bytes.data(), after ? 1 : 0,
                                   after ? &after : nullptr, nullptr);
  if (err != CL_SUCCESS)
    return cl_error("clEnqueueReadBuffer", err);
  std::vector<float> values(t.elements());
  size_t esize = element_size(t.dtype);
  for (size_t k = 0; k < values.size() && (k + 1) * esize <= bytes.size(); ++k) {
    if (t.dtype == 1) {
      std::memcpy(&values[k], &bytes[k * 4], 4);
    } else if (t.dtype == 2) {
      uint16_t h;
      std::memcpy(&h, &bytes[k * 2], 2);
      values[k] = half_to_float(h);
    } else if (t.dtype == 3) {
      values[k] = t.scale * static_cast<float>(static_cast<int8_t>(bytes[k]) - t.zero_point);
    } else {
      values[k] = t.scale * static_cast<float>(static_cast<int>(bytes[k]) - t.zero_point);
    }
  }
  return values;
}

RunStats Session::stats(cl_event event) const {
  RunStats stats;
  cl_ulong start = 0, end = 0;
  if (clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr) == CL_SUCCESS &&
      clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) == CL_SUCCESS)
    stats.host_seconds = static_cast<double>(end - start) * 1e-9;
  size_t size = 0;
  if (clGetEventInfo(event, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size) == CL_SUCCESS && size > 0) {
    std::string json(size, '\0');
    clGetEventInfo(event, CL_EVENT_COMMAND_STATS_MCL, size, json.data(), nullptr);
    while (!json.empty() && json.back() == '\0')
      json.pop_back();
    auto doc = nlohmann::json::parse(json, nullptr, false);
    auto number = [&](const char *key) -> double {
      return doc.is_object() && doc.contains(key) && doc[key].is_number() ? doc[key].get<double>() : 0.0;
    };
    stats.modeled_cycles = static_cast<uint64_t>(number("modeled_cycles"));
    stats.modeled_seconds = number("modeled_seconds");
    stats.ddr_bytes_read = static_cast<uint64_t>(number("ddr_bytes_read"));
    stats.ddr_bytes_written = static_cast<uint64_t>(number("ddr_bytes_written"));
  }
  return stats;
}

} // namespace kann
