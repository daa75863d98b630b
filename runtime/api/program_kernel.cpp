// Program and kernel entry points.
#include <cstring>
#include <string>

#include "common.h"
#include "manycl/runtime/kernel.h"
#include "manycl/runtime/program.h"

namespace manycl::api {

using rt::Kernel;
using rt::Program;

namespace {
cl_int collect_devices(Context *c, cl_uint num_devices, const cl_device_id *device_list, std::vector<Device *> &out) {
  if ((num_devices == 0) != (device_list == nullptr))
    return CL_INVALID_VALUE;
  if (!device_list) {
    out = c->devices();
    return CL_SUCCESS;
  }
  for (cl_uint i = 0; i < num_devices; ++i) {
    Device *d = Device::from(device_list[i]);
    if (!d || !c->has_device(d))
      return CL_INVALID_DEVICE;
    out.push_back(d);
  }
  return CL_SUCCESS;
}

// A failed build's reason is in its build log; the API log shows where and how it starts.
void note_build_log(const Program *p, cl_int result) {
  if (result == CL_SUCCESS || !log::enabled(log::kApi))
    return;
  for (Device *d : p->devices()) {
    Program::Build build = p->build_for(d);
    if (build.status != CL_BUILD_ERROR || build.log.empty())
      continue;
    std::string first = build.log.substr(0, build.log.find('\n'));
    if (first.size() > 200)
      first = first.substr(0, 200) + "...";
    log::set_api_detail("see CL_PROGRAM_BUILD_LOG of " + d->config().name + ": " + first);
    return;
  }
}
} // namespace

cl_program CL_API_CALL clCreateProgramWithSource(cl_context context, cl_uint count, const char **strings,
                                                 const size_t *lengths, cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  if (count == 0 || !strings)
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  std::string source;
  for (cl_uint i = 0; i < count; ++i) {
    if (!strings[i])
      return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
    if (lengths && lengths[i])
      source.append(strings[i], lengths[i]);
    else
      source.append(strings[i]);
  }
  auto *program = new Program(c, c->devices(), std::move(source));
  set_error(errcode_ret, CL_SUCCESS);
  return program->handle();
}

cl_program CL_API_CALL clCreateProgramWithBinary(cl_context context, cl_uint num_devices,
                                                 const cl_device_id *device_list, const size_t *lengths,
                                                 const unsigned char **binaries, cl_int *binary_status,
                                                 cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  if (num_devices == 0 || !device_list || !lengths || !binaries)
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  std::vector<Device *> devices;
  if (cl_int e = collect_devices(c, num_devices, device_list, devices); e != CL_SUCCESS)
    return fail<_cl_program>(errcode_ret, e);
  std::vector<std::vector<uint8_t>> copies;
  bool missing = false;
  for (cl_uint i = 0; i < num_devices; ++i) {
    if (lengths[i] == 0 || binaries[i] == nullptr) {
      missing = true;
      if (binary_status)
        binary_status[i] = CL_INVALID_VALUE;
      copies.emplace_back();
      continue;
    }
    copies.emplace_back(binaries[i], binaries[i] + lengths[i]);
  }
  if (missing)
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  std::vector<cl_int> status;
  auto program = Program::from_binaries(c, devices, std::move(copies), status);
  if (binary_status)
    for (cl_uint i = 0; i < num_devices; ++i)
      binary_status[i] = status[i];
  if (!program)
    return fail<_cl_program>(errcode_ret, program.error());
  set_error(errcode_ret, CL_SUCCESS);
  return program.value()->handle();
}

cl_program CL_API_CALL clCreateProgramWithBuiltInKernels(cl_context context, cl_uint num_devices,
                                                         const cl_device_id *device_list, const char *kernel_names,
                                                         cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  std::vector<Device *> devices;
  if (!device_list || num_devices == 0 || !kernel_names)
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  if (cl_int e = collect_devices(c, num_devices, device_list, devices); e != CL_SUCCESS)
    return fail<_cl_program>(errcode_ret, e);
  return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE); // no built-in kernels
}

cl_program CL_API_CALL clCreateProgramWithIL(cl_context context, const void *il, size_t length, cl_int *errcode_ret) {
  if (!Context::from(context))
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  if (!il || length == 0)
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  return fail<_cl_program>(errcode_ret, CL_INVALID_OPERATION); // no IL is supported
}

cl_int CL_API_CALL clRetainProgram(cl_program program) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  p->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseProgram(cl_program program) {
  Program *p = Program::from(program);
  if (!p || !p->release_api())
    return CL_INVALID_PROGRAM;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clBuildProgram(cl_program program, cl_uint num_devices, const cl_device_id *device_list,
                                  const char *options, void(CL_CALLBACK *pfn_notify)(cl_program, void *),
                                  void *user_data) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  if (!pfn_notify && user_data)
    return CL_INVALID_VALUE;
  std::vector<Device *> devices;
  if (cl_int e = collect_devices(p->context(), num_devices, device_list, devices); e != CL_SUCCESS)
    return e;
  for (Device *d : devices)
    if (!p->has_device(d))
      return CL_INVALID_DEVICE;
  if (p->has_kernels())
    return CL_INVALID_OPERATION;
  cl_int result = p->build(device_list ? devices : std::vector<Device *>{}, options ? options : "");
  note_build_log(p, result);
  // The build is synchronous; the callback still reports its end, as the specification allows.
  if (pfn_notify)
    pfn_notify(program, user_data);
  return result;
}

cl_int CL_API_CALL clCompileProgram(cl_program program, cl_uint num_devices, const cl_device_id *device_list,
                                    const char *options, cl_uint num_input_headers, const cl_program *input_headers,
                                    const char **header_include_names,
                                    void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  if ((num_input_headers == 0) != (input_headers == nullptr) ||
      (num_input_headers && !header_include_names) || (!pfn_notify && user_data))
    return CL_INVALID_VALUE;
  std::vector<Device *> devices;
  if (cl_int e = collect_devices(p->context(), num_devices, device_list, devices); e != CL_SUCCESS)
    return e;
  if (!p->from_source())
    return CL_INVALID_OPERATION;
  if (p->has_kernels())
    return CL_INVALID_OPERATION;
  std::vector<compiler::HeaderSource> headers;
  for (cl_uint i = 0; i < num_input_headers; ++i) {
    Program *h = Program::from(input_headers[i]);
    if (!h || !header_include_names[i])
      return CL_INVALID_VALUE;
    headers.push_back({header_include_names[i], h->source()});
  }
  cl_int result = p->compile(device_list ? devices : std::vector<Device *>{}, options ? options : "", headers);
  note_build_log(p, result);
  if (pfn_notify)
    pfn_notify(program, user_data);
  return result;
}

cl_program CL_API_CALL clLinkProgram(cl_context context, cl_uint num_devices, const cl_device_id *device_list,
                                     const char *options, cl_uint num_input_programs,
                                     const cl_program *input_programs,
                                     void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data,
                                     cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  if (num_input_programs == 0 || !input_programs || (!pfn_notify && user_data))
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  std::vector<Device *> devices;
  if (cl_int e = collect_devices(c, num_devices, device_list, devices); e != CL_SUCCESS)
    return fail<_cl_program>(errcode_ret, e);
  std::vector<Program *> inputs;
  for (cl_uint i = 0; i < num_input_programs; ++i) {
    Program *input = Program::from(input_programs[i]);
    if (!input || input->context() != c)
      return fail<_cl_program>(errcode_ret, CL_INVALID_PROGRAM);
    inputs.push_back(input);
  }
  cl_int result = CL_SUCCESS;
  Program *linked = Program::link(c, devices, options ? options : "", inputs, result);
  set_error(errcode_ret, result);
  if (linked && pfn_notify)
    pfn_notify(linked->handle(), user_data);
  return linked ? linked->handle() : nullptr;
}

cl_int CL_API_CALL clUnloadCompiler() { return CL_SUCCESS; }

cl_int CL_API_CALL clUnloadPlatformCompiler(cl_platform_id platform) {
  return Platform::from(platform) ? CL_SUCCESS : CL_INVALID_PLATFORM;
}

cl_int CL_API_CALL clGetProgramInfo(cl_program program, cl_program_info param_name, size_t size, void *value,
                                    size_t *size_ret) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  return p->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetProgramBuildInfo(cl_program program, cl_device_id device, cl_program_build_info param_name,
                                         size_t size, void *value, size_t *size_ret) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  Device *d = Device::from(device);
  if (!d || !p->has_device(d))
    return CL_INVALID_DEVICE;
  return p->build_info(d, param_name, size, value, size_ret);
}

cl_int CL_API_CALL clSetProgramReleaseCallback(cl_program program, void(CL_CALLBACK *pfn_notify)(cl_program, void *),
                                               void *user_data) {
  (void)pfn_notify, (void)user_data;
  return Program::from(program) ? CL_INVALID_OPERATION : CL_INVALID_PROGRAM; // deprecated in 3.0
}

cl_int CL_API_CALL clSetProgramSpecializationConstant(cl_program program, cl_uint spec_id, size_t spec_size,
                                                      const void *spec_value) {
  (void)spec_id, (void)spec_size, (void)spec_value;
  return Program::from(program) ? CL_INVALID_OPERATION : CL_INVALID_PROGRAM; // no IL programs
}

cl_kernel CL_API_CALL clCreateKernel(cl_program program, const char *kernel_name, cl_int *errcode_ret) {
  Program *p = Program::from(program);
  if (!p)
    return fail<_cl_kernel>(errcode_ret, CL_INVALID_PROGRAM);
  if (!kernel_name)
    return fail<_cl_kernel>(errcode_ret, CL_INVALID_VALUE);
  auto kernel = Kernel::create(p, kernel_name);
  if (!kernel)
    return fail<_cl_kernel>(errcode_ret, kernel.error());
  set_error(errcode_ret, CL_SUCCESS);
  return kernel.value()->handle();
}

cl_int CL_API_CALL clCreateKernelsInProgram(cl_program program, cl_uint num_kernels, cl_kernel *kernels,
                                            cl_uint *num_kernels_ret) {
  Program *p = Program::from(program);
  if (!p)
    return CL_INVALID_PROGRAM;
  if (!p->has_executable())
    return CL_INVALID_PROGRAM_EXECUTABLE;
  auto infos = p->kernel_infos();
  if (kernels && num_kernels < infos.size())
    return CL_INVALID_VALUE;
  if (kernels) {
    for (size_t i = 0; i < infos.size(); ++i) {
      auto kernel = Kernel::create(p, infos[i].name);
      if (!kernel) {
        for (size_t j = 0; j < i; ++j)
          Kernel::from(kernels[j])->release_api();
        return error(kernel.error());
      }
      kernels[i] = kernel.value()->handle();
    }
  }
  if (num_kernels_ret)
    *num_kernels_ret = static_cast<cl_uint>(infos.size());
  return CL_SUCCESS;
}

cl_kernel CL_API_CALL clCloneKernel(cl_kernel source_kernel, cl_int *errcode_ret) {
  Kernel *k = Kernel::from(source_kernel);
  if (!k)
    return fail<_cl_kernel>(errcode_ret, CL_INVALID_KERNEL);
  set_error(errcode_ret, CL_SUCCESS);
  return k->clone()->handle();
}

cl_int CL_API_CALL clRetainKernel(cl_kernel kernel) {
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  k->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseKernel(cl_kernel kernel) {
  Kernel *k = Kernel::from(kernel);
  if (!k || !k->release_api())
    return CL_INVALID_KERNEL;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clSetKernelArg(cl_kernel kernel, cl_uint index, size_t size, const void *value) {
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  return k->set_arg(index, size, value);
}

cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel kernel, cl_uint, const void *) {
  return Kernel::from(kernel) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL; // no SVM
}

cl_int CL_API_CALL clSetKernelExecInfo(cl_kernel kernel, cl_kernel_exec_info, size_t, const void *) {
  return Kernel::from(kernel) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL; // no SVM
}

cl_int CL_API_CALL clGetKernelInfo(cl_kernel kernel, cl_kernel_info param_name, size_t size, void *value,
                                   size_t *size_ret) {
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  return k->kernel_info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetKernelArgInfo(cl_kernel kernel, cl_uint index, cl_kernel_arg_info param_name, size_t size,
                                      void *value, size_t *size_ret) {
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  return k->arg_info(index, param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
                                            cl_kernel_work_group_info param_name, size_t size, void *value,
                                            size_t *size_ret) {
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  Device *d = device ? Device::from(device) : nullptr;
  if (!device) {
    if (k->program()->devices().size() != 1)
      return CL_INVALID_DEVICE;
    d = k->program()->devices().front();
  }
  if (!d || !k->context()->has_device(d))
    return CL_INVALID_DEVICE;
  return k->work_group_info(d, param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetKernelSubGroupInfo(cl_kernel kernel, cl_device_id, cl_kernel_sub_group_info, size_t,
                                           const void *, size_t, void *, size_t *) {
  return Kernel::from(kernel) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL; // no sub-groups
}
cl_int CL_API_CALL clGetKernelSubGroupInfoKHR(cl_kernel kernel, cl_device_id, cl_kernel_sub_group_info, size_t,
                                              const void *, size_t, void *, size_t *) {
  return Kernel::from(kernel) ? CL_INVALID_OPERATION : CL_INVALID_KERNEL;
}

cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint work_dim,
                                          const size_t *global_offset, const size_t *global_size,
                                          const size_t *local_size, cl_uint num_events, const cl_event *wait_list,
                                          cl_event *event) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  Kernel *k = Kernel::from(kernel);
  if (!k)
    return CL_INVALID_KERNEL;
  if (k->context() != q->context())
    return CL_INVALID_CONTEXT;
  std::vector<Event *> waits;
  if (cl_int e = collect_wait_list(q->context(), num_events, wait_list, waits); e != CL_SUCCESS)
    return e;
  Event *ev = nullptr;
  if (cl_int e = k->enqueue(q, work_dim, global_offset, global_size, local_size, waits, ev); e != CL_SUCCESS)
    return e;
  return_event(ev, event);
  return CL_SUCCESS;
}

cl_int CL_API_CALL clEnqueueTask(cl_command_queue queue, cl_kernel kernel, cl_uint num_events,
                                 const cl_event *wait_list, cl_event *event) {
  size_t one = 1;
  return manycl::api::clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &one, &one, num_events, wait_list, event);
}

} // namespace manycl::api
