// A small OpenCL application for test_api_log.cpp: it makes a few calls that must fail, one
// after a success, through the ICD loader, so that MANYCL_LOG=api has something to say. It
// prints each returned code on stdout ("clCreateBuffer=-61"); ManyCL writes the log on stderr.
#include <CL/cl.h>
#include <CL/cl_gl.h>

#include "../common/manycl_platform.h"

#include <cstdio>

namespace {

cl_platform_id manycl_platform() { return manycl_test::find_manycl_platform(); }

void report(const char *what, cl_int code) { std::printf("%s=%d\n", what, code); }

} // namespace

int main() {
  cl_platform_id platform = manycl_platform();
  if (!platform) {
    std::printf("no ManyCL platform\n");
    return 1;
  }
  cl_device_id device;
  cl_int err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr);
  report("clGetDeviceIDs", err);
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  report("clCreateContext", err);

  // Object-returning calls: a reason from the API layer, with and without errcode_ret.
  clCreateBuffer(context, CL_MEM_READ_WRITE, 0, nullptr, &err);
  report("clCreateBuffer", err);
  cl_mem none = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, nullptr, nullptr);
  report("clCreateBuffer(flags)", none ? CL_SUCCESS : CL_INVALID_VALUE);
  cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, 4096, nullptr, &err);
  report("clCreateBuffer(ok)", err);
  cl_buffer_region region{3, 64};
  clCreateSubBuffer(buffer, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  report("clCreateSubBuffer", err);

  // cl_int-returning calls: a bare check (the loader answers NULL handles itself, so an
  // unknown query on a valid one), and a reason from the object model.
  report("clGetContextInfo", clGetContextInfo(context, 0x7fff, 0, nullptr, nullptr));
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  int word = 0;
  report("clEnqueueUnmapMemObject",
         clEnqueueUnmapMemObject(queue, buffer, &word, 0, nullptr, nullptr));

  // A program's object-model error (no such kernel) reaches the log too.
  const char *source = "__kernel void k(__global int *p) { p[0] = 1; }";
  cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  report("clBuildProgram", clBuildProgram(program, 1, &device, nullptr, nullptr, nullptr));
  clCreateKernel(program, "no_such_kernel", &err);
  report("clCreateKernel", err);

  // A build that fails: the log line points at the build log and quotes how it starts.
  const char *broken = "__kernel void k(__global int *p) { p[0] = undeclared_name; }";
  cl_program bad = clCreateProgramWithSource(context, 1, &broken, nullptr, &err);
  report("clBuildProgram(broken)", clBuildProgram(bad, 1, &device, nullptr, nullptr, nullptr));
  clReleaseProgram(bad);

  // A feature ManyCL does not have (GL sharing): answered by a generic function.
  clCreateFromGLBuffer(context, CL_MEM_READ_WRITE, 1, &err);
  report("clCreateFromGLBuffer", err);

  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseMemObject(buffer);
  clReleaseContext(context);
  return 0;
}
