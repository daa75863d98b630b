// clEnqueueNativeKernel: runs on the device's worker threads, with a private copy of the
// argument block in which the memory objects' addresses are patched.
#include "rt_common.h"

#include <atomic>
#include <mutex>

using namespace rt_test;

namespace {

using NativeKernelTest = RuntimeTest;

struct Saxpy {
  float a;
  const float *x; // patched
  float *y;       // patched
  size_t n;
  std::thread::id *ran_on;
  const void *args_seen;
};
void CL_CALLBACK saxpy(void *p) {
  auto *s = static_cast<Saxpy *>(p);
  for (size_t i = 0; i < s->n; ++i)
    s->y[i] += s->a * s->x[i];
  *s->ran_on = std::this_thread::get_id();
  s->args_seen = p;
}

TEST_F(NativeKernelTest, PatchesMemObjectsAndRunsOnDeviceThread) {
  const size_t n = 1000;
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  cl_mem bx = make_buffer(n * sizeof(float), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, x.data());
  cl_mem by = make_buffer(n * sizeof(float), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, y.data());
  std::thread::id ran_on;
  Saxpy args{2.0f, nullptr, nullptr, n, &ran_on, nullptr};
  cl_mem mems[] = {bx, by};
  const void *locs[] = {&args.x, &args.y};
  cl_event ev;
  CL_OK(clEnqueueNativeKernel(queue, saxpy, &args, sizeof(args), 2, mems, locs, 0, nullptr, &ev));
  // The runtime copied the arguments: changing them now has no effect.
  args.a = 100.0f;
  CL_OK(clWaitForEvents(1, &ev));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_NATIVE_KERNEL), event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  EXPECT_EQ(nullptr, args.x) << "the application's argument block is left alone";
  EXPECT_NE(std::this_thread::get_id(), ran_on);
  std::vector<float> got(n);
  CL_OK(clEnqueueReadBuffer(queue, by, CL_TRUE, 0, n * sizeof(float), got.data(), 0, nullptr, nullptr));
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(1.0f + 2.0f * static_cast<float>(i), got[i]) << i;
  clReleaseEvent(ev);
  clReleaseMemObject(bx);
  clReleaseMemObject(by);
}

std::atomic<int> g_calls{0};
void CL_CALLBACK no_args(void *p) {
  EXPECT_EQ(nullptr, p);
  g_calls++;
}

TEST_F(NativeKernelTest, NoArguments) {
  g_calls = 0;
  CL_OK(clEnqueueNativeKernel(queue, no_args, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, nullptr));
  CL_OK(clFinish(queue));
  EXPECT_EQ(1, g_calls.load());
}

TEST_F(NativeKernelTest, Errors) {
  cl_mem m = make_buffer(64);
  struct {
    void *p;
  } args{nullptr};
  const void *loc[] = {&args.p};
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, nullptr, &args, sizeof(args), 0, nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, no_args, nullptr, 8, 0, nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, no_args, &args, 0, 0, nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, no_args, &args, sizeof(args), 1, nullptr, loc, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, no_args, &args, sizeof(args), 1, &m, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueNativeKernel(queue, no_args, &args, sizeof(args), 0, &m, loc, 0, nullptr, nullptr));
  cl_mem bad = wrong<cl_mem>(queue);
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueNativeKernel(queue, no_args, &args, sizeof(args), 1, &bad, loc, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueNativeKernel(wrong<cl_command_queue>(m), no_args, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT_WAIT_LIST, clEnqueueNativeKernel(queue, no_args, nullptr, 0, 0, nullptr, nullptr, 1, nullptr, nullptr));
  clReleaseMemObject(m);
}

struct Sub {
  int *data;
  int value;
};
void CL_CALLBACK store_value(void *p) {
  auto *s = static_cast<Sub *>(p);
  s->data[0] = s->value;
}

TEST_F(NativeKernelTest, SubBufferAddressIsPatched) {
  const cl_uint align = device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  cl_mem parent = make_buffer(4 * align);
  int zero = 0;
  CL_OK(clEnqueueFillBuffer(queue, parent, &zero, sizeof(zero), 0, 4 * align, 0, nullptr, nullptr));
  cl_buffer_region r{2 * align, align};
  cl_int err;
  cl_mem sub = clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  Sub args{nullptr, 4242};
  const void *loc[] = {&args.data};
  CL_OK(clEnqueueNativeKernel(queue, store_value, &args, sizeof(args), 1, &sub, loc, 0, nullptr, nullptr));
  int got = 0;
  CL_OK(clEnqueueReadBuffer(queue, parent, CL_TRUE, 2 * align, sizeof(int), &got, 0, nullptr, nullptr));
  EXPECT_EQ(4242, got);
  CL_OK(clEnqueueReadBuffer(queue, parent, CL_TRUE, 0, sizeof(int), &got, 0, nullptr, nullptr));
  EXPECT_EQ(0, got);
  clReleaseMemObject(sub);
  clReleaseMemObject(parent);
}

} // namespace
