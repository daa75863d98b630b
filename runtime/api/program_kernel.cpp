// Program and kernel entry points. Until the compiler is wired in no program can be built, so
// no kernel object can exist and every kernel handle is invalid.
#include <cstring>

#include "common.h"
#include "manycl/runtime/program.h"

namespace manycl::api {

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
  bool missing = false;
  for (cl_uint i = 0; i < num_devices; ++i) {
    bool empty = lengths[i] == 0 || binaries[i] == nullptr;
    missing |= empty;
    // No binary format is accepted yet: every binary is rejected.
    if (binary_status)
      binary_status[i] = empty ? CL_INVALID_VALUE : CL_INVALID_BINARY;
  }
  return fail<_cl_program>(errcode_ret, missing ? CL_INVALID_VALUE : CL_INVALID_BINARY);
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
  p->record_build(CL_BUILD_ERROR, options ? options : "", "ManyCL: no OpenCL C compiler is available yet\n");
  if (pfn_notify)
    pfn_notify(program, user_data);
  return CL_COMPILER_NOT_AVAILABLE;
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
  p->record_build(CL_BUILD_ERROR, options ? options : "", "ManyCL: no OpenCL C compiler is available yet\n");
  return CL_COMPILER_NOT_AVAILABLE;
}

cl_program CL_API_CALL clLinkProgram(cl_context context, cl_uint num_devices, const cl_device_id *device_list,
                                     const char *options, cl_uint num_input_programs,
                                     const cl_program *input_programs,
                                     void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data,
                                     cl_int *errcode_ret) {
  Context *c = Context::from(context);
  (void)options;
  if (!c)
    return fail<_cl_program>(errcode_ret, CL_INVALID_CONTEXT);
  if (num_input_programs == 0 || !input_programs || (!pfn_notify && user_data))
    return fail<_cl_program>(errcode_ret, CL_INVALID_VALUE);
  std::vector<Device *> devices;
  if (cl_int e = collect_devices(c, num_devices, device_list, devices); e != CL_SUCCESS)
    return fail<_cl_program>(errcode_ret, e);
  for (cl_uint i = 0; i < num_input_programs; ++i)
    if (!Program::from(input_programs[i]))
      return fail<_cl_program>(errcode_ret, CL_INVALID_PROGRAM);
  return fail<_cl_program>(errcode_ret, CL_LINKER_NOT_AVAILABLE);
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
  if (!Program::from(program))
    return fail<_cl_kernel>(errcode_ret, CL_INVALID_PROGRAM);
  if (!kernel_name)
    return fail<_cl_kernel>(errcode_ret, CL_INVALID_VALUE);
  return fail<_cl_kernel>(errcode_ret, CL_INVALID_PROGRAM_EXECUTABLE);
}

cl_int CL_API_CALL clCreateKernelsInProgram(cl_program program, cl_uint num_kernels, cl_kernel *kernels,
                                            cl_uint *num_kernels_ret) {
  (void)num_kernels, (void)kernels, (void)num_kernels_ret;
  return Program::from(program) ? CL_INVALID_PROGRAM_EXECUTABLE : CL_INVALID_PROGRAM;
}

cl_kernel CL_API_CALL clCloneKernel(cl_kernel source_kernel, cl_int *errcode_ret) {
  (void)source_kernel;
  return fail<_cl_kernel>(errcode_ret, CL_INVALID_KERNEL);
}

// No kernel object can exist yet, so every kernel handle is invalid.
cl_int CL_API_CALL clRetainKernel(cl_kernel) { return CL_INVALID_KERNEL; }
cl_int CL_API_CALL clReleaseKernel(cl_kernel) { return CL_INVALID_KERNEL; }
cl_int CL_API_CALL clSetKernelArg(cl_kernel, cl_uint, size_t, const void *) { return CL_INVALID_KERNEL; }
cl_int CL_API_CALL clSetKernelArgSVMPointer(cl_kernel, cl_uint, const void *) { return CL_INVALID_KERNEL; }
cl_int CL_API_CALL clSetKernelExecInfo(cl_kernel, cl_kernel_exec_info, size_t, const void *) {
  return CL_INVALID_KERNEL;
}
cl_int CL_API_CALL clGetKernelInfo(cl_kernel, cl_kernel_info, size_t, void *, size_t *) { return CL_INVALID_KERNEL; }
cl_int CL_API_CALL clGetKernelArgInfo(cl_kernel, cl_uint, cl_kernel_arg_info, size_t, void *, size_t *) {
  return CL_INVALID_KERNEL;
}
cl_int CL_API_CALL clGetKernelWorkGroupInfo(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *,
                                            size_t *) {
  return CL_INVALID_KERNEL;
}
cl_int CL_API_CALL clGetKernelSubGroupInfo(cl_kernel, cl_device_id, cl_kernel_sub_group_info, size_t, const void *,
                                           size_t, void *, size_t *) {
  return CL_INVALID_KERNEL;
}
cl_int CL_API_CALL clGetKernelSubGroupInfoKHR(cl_kernel, cl_device_id, cl_kernel_sub_group_info, size_t,
                                              const void *, size_t, void *, size_t *) {
  return CL_INVALID_KERNEL;
}

cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                          const size_t *, cl_uint, const cl_event *, cl_event *) {
  return Queue::from(queue) ? CL_INVALID_KERNEL : CL_INVALID_COMMAND_QUEUE;
}

cl_int CL_API_CALL clEnqueueTask(cl_command_queue queue, cl_kernel, cl_uint, const cl_event *, cl_event *) {
  return Queue::from(queue) ? CL_INVALID_KERNEL : CL_INVALID_COMMAND_QUEUE;
}

} // namespace manycl::api
