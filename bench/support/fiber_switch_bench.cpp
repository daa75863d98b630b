// Host cost of a fiber switch, side by side in one process:
//  * `manycl::fiber`: the switch the host pool and the OpenCL C executor use (fiber_switch.h);
//  * `swapcontext`: glibc's, which the host pool used before (it also saves and restores the
//    signal mask, an rt_sigprocmask system call per switch);
//  * `pool barrier`: a team of 16 members on a one-worker HostPool meeting at a CoopBarrier,
//    what an uncosted SPMD work-group of 16 PEs does at each OpenCL C barrier (per member
//    wait: the mutexes, the worker's queue and two switches).
// Prints the median over repeats of thread CPU time (which preemption on a shared host does
// not inflate) and wall time, in ns per switch (per member wait for the pool row).
//   build/bench/support/fiber_switch_bench [--repeats 9] [--switches 1000000]
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "manycl/device/host_pool.h"
#include "manycl/fiber_switch.h"

namespace {

constexpr size_t kStackBytes = 64 << 10;

double thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
double wall_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Sample {
  double cpu_ns = 0, wall_ns = 0;
};

void *map_stack() {
  void *p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  return p;
}

// ------------------------------------------------------------------ manycl::fiber

manycl::fiber::Context g_main, g_fiber;

void bounce(void *) {
  for (;;)
    manycl::fiber::switch_to(g_fiber, g_main);
}

// `switches` one-way switches (half of them into the fiber, half back).
Sample time_manycl_switch(long switches) {
  void *stack = map_stack();
  manycl::fiber::prepare(g_fiber, stack, kStackBytes, bounce, nullptr);
  manycl::fiber::switch_to(g_main, g_fiber); // enter once: the loop then only bounces
  const double c0 = thread_cpu_ns(), w0 = wall_ns();
  for (long i = 0; i < switches / 2; ++i)
    manycl::fiber::switch_to(g_main, g_fiber);
  Sample s{thread_cpu_ns() - c0, wall_ns() - w0};
  munmap(stack, kStackBytes);
  return s;
}

// ------------------------------------------------------------------ swapcontext

ucontext_t g_uc_main, g_uc_fiber;

void uc_bounce() {
  for (;;)
    swapcontext(&g_uc_fiber, &g_uc_main);
}

Sample time_swapcontext(long switches) {
  void *stack = map_stack();
  getcontext(&g_uc_fiber);
  g_uc_fiber.uc_stack.ss_sp = stack;
  g_uc_fiber.uc_stack.ss_size = kStackBytes;
  g_uc_fiber.uc_link = nullptr;
  makecontext(&g_uc_fiber, uc_bounce, 0);
  swapcontext(&g_uc_main, &g_uc_fiber);
  const double c0 = thread_cpu_ns(), w0 = wall_ns();
  for (long i = 0; i < switches / 2; ++i)
    swapcontext(&g_uc_main, &g_uc_fiber);
  Sample s{thread_cpu_ns() - c0, wall_ns() - w0};
  munmap(stack, kStackBytes);
  return s;
}

// ------------------------------------------------------------------ HostPool team barrier

// 16 members on one worker, `phases` barrier phases; CPU time is the process's (the worker
// runs the members, the caller sleeps).
Sample time_pool_barrier(manycl::device::HostPool &pool, long phases) {
  constexpr unsigned kMembers = 16;
  manycl::device::CoopBarrier barrier(kMembers);
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  const double c0 = t.tv_sec * 1e9 + t.tv_nsec, w0 = wall_ns();
  pool.run_team(kMembers, 0, [&](unsigned) {
    for (long p = 0; p < phases; ++p)
      barrier.arrive_and_wait();
  });
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return {t.tv_sec * 1e9 + t.tv_nsec - c0, wall_ns() - w0};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report(const char *name, const char *unit, const std::vector<Sample> &samples, long count) {
  std::vector<double> cpu, wall;
  for (const Sample &s : samples) {
    cpu.push_back(s.cpu_ns / double(count));
    wall.push_back(s.wall_ns / double(count));
  }
  std::printf("%-14s %9.1f %9.1f   ns per %s (median of %zu)\n", name, median(cpu), median(wall),
              unit, samples.size());
}

} // namespace

int main(int argc, char **argv) {
  int repeats = 9;
  long switches = 1000000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--repeats" && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--switches" && i + 1 < argc) {
      switches = std::max(2L, std::atol(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeats N] [--switches N]\n", argv[0]);
      return 2;
    }
  }
  // The pool row: each member wait is about two switches and the locks around them.
  const long phases = std::max(1L, switches / 32);
  manycl::device::HostPool pool(1);
  std::vector<Sample> ours, glibc, team;
  // Interleaved, so that a change in host load falls on every row alike.
  for (int r = 0; r < repeats; ++r) {
    ours.push_back(time_manycl_switch(switches));
    glibc.push_back(time_swapcontext(switches));
    team.push_back(time_pool_barrier(pool, phases));
  }
  std::printf("%-14s %9s %9s\n", "", "CPU", "wall");
  report("manycl::fiber", "switch", ours, switches);
  report("swapcontext", "switch", glibc, switches);
  report("pool barrier", "member wait", team, phases * 16);
  return 0;
}
