// Events: status transitions, clWaitForEvents, user events, callbacks, wait lists across
// queues, error propagation, markers and barriers.
#include "rt_common.h"

#include <atomic>
#include <mutex>

using namespace rt_test;

namespace {

using EventTest = RuntimeTest;

std::atomic<int> g_runs{0};
void CL_CALLBACK count_run(void *) { g_runs++; }
void CL_CALLBACK sleep_20ms(void *) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

struct CallbackLog {
  std::mutex mutex;
  std::vector<std::pair<int, cl_int>> calls; // (tag, status)
};
struct CallbackTag {
  CallbackLog *log;
  int tag;
};
void CL_CALLBACK log_callback(cl_event, cl_int status, void *data) {
  auto *t = static_cast<CallbackTag *>(data);
  std::lock_guard lock(t->log->mutex);
  t->log->calls.emplace_back(t->tag, status);
}

TEST_F(EventTest, CommandEventInfo) {
  cl_event e;
  CL_OK(clEnqueueNativeKernel(queue, sleep_20ms, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, &e));
  EXPECT_EQ(queue, event_info<cl_command_queue>(e, CL_EVENT_COMMAND_QUEUE));
  EXPECT_EQ(context, event_info<cl_context>(e, CL_EVENT_CONTEXT));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_NATIVE_KERNEL), event_info<cl_command_type>(e, CL_EVENT_COMMAND_TYPE));
  EXPECT_EQ(1u, event_info<cl_uint>(e, CL_EVENT_REFERENCE_COUNT));
  cl_int s = event_status(e);
  EXPECT_TRUE(s == CL_QUEUED || s == CL_SUBMITTED || s == CL_RUNNING || s == CL_COMPLETE) << s;
  CL_OK(clWaitForEvents(1, &e));
  EXPECT_EQ(CL_COMPLETE, event_status(e));
  CL_OK(clRetainEvent(e));
  EXPECT_EQ(2u, event_info<cl_uint>(e, CL_EVENT_REFERENCE_COUNT));
  CL_OK(clReleaseEvent(e));
  cl_int v;
  EXPECT_EQ(CL_INVALID_VALUE, clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, 1, &v, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetEventInfo(e, 0x7fff, sizeof(v), &v, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT, clGetEventInfo(wrong<cl_event>(queue), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(v), &v, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT, clRetainEvent(wrong<cl_event>(queue)));
  EXPECT_EQ(CL_INVALID_EVENT, clReleaseEvent(wrong<cl_event>(queue)));
  CL_OK(clReleaseEvent(e));
}

TEST_F(EventTest, StatusTransitionsAndCallbacks) {
  cl_event gate = user_event();
  cl_event e;
  CL_OK(clEnqueueNativeKernel(queue, sleep_20ms, nullptr, 0, 0, nullptr, nullptr, 1, &gate, &e));
  sleep_ms(10);
  cl_int s = event_status(e);
  EXPECT_TRUE(s == CL_QUEUED || s == CL_SUBMITTED) << "a gated command must not run: " << s;
  CallbackLog log;
  CallbackTag submitted{&log, CL_SUBMITTED}, running{&log, CL_RUNNING}, complete{&log, CL_COMPLETE};
  CL_OK(clSetEventCallback(e, CL_SUBMITTED, log_callback, &submitted));
  CL_OK(clSetEventCallback(e, CL_RUNNING, log_callback, &running));
  CL_OK(clSetEventCallback(e, CL_COMPLETE, log_callback, &complete));
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  EXPECT_TRUE(eventually([&] { return event_status(e) == CL_RUNNING || event_status(e) == CL_COMPLETE; }));
  CL_OK(clWaitForEvents(1, &e));
  // Callbacks may run on another thread after the status change is visible.
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(log.mutex);
    return log.calls.size() == 3;
  }));
  {
    std::lock_guard lock(log.mutex);
    for (auto &[tag, status] : log.calls)
      EXPECT_EQ(tag, status) << "a callback receives the status it was registered for";
  }
  // A callback registered after the fact is called at once.
  CallbackTag late{&log, CL_COMPLETE};
  CL_OK(clSetEventCallback(e, CL_COMPLETE, log_callback, &late));
  {
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(4u, log.calls.size());
  }
  EXPECT_EQ(CL_INVALID_VALUE, clSetEventCallback(e, CL_QUEUED, log_callback, &late));
  EXPECT_EQ(CL_INVALID_VALUE, clSetEventCallback(e, CL_COMPLETE, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT, clSetEventCallback(wrong<cl_event>(queue), CL_COMPLETE, log_callback, &late));
  clReleaseEvent(e);
  clReleaseEvent(gate);
}

TEST_F(EventTest, WaitForEventsErrors) {
  EXPECT_EQ(CL_INVALID_VALUE, clWaitForEvents(0, nullptr));
  cl_event e = user_event();
  EXPECT_EQ(CL_INVALID_VALUE, clWaitForEvents(1, nullptr));
  cl_event bad[] = {e, wrong<cl_event>(queue)};
  EXPECT_EQ(CL_INVALID_EVENT, clWaitForEvents(2, bad));
  cl_int err;
  cl_context other = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_event foreign = clCreateUserEvent(other, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_event mixed[] = {e, foreign};
  EXPECT_EQ(CL_INVALID_CONTEXT, clWaitForEvents(2, mixed));
  CL_OK(clSetUserEventStatus(e, CL_COMPLETE));
  CL_OK(clSetUserEventStatus(foreign, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &e));
  clReleaseEvent(foreign);
  clReleaseEvent(e);
  clReleaseContext(other);
}

TEST_F(EventTest, UserEvents) {
  cl_int err;
  EXPECT_EQ(nullptr, clCreateUserEvent(wrong<cl_context>(queue), &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  cl_event u = user_event();
  EXPECT_EQ(CL_SUBMITTED, event_status(u));
  EXPECT_EQ(nullptr, event_info<cl_command_queue>(u, CL_EVENT_COMMAND_QUEUE));
  EXPECT_EQ(context, event_info<cl_context>(u, CL_EVENT_CONTEXT));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_USER), event_info<cl_command_type>(u, CL_EVENT_COMMAND_TYPE));
  EXPECT_EQ(CL_INVALID_VALUE, clSetUserEventStatus(u, CL_RUNNING));
  EXPECT_EQ(CL_INVALID_VALUE, clSetUserEventStatus(u, CL_SUBMITTED));
  // A waiter on another thread is released by the status change.
  std::atomic<cl_int> waited{1};
  std::thread waiter([&] { waited = clWaitForEvents(1, &u); });
  sleep_ms(10);
  EXPECT_EQ(1, waited.load());
  CL_OK(clSetUserEventStatus(u, CL_COMPLETE));
  waiter.join();
  EXPECT_EQ(CL_SUCCESS, waited.load());
  EXPECT_EQ(CL_COMPLETE, event_status(u));
  EXPECT_EQ(CL_INVALID_OPERATION, clSetUserEventStatus(u, CL_COMPLETE));
  cl_event cmd;
  CL_OK(clEnqueueMarkerWithWaitList(queue, 0, nullptr, &cmd));
  EXPECT_EQ(CL_INVALID_EVENT, clSetUserEventStatus(cmd, CL_COMPLETE));
  EXPECT_EQ(CL_INVALID_EVENT, clSetUserEventStatus(wrong<cl_event>(queue), CL_COMPLETE));
  clReleaseEvent(cmd);
  clReleaseEvent(u);
}

TEST_F(EventTest, ErrorPropagatesToDependents) {
  g_runs = 0;
  cl_command_queue ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  cl_event gate = user_event();
  cl_event a, b, c, unrelated;
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &gate, &a));
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &a, &b));
  // A dependent in another queue of the same context.
  CL_OK(clEnqueueMarkerWithWaitList(queue, 1, &b, &c));
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 0, nullptr, &unrelated));
  CallbackLog log;
  CallbackTag tag{&log, 0};
  CL_OK(clSetEventCallback(b, CL_COMPLETE, log_callback, &tag));
  CL_OK(clWaitForEvents(1, &unrelated));
  CL_OK(clSetUserEventStatus(gate, -42));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, clWaitForEvents(1, &a));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, clWaitForEvents(1, &c));
  EXPECT_EQ(-42, event_status(gate));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, event_status(a));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, event_status(b));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, event_status(c));
  EXPECT_EQ(1, g_runs.load()) << "failed dependencies must not run";
  EXPECT_TRUE(eventually([&] {
    std::lock_guard lock(log.mutex);
    return log.calls.size() == 1;
  }));
  {
    std::lock_guard lock(log.mutex);
    EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, log.calls[0].second);
  }
  // A blocking command whose wait list failed reports it.
  cl_mem buf = make_buffer(16);
  char host[16];
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, clEnqueueReadBuffer(ooo, buf, CL_TRUE, 0, 16, host, 1, &gate, nullptr));
  // Enqueueing after the failure still fails the dependent, not the queue.
  cl_event d;
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &a, &d));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, clWaitForEvents(1, &d));
  CL_OK(clFinish(ooo));
  EXPECT_EQ(1, g_runs.load());
  for (cl_event e : {a, b, c, d, unrelated, gate})
    clReleaseEvent(e);
  clReleaseMemObject(buf);
  clReleaseCommandQueue(ooo);
}

TEST_F(EventTest, WaitListAcrossQueues) {
  cl_command_queue other = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  cl_mem buf = make_buffer(sizeof(int));
  cl_event gate = user_event();
  int value = 1234;
  cl_event written;
  CL_OK(clEnqueueWriteBuffer(queue, buf, CL_FALSE, 0, sizeof(int), &value, 1, &gate, &written));
  int seen = 0;
  cl_event read;
  CL_OK(clEnqueueReadBuffer(other, buf, CL_FALSE, 0, sizeof(int), &seen, 1, &written, &read));
  sleep_ms(10);
  EXPECT_NE(CL_COMPLETE, event_status(read));
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &read));
  EXPECT_EQ(1234, seen);
  // Wait-list argument checks.
  EXPECT_EQ(CL_INVALID_EVENT_WAIT_LIST, clEnqueueMarkerWithWaitList(queue, 1, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_EVENT_WAIT_LIST, clEnqueueMarkerWithWaitList(queue, 0, &read, nullptr));
  cl_event bad = wrong<cl_event>(buf);
  EXPECT_EQ(CL_INVALID_EVENT_WAIT_LIST, clEnqueueMarkerWithWaitList(queue, 1, &bad, nullptr));
  cl_int err;
  cl_context c2 = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_event foreign = clCreateUserEvent(c2, &err);
  EXPECT_EQ(CL_INVALID_CONTEXT, clEnqueueMarkerWithWaitList(queue, 1, &foreign, nullptr));
  EXPECT_EQ(CL_INVALID_CONTEXT, clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, sizeof(int), &seen, 1, &foreign, nullptr));
  clSetUserEventStatus(foreign, CL_COMPLETE);
  clReleaseEvent(foreign);
  clReleaseContext(c2);
  for (cl_event e : {gate, written, read})
    clReleaseEvent(e);
  clReleaseMemObject(buf);
  clReleaseCommandQueue(other);
}

TEST_F(EventTest, MarkersAndBarriersWithWaitLists) {
  cl_command_queue ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  cl_event g1 = user_event(), g2 = user_event();
  cl_event k1, k2;
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &g1, &k1));
  CL_OK(clEnqueueNativeKernel(ooo, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &g2, &k2));
  // A marker with a wait list waits only for those events.
  cl_event m1;
  CL_OK(clEnqueueMarkerWithWaitList(ooo, 1, &k1, &m1));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_MARKER), event_info<cl_command_type>(m1, CL_EVENT_COMMAND_TYPE));
  // A marker without a wait list waits for every earlier command.
  cl_event m_all;
  CL_OK(clEnqueueMarkerWithWaitList(ooo, 0, nullptr, &m_all));
  // A barrier with a wait list: later commands wait for it.
  cl_event bar;
  CL_OK(clEnqueueBarrierWithWaitList(ooo, 1, &k2, &bar));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_BARRIER), event_info<cl_command_type>(bar, CL_EVENT_COMMAND_TYPE));
  cl_event after;
  CL_OK(clEnqueueMarkerWithWaitList(ooo, 1, &k1, &after)); // k1 only, but behind the barrier
  CL_OK(clSetUserEventStatus(g1, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &m1));
  sleep_ms(10);
  EXPECT_NE(CL_COMPLETE, event_status(m_all));
  EXPECT_NE(CL_COMPLETE, event_status(bar));
  EXPECT_NE(CL_COMPLETE, event_status(after));
  CL_OK(clSetUserEventStatus(g2, CL_COMPLETE));
  cl_event all[] = {m_all, bar, after};
  CL_OK(clWaitForEvents(3, all));
  // OpenCL 1.1 forms.
  cl_event legacy;
  CL_OK(clEnqueueMarker(ooo, &legacy));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueMarker(ooo, nullptr));
  CL_OK(clEnqueueBarrier(ooo));
  CL_OK(clEnqueueWaitForEvents(ooo, 1, &legacy));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueWaitForEvents(ooo, 0, nullptr));
  cl_event bad = wrong<cl_event>(ooo);
  EXPECT_EQ(CL_INVALID_EVENT, clEnqueueWaitForEvents(ooo, 1, &bad));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueMarkerWithWaitList(wrong<cl_command_queue>(context), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueBarrierWithWaitList(wrong<cl_command_queue>(context), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueBarrier(wrong<cl_command_queue>(context)));
  CL_OK(clFinish(ooo));
  EXPECT_EQ(CL_COMPLETE, event_status(legacy));
  for (cl_event e : {g1, g2, k1, k2, m1, m_all, bar, after, legacy})
    clReleaseEvent(e);
  clReleaseCommandQueue(ooo);
}

TEST_F(EventTest, InOrderMarkerWaitsForPrevious) {
  cl_event gate = user_event();
  cl_event k, m;
  CL_OK(clEnqueueNativeKernel(queue, count_run, nullptr, 0, 0, nullptr, nullptr, 1, &gate, &k));
  CL_OK(clEnqueueMarkerWithWaitList(queue, 0, nullptr, &m));
  sleep_ms(5);
  EXPECT_NE(CL_COMPLETE, event_status(m));
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &m));
  EXPECT_EQ(CL_COMPLETE, event_status(k));
  for (cl_event e : {gate, k, m})
    clReleaseEvent(e);
}

cl_ulong modeled(cl_event e, cl_profiling_info which) {
  cl_ulong ns = 0;
  EXPECT_EQ(CL_SUCCESS, clGetEventProfilingInfo(e, which, sizeof ns, &ns, nullptr));
  return ns;
}

// A command's modeled start is after the modeled end of what it waited for (the previous
// command of an in-order queue, its wait list, a marker's wait list), also when they ran on
// other clusters: modeled time never depends on which cluster the host picked.
TEST_F(EventTest, ModeledStartFollowsQueueOrderAndWaitLists) {
  cl_command_queue in_order = make_queue(CL_QUEUE_PROFILING_ENABLE);
  cl_command_queue ooo =
      make_queue(CL_QUEUE_PROFILING_ENABLE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  const size_t size = 256 << 10;
  std::vector<char> host(size, 3);
  cl_mem buffer = make_buffer(size);
  std::vector<cl_event> writes(4);
  for (auto &w : writes)
    CL_OK(clEnqueueWriteBuffer(in_order, buffer, CL_FALSE, 0, size, host.data(), 0, nullptr, &w));
  cl_event after_list, marker, after_marker;
  CL_OK(clEnqueueWriteBuffer(ooo, buffer, CL_FALSE, 0, size, host.data(), 1, &writes.back(),
                             &after_list));
  CL_OK(clEnqueueMarkerWithWaitList(ooo, 1, &after_list, &marker));
  CL_OK(clEnqueueWriteBuffer(ooo, buffer, CL_FALSE, 0, size, host.data(), 1, &marker,
                             &after_marker));
  CL_OK(clFinish(in_order));
  CL_OK(clFinish(ooo));
  std::vector<cl_event> chain = writes;
  chain.push_back(after_list);
  chain.push_back(after_marker);
  for (size_t i = 1; i < chain.size(); ++i) {
    EXPECT_GT(modeled(chain[i - 1], CL_PROFILING_MODELED_END_MCL),
              modeled(chain[i - 1], CL_PROFILING_MODELED_START_MCL));
    EXPECT_GE(modeled(chain[i], CL_PROFILING_MODELED_START_MCL),
              modeled(chain[i - 1], CL_PROFILING_MODELED_END_MCL))
        << "command " << i;
  }
  for (cl_event e : chain)
    clReleaseEvent(e);
  clReleaseEvent(marker);
  clReleaseMemObject(buffer);
  clReleaseCommandQueue(in_order);
  clReleaseCommandQueue(ooo);
}

} // namespace
