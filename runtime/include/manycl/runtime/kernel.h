// Kernel objects and NDRange execution over the clusters of a (sub-)device.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <CL/cl.h>

#include "manycl/compiler/compiler.h"
#include "manycl/runtime/memory.h"
#include "manycl/runtime/program.h"

namespace manycl::rt {

class Queue;

class Kernel : public Object<Kernel, _cl_kernel, Kind::Kernel> {
public:
  static Result<Kernel *> create(Program *program, const std::string &name);
  ~Kernel();

  Program *program() const { return program_.get(); }
  Context *context() const { return program_->context(); }
  const compiler::KernelInfo &info() const { return info_; }

  cl_int set_arg(cl_uint index, size_t size, const void *value);
  Kernel *clone() const;

  cl_int kernel_info(cl_kernel_info param, size_t size, void *value, size_t *size_ret);
  cl_int arg_info(cl_uint index, cl_kernel_arg_info param, size_t size, void *value,
                  size_t *size_ret);
  cl_int work_group_info(Device *device, cl_kernel_work_group_info param, size_t size, void *value,
                         size_t *size_ret);

  // clEnqueueNDRangeKernel after the handle checks: validates the range against the device
  // and the arguments, snapshots them, and enqueues the launch.
  cl_int enqueue(Queue *queue, cl_uint work_dim, const size_t *offset, const size_t *global,
                 const size_t *local, const std::vector<class Event *> &waits, Event *&out);

private:
  Kernel() = default;
  struct Arg {
    bool set = false;
    compiler::ArgValue value;
    WeakMemory memory; // the application's buffer, not kept alive by the argument
  };

  Ref<Program> program_;
  compiler::KernelInfo info_;
  struct PerDevice {
    std::shared_ptr<compiler::Program> program; // keeps the JIT code alive
    const compiler::Kernel *kernel = nullptr;
    std::shared_ptr<class KbinExecutable> kbin; // kann programs: the validated kbin
  };
  std::map<const Device *, PerDevice> per_device_;
  std::string command_name_; // "ndrange <name>": the device command's name
  // Whether its launches are known to be short, which lets them run on the enqueuing thread
  // (kernel.cpp: short-run credit, 0 before the first launch). Shared with launches in flight.
  std::shared_ptr<std::atomic<int>> short_run_credit_ = std::make_shared<std::atomic<int>>(0);
  mutable std::mutex mutex_;
  std::vector<Arg> args_;
};

} // namespace manycl::rt
