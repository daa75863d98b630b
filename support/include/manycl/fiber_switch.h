// Execution contexts on stacks of their own, switched in user space. glibc's swapcontext
// saves and restores the signal mask with an rt_sigprocmask system call on every switch;
// these switches make none. On x86-64 a switch saves the SysV callee-saved registers, the
// MXCSR and the x87 control word on the running stack and moves the stack pointer (about a
// function call's cost); elsewhere (or with MANYCL_FIBER_UCONTEXT defined) they fall back to
// getcontext/makecontext/swapcontext. The signal mask is not part of a context: a fiber sees
// its thread's.
//
// A switch is invisible to the sanitizers: callers annotate it
// (__sanitizer_start/finish_switch_fiber for ASan, __tsan_switch_to_fiber for TSan).
#pragma once

#include <cstddef>

#if defined(__x86_64__) && !defined(MANYCL_FIBER_UCONTEXT)
#define MANYCL_FIBER_SWITCH_ASM 1
#else
#include <ucontext.h>
#endif

#ifdef MANYCL_FIBER_SWITCH_ASM
// Pushes the callee-saved state on the running stack, stores the stack pointer in *from and
// resumes the context saved at stack pointer `to` (fiber_switch.cpp).
extern "C" void manycl_fiber_switch(void **from, void *to);
#endif

namespace manycl::fiber {

// Where a suspended context resumes. Only this thread's switch_to() writes it.
struct Context {
#ifdef MANYCL_FIBER_SWITCH_ASM
  void *sp = nullptr; // the saved state sits at the top of the suspended stack
#else
  ucontext_t uc;
#endif
};

// Makes `fresh` a context that, on the first switch to it, calls entry(arg) on the stack
// [stack_base, stack_base + stack_size). `entry` must never return: it ends by switching away
// for good. The floating-point control state starts as the caller's.
void prepare(Context &fresh, void *stack_base, size_t stack_size, void (*entry)(void *), void *arg);

// Saves the running context in `from` and resumes `to` (prepared, or saved by an earlier
// switch_to on this thread). Returns when something switches back to `from`.
#ifdef MANYCL_FIBER_SWITCH_ASM
inline void switch_to(Context &from, const Context &to) {
  manycl_fiber_switch(&from.sp, to.sp);
}
#else
void switch_to(Context &from, const Context &to);
#endif

} // namespace manycl::fiber
