// Concurrency: many host threads sharing queues and contexts, per-sub-device queues, and the
// proof that sub-devices really execute at the same time. Run under TSan (label concurrency).
#include "rt_common.h"

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <sched.h>
#include <thread>

using namespace rt_test;

namespace {

class ConcurrencyTest : public RuntimeTest {
protected:
  void SetUp() override {
    RuntimeTest::SetUp();
    if (HasFatalFailure())
      return;
    cl_uint max_sub = device_info<cl_uint>(device, CL_DEVICE_PARTITION_MAX_SUB_DEVICES);
    ASSERT_GE(max_sub, 2u);
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                            CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE, 0};
    subs.resize(max_sub);
    CL_OK(clCreateSubDevices(device, props, max_sub, subs.data(), nullptr));
    cl_int err;
    sub_context = clCreateContext(nullptr, static_cast<cl_uint>(subs.size()), subs.data(), nullptr,
                                  nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    for (cl_device_id s : subs) {
      sub_queues.push_back(clCreateCommandQueue(sub_context, s, 0, &err));
      ASSERT_EQ(CL_SUCCESS, err);
    }
  }
  void TearDown() override {
    for (cl_command_queue q : sub_queues) {
      EXPECT_EQ(CL_SUCCESS, clFinish(q));
      clReleaseCommandQueue(q);
    }
    if (sub_context)
      clReleaseContext(sub_context);
    for (cl_device_id s : subs)
      clReleaseDevice(s);
    RuntimeTest::TearDown();
  }
  std::vector<cl_device_id> subs;
  cl_context sub_context = nullptr;
  std::vector<cl_command_queue> sub_queues;
};

struct AddArgs {
  int *data;
  size_t n;
  int delta;
};
void CL_CALLBACK add_delta(void *p) {
  auto *a = static_cast<AddArgs *>(p);
  for (size_t i = 0; i < a->n; ++i)
    a->data[i] += a->delta;
}

TEST_F(ConcurrencyTest, ManyThreadsSharedAndPerSubDeviceQueues) {
  const int threads = 6, rounds = 25;
  const size_t n = 512;
  cl_command_queue shared_ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  std::atomic<int> failures{0};
  std::atomic<int> callbacks{0};
  cl_event start_gate = user_event();
  auto worker = [&](int t) {
    auto fail = [&](const char *what, cl_int e) {
      ADD_FAILURE() << "thread " << t << ": " << what << " -> " << e;
      failures++;
    };
    for (int r = 0; r < rounds; ++r) {
      cl_int err;
      // Alternate between the shared root context/queues and the sub-device context/queues.
      bool on_sub = (r + t) % 2;
      cl_context ctx = on_sub ? sub_context : context;
      cl_command_queue q =
          on_sub ? sub_queues[(t + r) % sub_queues.size()] : ((r % 3) ? queue : shared_ooo);
      std::vector<int> init(n);
      std::iota(init.begin(), init.end(), t * 1000 + r);
      cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(int),
                                init.data(), &err);
      if (err != CL_SUCCESS) {
        fail("clCreateBuffer", err);
        continue;
      }
      AddArgs args{nullptr, n, t + 1};
      const void *loc[] = {&args.data};
      cl_event k1, k2;
      cl_event first_wait[] = {start_gate};
      // The first round of every thread waits on a user event set by the main thread (only
      // usable in the root context).
      bool gated = r == 0 && !on_sub;
      if ((err = clEnqueueNativeKernel(q, add_delta, &args, sizeof(args), 1, &m, loc, gated ? 1 : 0,
                                       gated ? first_wait : nullptr, &k1)) != CL_SUCCESS) {
        fail("native 1", err);
        clReleaseMemObject(m);
        continue;
      }
      clSetEventCallback(
          k1, CL_COMPLETE,
          [](cl_event, cl_int, void *c) { (*static_cast<std::atomic<int> *>(c))++; }, &callbacks);
      if ((err = clEnqueueNativeKernel(q, add_delta, &args, sizeof(args), 1, &m, loc, 1, &k1,
                                       &k2)) != CL_SUCCESS)
        fail("native 2", err);
      std::vector<int> got(n);
      if ((err = clEnqueueReadBuffer(q, m, CL_TRUE, 0, n * sizeof(int), got.data(), 1, &k2,
                                     nullptr)) != CL_SUCCESS)
        fail("read", err);
      for (size_t i = 0; i < n; ++i)
        if (got[i] != init[i] + 2 * (t + 1)) {
          fail("data", got[i]);
          break;
        }
      cl_event both[] = {k1, k2};
      if ((err = clWaitForEvents(2, both)) != CL_SUCCESS)
        fail("wait", err);
      // Shared-object reference counting from many threads.
      clRetainContext(ctx);
      clRetainCommandQueue(q);
      clReleaseEvent(k1);
      clReleaseEvent(k2);
      clReleaseMemObject(m);
      clReleaseCommandQueue(q);
      clReleaseContext(ctx);
      if (r % 5 == 0)
        clFinish(q);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(worker, t);
  sleep_ms(20);
  CL_OK(clSetUserEventStatus(start_gate, CL_COMPLETE));
  for (auto &th : pool)
    th.join();
  CL_OK(clFinish(shared_ooo));
  CL_OK(clFinish(queue));
  EXPECT_EQ(0, failures.load());
  EXPECT_TRUE(eventually([&] { return callbacks.load() == threads * rounds; }));
  clReleaseEvent(start_gate);
  clReleaseCommandQueue(shared_ooo);
}

TEST_F(ConcurrencyTest, ConcurrentUserEventWaitersAndSetters) {
  const int n = 8;
  std::vector<cl_event> events;
  for (int i = 0; i < n; ++i)
    events.push_back(user_event());
  std::atomic<int> ok{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < n; ++i)
    waiters.emplace_back([&, i] {
      cl_event mine[] = {events[i], events[(i + 1) % n]};
      if (clWaitForEvents(2, mine) == CL_SUCCESS)
        ok++;
    });
  std::vector<std::thread> setters;
  for (int i = 0; i < n; ++i)
    setters.emplace_back([&, i] { clSetUserEventStatus(events[i], CL_COMPLETE); });
  for (auto &t : setters)
    t.join();
  for (auto &t : waiters)
    t.join();
  EXPECT_EQ(n, ok.load());
  for (cl_event e : events)
    clReleaseEvent(e);
}

// clSetUserEventStatus from several threads at once: exactly one call wins, the others get
// CL_INVALID_OPERATION, and the event keeps the winner's status.
TEST_F(ConcurrencyTest, RacingUserEventStatusHasOneWinner) {
  const int rounds = 100, racers = 4;
  // Out of order: a failed round must not fail the next one through queue order.
  cl_command_queue ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  for (int r = 0; r < rounds; ++r) {
    cl_event e = user_event();
    cl_event dependent;
    CL_OK(clEnqueueMarkerWithWaitList(ooo, 1, &e, &dependent));
    std::atomic<int> ready{0};
    std::atomic<int> winners{0};
    std::atomic<cl_int> winning_status{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < racers; ++t)
      pool.emplace_back([&, t] {
        ready++;
        while (ready.load() < racers)
          std::this_thread::yield();
        cl_int status = t == 0 ? CL_COMPLETE : -(t + 1);
        cl_int err = clSetUserEventStatus(e, status);
        if (err == CL_SUCCESS) {
          winners++;
          winning_status = status;
        } else {
          EXPECT_EQ(CL_INVALID_OPERATION, err);
        }
      });
    for (auto &t : pool)
      t.join();
    ASSERT_EQ(1, winners.load()) << "round " << r;
    EXPECT_EQ(winning_status.load(), event_status(e));
    cl_int dep = clWaitForEvents(1, &dependent);
    EXPECT_EQ(winning_status.load() == CL_COMPLETE ? CL_SUCCESS
                                                   : CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST,
              dep);
    clReleaseEvent(dependent);
    clReleaseEvent(e);
  }
  clReleaseCommandQueue(ooo);
}

TEST_F(ConcurrencyTest, ConcurrentPartitionAndRelease) {
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
        cl_device_id out[64];
        cl_uint n = 0;
        if (clCreateSubDevices(device, props, 64, out, &n) != CL_SUCCESS) {
          failures++;
          continue;
        }
        cl_int err;
        cl_context c = clCreateContext(nullptr, n, out, nullptr, nullptr, &err);
        if (err != CL_SUCCESS)
          failures++;
        for (cl_uint i = 0; i < n; ++i)
          clReleaseDevice(out[i]);
        if (c)
          clReleaseContext(c);
      }
    });
  for (auto &t : pool)
    t.join();
  EXPECT_EQ(0, failures.load());
}

struct SleepArgs {
  int ms;
};
void CL_CALLBACK sleep_kernel(void *p) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<SleepArgs *>(p)->ms));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Short kernels enqueued from many threads: each thread's launches form one dependency chain
// that alternates between its own in-order queue and a shared out-of-order queue, mixed with
// native kernels that keep the cluster threads busy and barriers on the shared queue. Short
// launches run on the enqueuing thread or on a cluster thread depending on which cluster is
// idle at that moment; every launch must run exactly once, in chain order.
TEST_F(ConcurrencyTest, ShortKernelsFromManyThreads) {
  const int threads = 4, rounds = 150;
  const char *source = "kernel void bump(global int *c) { c[get_global_id(0)] += 1; }";
  cl_int err;
  cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  ASSERT_EQ(CL_SUCCESS, clBuildProgram(program, 1, &device, "", nullptr, nullptr));
  std::vector<int> zeros(threads, 0);
  cl_mem counters = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                   threads * sizeof(int), zeros.data(), &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_command_queue shared_ooo = make_queue(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
  std::vector<int> native_runs(threads, 0);
  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    auto fail = [&](const char *what, cl_int e) {
      ADD_FAILURE() << "thread " << t << ": " << what << " -> " << e;
      failures++;
    };
    cl_int e;
    cl_kernel k = clCreateKernel(program, "bump", &e);
    if (e != CL_SUCCESS)
      return fail("clCreateKernel", e);
    clSetKernelArg(k, 0, sizeof(counters), &counters);
    cl_command_queue own = clCreateCommandQueue(context, device, 0, &e);
    if (e != CL_SUCCESS)
      return fail("clCreateCommandQueue", e);
    size_t offset = static_cast<size_t>(t), one = 1;
    cl_event previous = nullptr;
    int *runs = &native_runs[t];
    for (int r = 0; r < rounds; ++r) {
      cl_command_queue q = r % 2 ? shared_ooo : own;
      cl_event next;
      if ((e = clEnqueueNDRangeKernel(q, k, 1, &offset, &one, &one, previous ? 1 : 0,
                                      previous ? &previous : nullptr, &next)) != CL_SUCCESS)
        fail("clEnqueueNDRangeKernel", e);
      if (previous)
        clReleaseEvent(previous);
      previous = next;
      if (r % 8 == 0) {
        auto count = [](void *p) { ++**static_cast<int **>(p); };
        if ((e = clEnqueueNativeKernel(q, count, &runs, sizeof(runs), 0, nullptr, nullptr, 1,
                                       &previous, &next)) != CL_SUCCESS)
          fail("clEnqueueNativeKernel", e);
        clReleaseEvent(previous);
        previous = next;
      }
      if (t == 0 && r % 50 == 25)
        clEnqueueBarrierWithWaitList(shared_ooo, 0, nullptr, nullptr);
    }
    if ((e = clWaitForEvents(1, &previous)) != CL_SUCCESS)
      fail("clWaitForEvents", e);
    clReleaseEvent(previous);
    clFinish(own);
    clReleaseCommandQueue(own);
    clReleaseKernel(k);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(worker, t);
  for (auto &th : pool)
    th.join();
  CL_OK(clFinish(shared_ooo));
  EXPECT_EQ(0, failures.load());
  std::vector<int> got(threads, -1);
  CL_OK(clEnqueueReadBuffer(queue, counters, CL_TRUE, 0, threads * sizeof(int), got.data(), 0,
                            nullptr, nullptr));
  for (int t = 0; t < threads; ++t) {
    EXPECT_EQ(rounds, got[t]) << "thread " << t;
    EXPECT_EQ((rounds + 7) / 8, native_runs[t]) << "thread " << t;
  }
  clReleaseCommandQueue(shared_ooo);
  clReleaseMemObject(counters);
  clReleaseProgram(program);
}

TEST_F(ConcurrencyTest, SubDeviceQueuesOverlapInTime) {
  const int ms = 150, per_queue = 2;
  SleepArgs args{ms};
  // Serial reference: the same work on one sub-device queue takes the serial sum.
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2 * per_queue; ++i)
    CL_OK(clEnqueueNativeKernel(sub_queues[0], sleep_kernel, &args, sizeof(args), 0, nullptr,
                                nullptr, 0, nullptr, nullptr));
  CL_OK(clFinish(sub_queues[0]));
  double serial = seconds_since(t0);
  EXPECT_GE(serial, 2 * per_queue * ms / 1000.0 * 0.95);

  // The same work split over two sub-devices' queues runs concurrently.
  t0 = std::chrono::steady_clock::now();
  std::vector<cl_event> events;
  for (int i = 0; i < per_queue; ++i)
    for (int qi = 0; qi < 2; ++qi) {
      cl_event e;
      CL_OK(clEnqueueNativeKernel(sub_queues[qi], sleep_kernel, &args, sizeof(args), 0, nullptr,
                                  nullptr, 0, nullptr, &e));
      events.push_back(e);
    }
  CL_OK(clWaitForEvents(static_cast<cl_uint>(events.size()), events.data()));
  double parallel = seconds_since(t0);
  const double serial_sum = 2 * per_queue * ms / 1000.0;
  EXPECT_LT(parallel, 0.75 * serial_sum)
      << "parallel " << parallel << " s, serial " << serial << " s";
  EXPECT_GE(parallel, per_queue * ms / 1000.0 * 0.95);
  for (cl_event e : events)
    clReleaseEvent(e);
}

// The host threads a launch may use at once: MANYCL_PE_THREADS when set, else the pool's, one
// per CPU the process may use (MANYCL_HOST_THREADS when set).
unsigned host_lanes() {
  for (const char *name : {"MANYCL_PE_THREADS", "MANYCL_HOST_THREADS"})
    if (const char *v = std::getenv(name); v && std::atoi(v) > 0)
      return static_cast<unsigned>(std::atoi(v));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
}

// A launch over every cluster runs its work-groups on at most as many host threads at once as
// the host has for one cluster: each cluster's share used to run groups on its own thread
// besides the pool's workers (7 threads at once for the 5 clusters of mppa3 on a 2-CPU host,
// time-slicing the cores between streams). Each work-item counts the items running at the same
// time around a spin of its own (one item per group, so each is one lane's group); the spin's
// result is checked too.
TEST_F(ConcurrencyTest, OneLaunchRunsOnAtMostTheHostThreads) {
  const char *source = R"(
kernel void occupy(global uint *state) {
  uint inside = atomic_inc(&state[0]) + 1;
  atomic_max(&state[1], inside);
  uint x = (uint)get_global_id(0);
  uint trips = state[2]; // read per item: no loop barrier, each item spins on its own
  for (uint i = 0; i < trips; ++i)
    x = x * 1664525u + 1013904223u;
  state[3 + get_global_id(0)] = x;
  atomic_dec(&state[0]);
}
)";
  cl_int err;
  cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  ASSERT_EQ(CL_SUCCESS, clBuildProgram(program, 1, &device, "", nullptr, nullptr));
  cl_kernel k = clCreateKernel(program, "occupy", &err);
  ASSERT_EQ(CL_SUCCESS, err);
  const size_t items = 600;
  const cl_uint trips = 50000;
  std::vector<cl_uint> state(3 + items, 0);
  state[2] = trips;
  cl_mem m = make_buffer(state.size() * sizeof(cl_uint), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                         state.data());
  CL_OK(clSetKernelArg(k, 0, sizeof(m), &m));
  size_t one = 1;
  for (int launch = 0; launch < 3; ++launch)
    CL_OK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &items, &one, 0, nullptr, nullptr));
  CL_OK(clEnqueueReadBuffer(queue, m, CL_TRUE, 0, state.size() * sizeof(cl_uint), state.data(), 0,
                            nullptr, nullptr));
  EXPECT_EQ(0u, state[0]);
  EXPECT_GE(state[1], 1u);
  EXPECT_LE(state[1], host_lanes()) << "work-items running at once";
  for (size_t i = 0; i < items; ++i) {
    cl_uint x = static_cast<cl_uint>(i);
    for (cl_uint t = 0; t < trips; ++t)
      x = x * 1664525u + 1013904223u;
    ASSERT_EQ(x, state[3 + i]) << "item " << i;
  }
  clReleaseMemObject(m);
  clReleaseKernel(k);
  clReleaseProgram(program);
}

} // namespace
