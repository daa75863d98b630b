// Short NDRange kernels: a one-work-group launch of a kernel known to be short may run on the
// enqueuing thread when a cluster is idle, instead of being handed to a cluster thread. These
// tests check that OpenCL semantics hold on that path (events, profiling, callbacks,
// dependencies, statistics) and that kernels not known to be short stay asynchronous.
#include "rt_common.h"

#include <nlohmann/json.hpp>

#include <atomic>

using namespace rt_test;

namespace {

const char *kSource = R"CLC(
kernel void bump(global int *counter) { counter[get_global_id(0)] += 1; }

kernel void spin(global int *out, int rounds) {
  uint x = (uint)get_global_id(0);
  for (int i = 0; i < rounds; ++i)
    x = x * 1103515245u + 12345u + (x >> 7);
  out[get_global_id(0)] = (int)x;
}
)CLC";

class ShortKernelTest : public RuntimeTest {
protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    if (HasFatalFailure())
      return;
    cl_int err;
    program = clCreateProgramWithSource(context, 1, &kSource, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    ASSERT_EQ(CL_SUCCESS, clBuildProgram(program, 1, &device, "", nullptr, nullptr));
  }
  void TearDown() override {
    if (program)
      clReleaseProgram(program);
    RuntimeTest::TearDown();
  }
  cl_kernel make_kernel(const char *name) {
    cl_int err;
    cl_kernel k = clCreateKernel(program, name, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    return k;
  }
  int read_int(cl_command_queue q, cl_mem m, size_t index = 0) {
    int value = -1;
    EXPECT_EQ(CL_SUCCESS, clEnqueueReadBuffer(q, m, CL_TRUE, index * sizeof(int), sizeof(int),
                                              &value, 0, nullptr, nullptr));
    return value;
  }
  // Runs `k` once as one work-item and waits: afterwards the kernel's last launch is known.
  void run_once(cl_kernel k) {
    size_t one = 1;
    CL_OK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &one, &one, 0, nullptr, nullptr));
    CL_OK(clFinish(queue));
  }
  cl_program program = nullptr;
};

cl_ulong profiling(cl_event e, cl_profiling_info param) {
  cl_ulong value = 0;
  EXPECT_EQ(CL_SUCCESS, clGetEventProfilingInfo(e, param, sizeof(value), &value, nullptr));
  return value;
}

nlohmann::json command_stats(cl_event e) {
  size_t size = 0;
  EXPECT_EQ(CL_SUCCESS, clGetEventInfo(e, CL_EVENT_COMMAND_STATS_MCL, 0, nullptr, &size));
  std::string text(size, '\0');
  EXPECT_EQ(CL_SUCCESS, clGetEventInfo(e, CL_EVENT_COMMAND_STATS_MCL, size, text.data(), nullptr));
  text.resize(std::strlen(text.c_str()));
  return nlohmann::json::parse(text);
}

// Every launch of a short kernel on an idle in-order profiling queue: complete, ordered
// profiling timestamps, its callback fired exactly once, device statistics, right result.
TEST_F(ShortKernelTest, EveryLaunchKeepsProfilingCallbacksAndStatistics) {
  const int launches = 100;
  cl_command_queue profiled = make_queue(CL_QUEUE_PROFILING_ENABLE);
  int zero = 0;
  cl_mem counter = make_buffer(sizeof(int), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &zero);
  cl_kernel k = make_kernel("bump");
  CL_OK(clSetKernelArg(k, 0, sizeof(counter), &counter));
  std::atomic<int> callbacks{0};
  std::vector<cl_event> events(launches);
  size_t one = 1;
  for (int i = 0; i < launches; ++i) {
    CL_OK(clEnqueueNDRangeKernel(profiled, k, 1, nullptr, &one, &one, 0, nullptr, &events[i]));
    CL_OK(clSetEventCallback(
        events[i], CL_COMPLETE,
        [](cl_event, cl_int status, void *count) {
          if (status == CL_COMPLETE)
            (*static_cast<std::atomic<int> *>(count))++;
        },
        &callbacks));
  }
  CL_OK(clFinish(profiled));
  EXPECT_EQ(launches, read_int(profiled, counter));
  EXPECT_TRUE(eventually([&] { return callbacks.load() == launches; })) << callbacks.load();
  cl_ulong previous_end = 0;
  for (int i = 0; i < launches; ++i) {
    ASSERT_EQ(CL_COMPLETE, event_status(events[i])) << "launch " << i;
    cl_ulong queued = profiling(events[i], CL_PROFILING_COMMAND_QUEUED);
    cl_ulong submit = profiling(events[i], CL_PROFILING_COMMAND_SUBMIT);
    cl_ulong start = profiling(events[i], CL_PROFILING_COMMAND_START);
    cl_ulong end = profiling(events[i], CL_PROFILING_COMMAND_END);
    EXPECT_LE(queued, submit) << "launch " << i;
    EXPECT_LE(submit, start) << "launch " << i;
    EXPECT_LE(start, end) << "launch " << i;
    EXPECT_LE(previous_end, start) << "launch " << i << " started before the previous one ended";
    previous_end = end;
    auto stats = command_stats(events[i]);
    EXPECT_TRUE(stats["ok"].get<bool>());
    EXPECT_EQ(1u, stats["clusters"].size());
    EXPECT_EQ("ndrange bump", stats["name"].get<std::string>());
  }
  for (cl_event e : events)
    clReleaseEvent(e);
  clReleaseKernel(k);
  clReleaseMemObject(counter);
  clReleaseCommandQueue(profiled);
}

// A short kernel waiting for a user event does not run before it is set, and fails without
// running when the user event fails.
TEST_F(ShortKernelTest, WaitsForUserEventsAndPropagatesTheirFailure) {
  int zero = 0;
  cl_mem counter = make_buffer(sizeof(int), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &zero);
  cl_kernel k = make_kernel("bump");
  CL_OK(clSetKernelArg(k, 0, sizeof(counter), &counter));
  run_once(k);
  run_once(k);
  ASSERT_EQ(2, read_int(queue, counter));

  size_t one = 1;
  cl_event gate = user_event(), launched;
  CL_OK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &one, &one, 1, &gate, &launched));
  sleep_ms(20);
  EXPECT_GT(event_status(launched), CL_RUNNING);
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &launched));
  EXPECT_EQ(3, read_int(queue, counter));
  clReleaseEvent(launched);
  clReleaseEvent(gate);

  // Out of order, so that the failure does not reach the read through queue order.
  cl_command_queue ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  gate = user_event();
  CL_OK(clEnqueueNDRangeKernel(ooo, k, 1, nullptr, &one, &one, 1, &gate, &launched));
  CL_OK(clSetUserEventStatus(gate, -5));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, clWaitForEvents(1, &launched));
  EXPECT_EQ(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, event_status(launched));
  CL_OK(clFinish(ooo));
  EXPECT_EQ(3, read_int(queue, counter));
  clReleaseEvent(launched);
  clReleaseEvent(gate);
  clReleaseCommandQueue(ooo);
  clReleaseKernel(k);
  clReleaseMemObject(counter);
}

// A kernel not known to be short is enqueued asynchronously (the call returns long before the
// kernel ends); once its launches are short they complete inside the enqueue call; at most
// two launches in a row that turn out long send the next ones back to the cluster threads.
TEST_F(ShortKernelTest, OnlyKernelsKnownToBeShortRunOnTheEnqueuingThread) {
  cl_command_queue profiled = make_queue(CL_QUEUE_PROFILING_ENABLE);
  cl_mem out = make_buffer(sizeof(int));
  cl_kernel k = make_kernel("spin");
  CL_OK(clSetKernelArg(k, 0, sizeof(out), &out));
  size_t one = 1;
  // Host seconds the enqueue call took, and the kernel's own run time.
  auto launch = [&](int rounds, cl_int *status_after_enqueue = nullptr) {
    EXPECT_EQ(CL_SUCCESS, clSetKernelArg(k, 1, sizeof(rounds), &rounds));
    cl_event e;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(CL_SUCCESS,
              clEnqueueNDRangeKernel(profiled, k, 1, nullptr, &one, &one, 0, nullptr, &e));
    double enqueue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (status_after_enqueue)
      *status_after_enqueue = event_status(e);
    EXPECT_EQ(CL_SUCCESS, clWaitForEvents(1, &e));
    double run_s =
        (profiling(e, CL_PROFILING_COMMAND_END) - profiling(e, CL_PROFILING_COMMAND_START)) * 1e-9;
    clReleaseEvent(e);
    return std::make_pair(enqueue_s, run_s);
  };
  const int long_rounds = 60'000'000; // around 100 ms: far longer than a preemption
  auto [first_enqueue, first_run] = launch(long_rounds);
  ASSERT_GT(first_run, 0.01) << "the long launch is too short to tell";
  EXPECT_LT(first_enqueue, first_run / 2) << "a new kernel ran on the enqueuing thread";

  // Short launches: once the kernel is known short, a launch completes inside the enqueue
  // call (a few tries: a short launch preempted on a loaded host counts as long).
  bool completed_in_enqueue = false;
  for (int i = 0; i < 20 && !completed_in_enqueue; ++i) {
    cl_int status = 0;
    launch(1, &status);
    completed_in_enqueue = status == CL_COMPLETE;
  }
  EXPECT_TRUE(completed_in_enqueue)
      << "a short kernel on an idle device never completed in the enqueue call";

  // Known short, actually long: runs on the enqueuing thread (the enqueue call lasts as long
  // as the kernel), but after at most two such launches the next ones are asynchronous again.
  auto [blocking_enqueue, blocking_run] = launch(long_rounds);
  EXPECT_GE(blocking_enqueue, blocking_run);
  bool asynchronous_again = false;
  for (int i = 0; i < 2 && !asynchronous_again; ++i) {
    auto [enqueue_s, run_s] = launch(long_rounds);
    asynchronous_again = enqueue_s < run_s / 2;
  }
  EXPECT_TRUE(asynchronous_again) << "long launches kept blocking the enqueuing thread";
  clReleaseKernel(k);
  clReleaseMemObject(out);
  clReleaseCommandQueue(profiled);
}

} // namespace
