// Program objects: OpenCL C source or ManyCL binaries, built per device by the compiler in
// kernels/compiler and JIT-loaded for execution.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <CL/cl.h>

#include "manycl/compiler/compiler.h"
#include "manycl/runtime/context.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

// The compiler's view of a device (part of every cache key and binary).
compiler::DeviceDesc device_desc(const Device &device);

class Program : public Object<Program, _cl_program, Kind::Program> {
public:
  struct Build {
    cl_build_status status = CL_BUILD_NONE;
    std::string options;
    std::string log;
    compiler::BinaryKind kind = compiler::BinaryKind::None;
    std::vector<uint8_t> binary;
    std::vector<compiler::KernelInfo> kernels;
    std::shared_ptr<compiler::Program> loaded; // executables only
    bool is_kbin = false;                      // a kann program binary
    std::shared_ptr<class KbinExecutable> kbin; // once built for the device
  };

  Program(Context *context, std::vector<Device *> devices, std::string source);
  ~Program();

  Context *context() const { return context_.get(); }
  const std::vector<Device *> &devices() const { return devices_; }
  bool has_device(const Device *d) const;
  bool from_source() const { return from_source_; }
  const std::string &source() const { return source_; }

  // clCreateProgramWithBinary: validates and (for executables) loads each binary.
  static Result<Program *> from_binaries(Context *context, std::vector<Device *> devices,
                                         std::vector<std::vector<uint8_t>> binaries,
                                         std::vector<cl_int> &binary_status);

  // clBuildProgram / clCompileProgram on `devices` (all of the program's when empty).
  cl_int build(const std::vector<Device *> &devices, const std::string &options);
  cl_int compile(const std::vector<Device *> &devices, const std::string &options,
                 const std::vector<compiler::HeaderSource> &headers);
  // clLinkProgram: a new program from compiled objects/libraries; `result` gets the status.
  // On CL_LINK_PROGRAM_FAILURE the program is returned anyway (its build log explains).
  static Program *link(Context *context, std::vector<Device *> devices, const std::string &options,
                       const std::vector<Program *> &inputs, cl_int &result);

  // A snapshot of the build for `device` (status, binary, loaded program).
  Build build_for(const Device *device) const;
  bool has_executable() const;
  // Kernel names of the first device with an executable.
  std::vector<compiler::KernelInfo> kernel_infos() const;

  void kernel_created() { kernels_attached_.fetch_add(1); }
  void kernel_destroyed() { kernels_attached_.fetch_sub(1); }
  bool has_kernels() const { return kernels_attached_.load() > 0; }

  cl_int info(cl_program_info param, size_t size, void *value, size_t *size_ret);
  cl_int build_info(Device *device, cl_program_build_info param, size_t size, void *value, size_t *size_ret);

private:
  // Builds for one device; `built_with_desc` maps a compiler description to the device whose
  // build of this call serves every device with that description.
  cl_int build_one(Device &device, const std::string &options,
                   std::map<std::string, const Device *> &built_with_desc);
  cl_int build_kbin(Device &device, Build &build);

  Ref<Context> context_;
  std::vector<Device *> devices_;
  std::string source_;
  bool from_source_ = false;
  mutable std::mutex mutex_;
  std::map<const Device *, Build> builds_;
  std::atomic<int> kernels_attached_{0};
};

// The one conversion from the compiler's ErrorCode to an OpenCL code; `build_failure` is the
// answer for a failure with no code of its own (the build/compile/link failure, or
// CL_OUT_OF_RESOURCES for a launch).
cl_int compiler_error_to_cl(compiler::ErrorCode code, cl_int build_failure);

} // namespace manycl::rt
