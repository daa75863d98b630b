// Program objects. Until the OpenCL C compiler is wired in (issue 3), a program holds its
// source; building reports CL_COMPILER_NOT_AVAILABLE, as CL_DEVICE_COMPILER_AVAILABLE says.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <CL/cl.h>

#include "manycl/runtime/context.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

class Program : public Object<Program, _cl_program, Kind::Program> {
public:
  Program(Context *context, std::vector<Device *> devices, std::string source);
  ~Program();

  Context *context() const { return context_.get(); }
  const std::vector<Device *> &devices() const { return devices_; }
  bool has_device(const Device *d) const;
  const std::string &source() const { return source_; }

  void record_build(cl_build_status status, std::string options, std::string log);

  cl_int info(cl_program_info param, size_t size, void *value, size_t *size_ret);
  cl_int build_info(Device *device, cl_program_build_info param, size_t size, void *value, size_t *size_ret);

private:
  Ref<Context> context_;
  std::vector<Device *> devices_;
  std::string source_;
  std::mutex mutex_;
  cl_build_status status_ = CL_BUILD_NONE;
  std::string options_;
  std::string log_;
};

} // namespace manycl::rt
