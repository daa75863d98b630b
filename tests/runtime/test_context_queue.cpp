// Contexts and command queues: properties, devices, callbacks, reference counts, queue
// ordering, profiling, flush/finish.
#include "rt_common.h"

#include <atomic>
#include <mutex>

using namespace rt_test;

namespace {

using ContextTest = RuntimeTest;

TEST_F(ContextTest, InfoAndProperties) {
  cl_uint n = 0;
  CL_OK(clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr));
  EXPECT_EQ(1u, n);
  size_t size = 0;
  CL_OK(clGetContextInfo(context, CL_CONTEXT_DEVICES, 0, nullptr, &size));
  ASSERT_EQ(sizeof(cl_device_id), size);
  cl_device_id d = nullptr;
  CL_OK(clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof(d), &d, nullptr));
  EXPECT_EQ(device, d);
  CL_OK(clGetContextInfo(context, CL_CONTEXT_PROPERTIES, 0, nullptr, &size));
  ASSERT_EQ(3 * sizeof(cl_context_properties), size);
  cl_context_properties props[3];
  CL_OK(clGetContextInfo(context, CL_CONTEXT_PROPERTIES, size, props, nullptr));
  EXPECT_EQ(CL_CONTEXT_PLATFORM, props[0]);
  EXPECT_EQ(reinterpret_cast<cl_context_properties>(platform), props[1]);
  EXPECT_EQ(0, props[2]);
  cl_uint refs = 0;
  CL_OK(clGetContextInfo(context, CL_CONTEXT_REFERENCE_COUNT, sizeof(refs), &refs, nullptr));
  EXPECT_EQ(1u, refs);
  EXPECT_EQ(CL_INVALID_VALUE, clGetContextInfo(context, CL_CONTEXT_DEVICES, 1, &d, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetContextInfo(context, 0x7fff, sizeof(n), &n, nullptr));
  EXPECT_EQ(CL_INVALID_CONTEXT, clGetContextInfo(wrong<cl_context>(queue), CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr));
}

TEST_F(ContextTest, NullPropertiesAndDuplicateDevices) {
  cl_int err;
  cl_device_id two[] = {device, device};
  cl_context c = clCreateContext(nullptr, 2, two, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  size_t size = 99;
  CL_OK(clGetContextInfo(c, CL_CONTEXT_PROPERTIES, 0, nullptr, &size));
  EXPECT_EQ(0u, size);
  cl_uint n = 0;
  CL_OK(clGetContextInfo(c, CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr));
  EXPECT_GE(n, 1u);
  CL_OK(clReleaseContext(c));
}

TEST_F(ContextTest, CreateErrors) {
  cl_int err = CL_SUCCESS;
  EXPECT_EQ(nullptr, clCreateContext(nullptr, 0, &device, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateContext(nullptr, 1, &device, nullptr, &err, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err); // user_data without pfn_notify
  cl_context_properties bad_name[] = {0x7fff, 1, 0};
  EXPECT_EQ(nullptr, clCreateContext(bad_name, 1, &device, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_PROPERTY, err);
  cl_context_properties twice[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform),
                                   CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
  EXPECT_EQ(nullptr, clCreateContext(twice, 1, &device, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_PROPERTY, err);
  cl_context_properties bad_platform[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device), 0};
  EXPECT_EQ(nullptr, clCreateContext(bad_platform, 1, &device, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_PLATFORM, err);
  cl_device_id bad[] = {device, wrong<cl_device_id>(context)};
  EXPECT_EQ(nullptr, clCreateContext(nullptr, 2, bad, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_DEVICE, err);
  cl_context_properties sync[] = {CL_CONTEXT_INTEROP_USER_SYNC, CL_TRUE, 0};
  cl_context c = clCreateContext(sync, 1, &device, nullptr, nullptr, &err);
  EXPECT_EQ(CL_SUCCESS, err);
  if (c)
    clReleaseContext(c);
}

TEST_F(ContextTest, CreateFromType) {
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
  cl_context c = clCreateContextFromType(props, CL_DEVICE_TYPE_ACCELERATOR, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_uint n = 0;
  CL_OK(clGetContextInfo(c, CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr));
  EXPECT_EQ(manycl_devices(platform).size(), n);
  CL_OK(clReleaseContext(c));
  c = clCreateContextFromType(props, CL_DEVICE_TYPE_DEFAULT, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  CL_OK(clReleaseContext(c));
  EXPECT_EQ(nullptr, clCreateContextFromType(props, CL_DEVICE_TYPE_GPU, nullptr, nullptr, &err));
  EXPECT_EQ(CL_DEVICE_NOT_FOUND, err);
  EXPECT_EQ(nullptr, clCreateContextFromType(props, cl_device_type(1) << 40, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_DEVICE_TYPE, err);
  EXPECT_EQ(nullptr, clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, nullptr, &err, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
}

std::mutex g_order_mutex;
std::vector<int> g_order;
void CL_CALLBACK record_context_destroyed(cl_context, void *data) {
  std::lock_guard lock(g_order_mutex);
  g_order.push_back(static_cast<int>(reinterpret_cast<intptr_t>(data)));
}
void CL_CALLBACK context_notify(const char *, const void *, size_t, void *) {}

TEST_F(ContextTest, RefcountAndDestructorCallbacks) {
  cl_int err;
  int notify_data = 0;
  cl_context c = clCreateContext(nullptr, 1, &device, context_notify, &notify_data, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  g_order.clear();
  cl_int cb = clSetContextDestructorCallback(c, record_context_destroyed, reinterpret_cast<void *>(1));
  if (cb == CL_INVALID_OPERATION) {
    clReleaseContext(c);
    GTEST_SKIP() << "loader without clSetContextDestructorCallback";
  }
  CL_OK(cb);
  CL_OK(clSetContextDestructorCallback(c, record_context_destroyed, reinterpret_cast<void *>(2)));
  EXPECT_EQ(CL_INVALID_VALUE, clSetContextDestructorCallback(c, nullptr, nullptr));
  CL_OK(clRetainContext(c));
  cl_uint refs = 0;
  CL_OK(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof(refs), &refs, nullptr));
  EXPECT_EQ(2u, refs);
  // A buffer keeps the context alive after the application lets go of it.
  cl_mem buf = clCreateBuffer(c, CL_MEM_READ_WRITE, 64, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  CL_OK(clReleaseContext(c));
  CL_OK(clReleaseContext(c));
  EXPECT_TRUE(g_order.empty());
  cl_context owner = nullptr;
  CL_OK(clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof(owner), &owner, nullptr));
  EXPECT_EQ(c, owner);
  CL_OK(clReleaseMemObject(buf));
  ASSERT_EQ(2u, g_order.size());
  EXPECT_EQ(2, g_order[0]); // reverse order of registration
  EXPECT_EQ(1, g_order[1]);
  EXPECT_EQ(CL_INVALID_CONTEXT, clRetainContext(wrong<cl_context>(device)));
  EXPECT_EQ(CL_INVALID_CONTEXT, clReleaseContext(wrong<cl_context>(device)));
}

using QueueTest = RuntimeTest;

TEST_F(QueueTest, InfoAndErrors) {
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_context c = nullptr;
  cl_device_id d = nullptr;
  cl_uint refs = 0;
  cl_command_queue_properties props = 0;
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(c), &c, nullptr));
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(d), &d, nullptr));
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(refs), &refs, nullptr));
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, nullptr));
  EXPECT_EQ(context, c);
  EXPECT_EQ(device, d);
  EXPECT_EQ(1u, refs);
  EXPECT_EQ(static_cast<cl_command_queue_properties>(CL_QUEUE_PROFILING_ENABLE), props);
  EXPECT_EQ(CL_INVALID_VALUE, clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, 1, &c, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetCommandQueueInfo(q, 0x7fff, sizeof(c), &c, nullptr));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clGetCommandQueueInfo(wrong<cl_command_queue>(context), CL_QUEUE_CONTEXT,
                                                            sizeof(c), &c, nullptr));
  CL_OK(clRetainCommandQueue(q));
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(refs), &refs, nullptr));
  EXPECT_EQ(2u, refs);
  CL_OK(clReleaseCommandQueue(q));
  CL_OK(clReleaseCommandQueue(q));

  EXPECT_EQ(nullptr, clCreateCommandQueue(context, device, cl_command_queue_properties(1) << 20, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateCommandQueue(wrong<cl_context>(device), device, 0, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  EXPECT_EQ(nullptr, clCreateCommandQueue(context, wrong<cl_device_id>(context), 0, &err));
  EXPECT_EQ(CL_INVALID_DEVICE, err);
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clRetainCommandQueue(wrong<cl_command_queue>(context)));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clReleaseCommandQueue(wrong<cl_command_queue>(context)));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clFlush(wrong<cl_command_queue>(context)));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clFinish(wrong<cl_command_queue>(context)));
}

TEST_F(QueueTest, DeviceNotInContext) {
  // A sub-device is a valid device that is not in this context.
  cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
  if (device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES) < 2)
    GTEST_SKIP();
  cl_device_id sub = nullptr;
  cl_uint n = 0;
  CL_OK(clCreateSubDevices(device, props, 1, &sub, &n));
  cl_int err;
  EXPECT_EQ(nullptr, clCreateCommandQueue(context, sub, 0, &err));
  EXPECT_EQ(CL_INVALID_DEVICE, err);
  CL_OK(clReleaseDevice(sub));
}

TEST_F(QueueTest, WithProperties) {
  cl_int err;
  cl_queue_properties props[] = {CL_QUEUE_PROPERTIES,
                                 CL_QUEUE_PROFILING_ENABLE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue q = clCreateCommandQueueWithProperties(context, device, props, &err);
  if (err == CL_INVALID_OPERATION)
    GTEST_SKIP() << "loader without clCreateCommandQueueWithProperties";
  ASSERT_EQ(CL_SUCCESS, err);
  cl_command_queue_properties p = 0;
  CL_OK(clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(p), &p, nullptr));
  EXPECT_EQ(static_cast<cl_command_queue_properties>(props[1]), p);
  CL_OK(clReleaseCommandQueue(q));
  cl_queue_properties bad[] = {0x7fff, 0, 0};
  EXPECT_EQ(nullptr, clCreateCommandQueueWithProperties(context, device, bad, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
}

struct OrderLog {
  std::mutex mutex;
  std::vector<int> order;
};
struct OrderArgs {
  OrderLog *log;
  int id;
  int sleep_ms;
};
void CL_CALLBACK log_order(void *p) {
  auto *a = static_cast<OrderArgs *>(p);
  if (a->sleep_ms)
    std::this_thread::sleep_for(std::chrono::milliseconds(a->sleep_ms));
  std::lock_guard lock(a->log->mutex);
  a->log->order.push_back(a->id);
}

TEST_F(QueueTest, InOrderExecution) {
  OrderLog log;
  for (int i = 0; i < 8; ++i) {
    // Early commands take longer: an in-order queue must still run them in order.
    OrderArgs args{&log, i, i < 3 ? 20 - 5 * i : 0};
    CL_OK(clEnqueueNativeKernel(queue, log_order, &args, sizeof(args), 0, nullptr, nullptr, 0, nullptr, nullptr));
  }
  CL_OK(clFinish(queue));
  std::vector<int> want = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(want, log.order);
}

TEST_F(QueueTest, OutOfOrderWithBarrier) {
  cl_command_queue q = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  OrderLog log;
  cl_event gate = user_event();
  OrderArgs first{&log, 1, 0}, second{&log, 2, 0}, after{&log, 3, 0};
  // `first` waits for the gate; `second` has no dependency and may overtake it.
  CL_OK(clEnqueueNativeKernel(q, log_order, &first, sizeof(first), 0, nullptr, nullptr, 1, &gate, nullptr));
  cl_event second_done;
  CL_OK(clEnqueueNativeKernel(q, log_order, &second, sizeof(second), 0, nullptr, nullptr, 0, nullptr, &second_done));
  CL_OK(clWaitForEvents(1, &second_done));
  {
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(std::vector<int>{2}, log.order);
  }
  // Everything after a barrier waits for everything before it.
  CL_OK(clEnqueueBarrierWithWaitList(q, 0, nullptr, nullptr));
  cl_event after_done;
  CL_OK(clEnqueueNativeKernel(q, log_order, &after, sizeof(after), 0, nullptr, nullptr, 0, nullptr, &after_done));
  sleep_ms(20);
  EXPECT_NE(CL_COMPLETE, event_status(after_done));
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clFinish(q));
  std::vector<int> want = {2, 1, 3};
  EXPECT_EQ(want, log.order);
  clReleaseEvent(second_done);
  clReleaseEvent(after_done);
  clReleaseEvent(gate);
  clReleaseCommandQueue(q);
}

void CL_CALLBACK sleep_10ms(void *) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); }

TEST_F(QueueTest, ProfilingTimestampsOrdered) {
  cl_command_queue q = make_queue(CL_QUEUE_PROFILING_ENABLE);
  cl_event a, b;
  CL_OK(clEnqueueNativeKernel(q, sleep_10ms, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, &a));
  CL_OK(clEnqueueNativeKernel(q, sleep_10ms, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, &b));
  // A command that has not completed has no profiling information yet.
  cl_int err;
  cl_event gate = clCreateUserEvent(context, &err);
  cl_event gated;
  CL_OK(clEnqueueMarkerWithWaitList(q, 1, &gate, &gated));
  cl_ulong early;
  EXPECT_EQ(CL_PROFILING_INFO_NOT_AVAILABLE, clGetEventProfilingInfo(gated, CL_PROFILING_COMMAND_END, sizeof(early), &early, nullptr));
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clFinish(q));
  CL_OK(clGetEventProfilingInfo(gated, CL_PROFILING_COMMAND_END, sizeof(early), &early, nullptr));
  clReleaseEvent(gated);
  clReleaseEvent(gate);
  cl_ulong t[2][4];
  const cl_profiling_info params[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                       CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
  cl_event evs[2] = {a, b};
  for (int e = 0; e < 2; ++e)
    for (int i = 0; i < 4; ++i) {
      size_t ret = 0;
      CL_OK(clGetEventProfilingInfo(evs[e], params[i], sizeof(cl_ulong), &t[e][i], &ret));
      EXPECT_EQ(sizeof(cl_ulong), ret);
    }
  for (int e = 0; e < 2; ++e) {
    EXPECT_LE(t[e][0], t[e][1]);
    EXPECT_LE(t[e][1], t[e][2]);
    EXPECT_LE(t[e][2], t[e][3]);
    EXPECT_GE(t[e][3] - t[e][2], 9'000'000u); // the kernel slept 10 ms
  }
  EXPECT_LE(t[0][3], t[1][2]); // in order: b starts after a ends
  cl_ulong v;
  EXPECT_EQ(CL_INVALID_VALUE, clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, 4, &v, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetEventProfilingInfo(a, 0x7fff, sizeof(v), &v, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT, clGetEventProfilingInfo(wrong<cl_event>(q), CL_PROFILING_COMMAND_START, sizeof(v), &v, nullptr));
  clReleaseEvent(a);
  clReleaseEvent(b);
  clReleaseCommandQueue(q);

  // Without CL_QUEUE_PROFILING_ENABLE, and for user events: not available.
  cl_event c;
  CL_OK(clEnqueueMarkerWithWaitList(queue, 0, nullptr, &c));
  CL_OK(clWaitForEvents(1, &c));
  EXPECT_EQ(CL_PROFILING_INFO_NOT_AVAILABLE, clGetEventProfilingInfo(c, CL_PROFILING_COMMAND_START, sizeof(v), &v, nullptr));
  clReleaseEvent(c);
  cl_event u = user_event();
  CL_OK(clSetUserEventStatus(u, CL_COMPLETE));
  EXPECT_EQ(CL_PROFILING_INFO_NOT_AVAILABLE, clGetEventProfilingInfo(u, CL_PROFILING_COMMAND_START, sizeof(v), &v, nullptr));
  clReleaseEvent(u);
}

std::atomic<int> g_done_count{0};
void CL_CALLBACK count_done(void *) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  g_done_count++;
}

TEST_F(QueueTest, FlushAndFinish) {
  g_done_count = 0;
  for (int i = 0; i < 10; ++i)
    CL_OK(clEnqueueNativeKernel(queue, count_done, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, nullptr));
  CL_OK(clFlush(queue));
  CL_OK(clFinish(queue));
  EXPECT_EQ(10, g_done_count.load());
  // Flush alone makes progress: commands complete without clFinish.
  cl_event e;
  CL_OK(clEnqueueNativeKernel(queue, count_done, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, &e));
  CL_OK(clFlush(queue));
  EXPECT_TRUE(eventually([&] { return event_status(e) == CL_COMPLETE; }));
  clReleaseEvent(e);
}

TEST_F(QueueTest, ReleasedQueueFinishesItsCommands) {
  g_done_count = 0;
  cl_command_queue q = make_queue(0);
  cl_event last;
  for (int i = 0; i < 5; ++i)
    CL_OK(clEnqueueNativeKernel(q, count_done, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, i == 4 ? &last : nullptr));
  CL_OK(clReleaseCommandQueue(q));
  // The event keeps answering (and names the queue) after the application released it.
  CL_OK(clWaitForEvents(1, &last));
  EXPECT_EQ(5, g_done_count.load());
  cl_command_queue owner = nullptr;
  CL_OK(clGetEventInfo(last, CL_EVENT_COMMAND_QUEUE, sizeof(owner), &owner, nullptr));
  EXPECT_EQ(q, owner);
  clReleaseEvent(last);
}

} // namespace
