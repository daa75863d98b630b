// The user-space fiber switch (manycl/fiber_switch.h) on its own: entry and argument, state
// kept across switches (callee-saved registers, floating-point control, the stack), and many
// contexts taking turns. Built twice: with the x86-64 switch and with the ucontext fallback
// (MANYCL_FIBER_UCONTEXT), so both implementations keep the same contract.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cfenv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "manycl/fiber_switch.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN_FIBERS 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN_FIBERS 1
#endif
#endif
#ifdef TEST_ASAN_FIBERS
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef TEST_TSAN_FIBERS
#include <sanitizer/tsan_interface.h>
#endif

namespace {

using manycl::fiber::Context;

constexpr size_t kStackBytes = 256 << 10;

// One fiber: its stack and context, and the switches in and out of it told to the
// sanitizers as the host pool and the OpenCL C executor do.
struct TestFiber {
  void *stack = nullptr;
  Context context;
  Context *caller = nullptr; // where yield() returns
#ifdef TEST_TSAN_FIBERS
  void *tsan = nullptr;
  void *caller_tsan = nullptr;
#endif
#ifdef TEST_ASAN_FIBERS
  const void *caller_bottom = nullptr;
  size_t caller_size = 0;
#endif

  TestFiber(void (*entry)(void *), void *arg) {
    stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED)
      std::abort();
    manycl::fiber::prepare(context, stack, kStackBytes, entry, arg);
#ifdef TEST_TSAN_FIBERS
    tsan = __tsan_create_fiber(0);
#endif
  }
  ~TestFiber() {
#ifdef TEST_TSAN_FIBERS
    __tsan_destroy_fiber(tsan);
#endif
    munmap(stack, kStackBytes);
  }
  TestFiber(const TestFiber &) = delete;
  TestFiber &operator=(const TestFiber &) = delete;

  // From the caller's context into the fiber, until it yields.
  void resume(Context &from) {
    caller = &from;
#ifdef TEST_TSAN_FIBERS
    caller_tsan = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(tsan, 0);
#endif
#ifdef TEST_ASAN_FIBERS
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack, kStackBytes);
    manycl::fiber::switch_to(from, context);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    manycl::fiber::switch_to(from, context);
#endif
  }

  // From inside the fiber back to whoever resumed it.
  void yield() {
#ifdef TEST_TSAN_FIBERS
    __tsan_switch_to_fiber(caller_tsan, 0);
#endif
#ifdef TEST_ASAN_FIBERS
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, caller_bottom, caller_size);
    manycl::fiber::switch_to(context, *caller);
    __sanitizer_finish_switch_fiber(fake, &caller_bottom, &caller_size);
#else
    manycl::fiber::switch_to(context, *caller);
#endif
  }

  // The first thing an entry does (ASan learns the caller's stack bounds here).
  void entered() {
#ifdef TEST_ASAN_FIBERS
    __sanitizer_finish_switch_fiber(nullptr, &caller_bottom, &caller_size);
#endif
  }
};

// ------------------------------------------------------------------ entry and argument

struct Counter {
  TestFiber *self = nullptr;
  int value = 0;
  bool finished = false;
};

void count_three_times(void *arg) {
  auto &c = *static_cast<Counter *>(arg);
  c.self->entered();
  for (int i = 0; i < 3; ++i) {
    c.value += 10;
    c.self->yield();
  }
  c.finished = true;
  c.self->yield(); // never resumed again
  std::abort();
}

TEST(FiberSwitch, EntryGetsItsArgumentAndResumesWhereItYielded) {
  Counter counter;
  TestFiber f(count_three_times, &counter);
  counter.self = &f;
  Context main;
  for (int round = 1; round <= 3; ++round) {
    f.resume(main);
    EXPECT_EQ(counter.value, 10 * round);
    EXPECT_FALSE(counter.finished);
  }
  f.resume(main);
  EXPECT_TRUE(counter.finished);
  EXPECT_EQ(counter.value, 30);
}

// ------------------------------------------------------------------ callee-saved registers

struct Clobberer {
  TestFiber *self = nullptr;
  int rounds = 0;
};

// Leaves garbage in every register the caller of a switch may keep values in, then
// switches: if a switch did not save and restore them, the main context's live values would
// be this garbage when it resumes.
void clobber_and_yield(void *arg) {
  auto &c = *static_cast<Clobberer *>(arg);
  c.self->entered();
  for (;;) {
    ++c.rounds;
#if defined(__x86_64__)
    asm volatile("movq $0x5a5a5a5a, %%rbx\n\t"
                 "movq $0x5a5a5a5b, %%r12\n\t"
                 "movq $0x5a5a5a5c, %%r13\n\t"
                 "movq $0x5a5a5a5d, %%r14\n\t"
                 "movq $0x5a5a5a5e, %%r15\n\t" ::
                     : "rbx", "r12", "r13", "r14", "r15");
#endif
    c.self->yield();
  }
}

TEST(FiberSwitch, TheResumedContextKeepsItsLiveValues) {
  Clobberer clobberer;
  TestFiber f(clobber_and_yield, &clobberer);
  clobberer.self = &f;
  Context main;
  // Values live across the switches: the compiler keeps them in callee-saved registers.
  uint64_t a = 1, b = 2, c = 3, d = 4, e = 5;
  constexpr int kRounds = 1000;
  for (int i = 0; i < kRounds; ++i) {
    f.resume(main);
    a = a * 3 + 1;
    b ^= a + static_cast<uint64_t>(i);
    c += b >> 3;
    d = d * 5 + c;
    e += d ^ a;
  }
  // The same computation without switches.
  uint64_t ra = 1, rb = 2, rc = 3, rd = 4, re = 5;
  for (int i = 0; i < kRounds; ++i) {
    ra = ra * 3 + 1;
    rb ^= ra + static_cast<uint64_t>(i);
    rc += rb >> 3;
    rd = rd * 5 + rc;
    re += rd ^ ra;
  }
  EXPECT_EQ(clobberer.rounds, kRounds);
  EXPECT_EQ(a, ra);
  EXPECT_EQ(b, rb);
  EXPECT_EQ(c, rc);
  EXPECT_EQ(d, rd);
  EXPECT_EQ(e, re);
}

#if defined(__x86_64__)
// The same, register by register: each value is put in its register before the switch and
// read from it after (the compiler keeps a register variable where it is across a call, as
// the ABI lets it).
TEST(FiberSwitch, EveryCalleeSavedRegisterSurvives) {
  Clobberer clobberer;
  TestFiber f(clobber_and_yield, &clobberer);
  clobberer.self = &f;
  Context main;
  for (uint64_t i = 0; i < 100; ++i) {
    register uint64_t rbx asm("rbx") = 0x1000 + i;
    register uint64_t r12 asm("r12") = 0x2000 + i;
    register uint64_t r13 asm("r13") = 0x3000 + i;
    register uint64_t r14 asm("r14") = 0x4000 + i;
    register uint64_t r15 asm("r15") = 0x5000 + i;
    asm volatile("" : "+r"(rbx), "+r"(r12), "+r"(r13), "+r"(r14), "+r"(r15));
    f.resume(main);
    asm volatile("" : "+r"(rbx), "+r"(r12), "+r"(r13), "+r"(r14), "+r"(r15));
    const uint64_t seen[] = {rbx, r12, r13, r14, r15};
    for (uint64_t r = 0; r < 5; ++r)
      ASSERT_EQ(seen[r], 0x1000 * (r + 1) + i) << "register " << r << " after switch " << i;
  }
}
#endif

// ------------------------------------------------------------------ floating-point control

// ±1/3 in single precision, rounded as the SSE control register (MXCSR) says: the pair
// differs for each of the four rounding modes. (fegetround reads the x87 control word.)
struct Thirds {
  float positive = 0, negative = 0;
  bool operator==(const Thirds &) const = default;
};
__attribute__((noinline)) Thirds thirds() {
  volatile float one = 1.0f, minus_one = -1.0f, three = 3.0f;
  return {one / three, minus_one / three};
}
Thirds thirds_in(int mode) {
  const int saved = std::fegetround();
  std::fesetround(mode);
  const Thirds t = thirds();
  std::fesetround(saved);
  return t;
}

struct Rounding {
  TestFiber *self = nullptr;
  int mode_at_entry = -1, mode_after_resume = -1;
  Thirds thirds_at_entry, thirds_after_resume;
};

void round_toward_zero(void *arg) {
  auto &r = *static_cast<Rounding *>(arg);
  r.self->entered();
  r.mode_at_entry = std::fegetround();
  r.thirds_at_entry = thirds();
  std::fesetround(FE_TOWARDZERO);
  r.self->yield();
  r.mode_after_resume = std::fegetround();
  r.thirds_after_resume = thirds();
  r.self->yield();
  std::abort();
}

TEST(FiberSwitch, EachContextKeepsItsRoundingMode) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  const Thirds upward = thirds_in(FE_UPWARD), nearest = thirds_in(FE_TONEAREST),
               downward = thirds_in(FE_DOWNWARD), toward_zero = thirds_in(FE_TOWARDZERO);
  ASSERT_FALSE(upward == nearest || downward == toward_zero || upward == downward);
  Rounding rounding;
  Context main;
  std::fesetround(FE_UPWARD); // a fresh context starts with the control state of its preparer
  TestFiber f(round_toward_zero, &rounding);
  std::fesetround(FE_TONEAREST);
  rounding.self = &f;
  f.resume(main);
  EXPECT_EQ(rounding.mode_at_entry, FE_UPWARD);
  EXPECT_TRUE(rounding.thirds_at_entry == upward);
  EXPECT_EQ(std::fegetround(), FE_TONEAREST) << "the fiber's rounding mode leaked out";
  EXPECT_TRUE(thirds() == nearest) << "the fiber's MXCSR leaked out";
  std::fesetround(FE_DOWNWARD);
  f.resume(main);
  EXPECT_EQ(rounding.mode_after_resume, FE_TOWARDZERO) << "the main context's mode leaked in";
  EXPECT_TRUE(rounding.thirds_after_resume == toward_zero) << "the main context's MXCSR leaked in";
  EXPECT_EQ(std::fegetround(), FE_DOWNWARD);
  EXPECT_TRUE(thirds() == downward);
  std::fesetround(FE_TONEAREST);
}

// ------------------------------------------------------------------ stacks

struct StackUser {
  TestFiber *self = nullptr;
  bool aligned = false;
  uint64_t sum = 0;
};

// Recursion deep enough to use tens of KiB of the fiber's own stack.
__attribute__((noinline)) uint64_t sum_down(int depth) {
  if (depth == 0)
    return 0;
  volatile char frame[512];
  for (auto &byte : frame)
    byte = static_cast<char>(depth & 0x7f);
  const uint64_t below = sum_down(depth - 1);
  return static_cast<uint64_t>(frame[depth % sizeof frame]) + below;
}

__attribute__((noinline)) bool sixteen_byte_aligned() {
  alignas(16) volatile unsigned char buffer[16] = {};
  return (reinterpret_cast<uintptr_t>(&buffer[0]) & 15) == 0;
}

void use_the_stack(void *arg) {
  auto &u = *static_cast<StackUser *>(arg);
  u.self->entered();
  u.aligned = sixteen_byte_aligned();
  u.self->yield();
  u.sum = sum_down(100);
  u.self->yield();
  std::abort();
}

TEST(FiberSwitch, EntryRunsOnItsOwnAlignedStack) {
  StackUser user;
  TestFiber f(use_the_stack, &user);
  user.self = &f;
  Context main;
  f.resume(main);
  EXPECT_TRUE(user.aligned);
  f.resume(main);
  uint64_t expected = 0;
  for (int depth = 1; depth <= 100; ++depth)
    expected += static_cast<uint64_t>(depth & 0x7f);
  EXPECT_EQ(user.sum, expected);
}

// ------------------------------------------------------------------ many contexts

struct Member {
  TestFiber *self = nullptr;
  std::vector<int> *log = nullptr;
  int index = 0;
};

void log_three_turns(void *arg) {
  auto &m = *static_cast<Member *>(arg);
  m.self->entered();
  for (int turn = 0; turn < 3; ++turn) {
    m.log->push_back(turn * 100 + m.index);
    m.self->yield();
  }
  std::abort();
}

TEST(FiberSwitch, ManyContextsTakeTurnsInOrder) {
  constexpr int kMembers = 32;
  std::vector<int> log;
  std::vector<Member> members(kMembers);
  std::vector<std::unique_ptr<TestFiber>> fibers;
  for (int i = 0; i < kMembers; ++i) {
    members[i].log = &log;
    members[i].index = i;
    fibers.push_back(std::make_unique<TestFiber>(log_three_turns, &members[i]));
    members[i].self = fibers.back().get();
  }
  Context main;
  for (int turn = 0; turn < 3; ++turn)
    for (auto &f : fibers)
      f->resume(main);
  ASSERT_EQ(log.size(), size_t{3 * kMembers});
  for (int turn = 0; turn < 3; ++turn)
    for (int i = 0; i < kMembers; ++i)
      EXPECT_EQ(log[turn * kMembers + i], turn * 100 + i);
}

} // namespace
