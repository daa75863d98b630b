#include "manycl/fiber_switch.h"

#include <cstdint>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#define MANYCL_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MANYCL_FIBER_ASAN 1
#endif
#endif
#ifdef MANYCL_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {
// A stack being reused (or mapped where an unmapped one was) may still carry the poisoned
// redzones of frames its last context never returned from; glibc's swapcontext, which ASan
// intercepts, cleared them at every switch. A fresh context starts with none.
void forget_old_frames([[maybe_unused]] void *stack_base, [[maybe_unused]] size_t stack_size) {
#ifdef MANYCL_FIBER_ASAN
  __asan_unpoison_memory_region(stack_base, stack_size);
#endif
}
} // namespace

#ifdef MANYCL_FIBER_SWITCH_ASM

// A suspended context's stack, from its saved stack pointer upwards:
//   [sp+0]  MXCSR (4 bytes) | x87 control word (2 bytes)
//   [sp+8]  r15  [sp+16] r14  [sp+24] r13  [sp+32] r12  [sp+40] rbx
//   [sp+48] rbp  [sp+56] return address
// These are what the SysV x86-64 ABI makes a callee preserve; everything else the caller of
// manycl_fiber_switch has already given up, as for any call.
asm(R"(
  .text
  .globl manycl_fiber_switch
  .hidden manycl_fiber_switch
  .type manycl_fiber_switch,@function
manycl_fiber_switch:
  .cfi_startproc
  pushq %rbp
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %rbp, 0
  pushq %rbx
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %rbx, 0
  pushq %r12
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %r12, 0
  pushq %r13
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %r13, 0
  pushq %r14
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %r14, 0
  pushq %r15
  .cfi_adjust_cfa_offset 8
  .cfi_rel_offset %r15, 0
  subq $8, %rsp
  .cfi_adjust_cfa_offset 8
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  .cfi_adjust_cfa_offset -8
  popq %r15
  .cfi_adjust_cfa_offset -8
  popq %r14
  .cfi_adjust_cfa_offset -8
  popq %r13
  .cfi_adjust_cfa_offset -8
  popq %r12
  .cfi_adjust_cfa_offset -8
  popq %rbx
  .cfi_adjust_cfa_offset -8
  popq %rbp
  .cfi_adjust_cfa_offset -8
  ret
  .cfi_endproc
  .size manycl_fiber_switch, .-manycl_fiber_switch

  .globl manycl_fiber_start
  .hidden manycl_fiber_start
  .type manycl_fiber_start,@function
manycl_fiber_start:
  .cfi_startproc
  .cfi_undefined %rip
  movq %rbx, %rdi
  callq *%r12
  ud2
  .cfi_endproc
  .size manycl_fiber_start, .-manycl_fiber_start
)");

// The first switch to a prepared context "returns" here, with entry in r12 and arg in rbx.
extern "C" void manycl_fiber_start();

namespace manycl::fiber {

void prepare(Context &fresh, void *stack_base, size_t stack_size, void (*entry)(void *),
             void *arg) {
  forget_old_frames(stack_base, stack_size);
  const uintptr_t top = (reinterpret_cast<uintptr_t>(stack_base) + stack_size) & ~uintptr_t(15);
  // After the 'ret' into manycl_fiber_start rsp is top - 16: 16-byte aligned, as at a call
  // site, so the call there gives entry the ABI's alignment.
  auto *sp = reinterpret_cast<uint64_t *>(top - 16 - 64);
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  std::memset(sp, 0, 64);
  std::memcpy(reinterpret_cast<char *>(sp), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char *>(sp) + 4, &fcw, 2);
  sp[4] = reinterpret_cast<uint64_t>(entry); // r12
  sp[5] = reinterpret_cast<uint64_t>(arg);   // rbx
  sp[6] = 0;                                 // rbp: the end of a frame-pointer walk
  sp[7] = reinterpret_cast<uint64_t>(&manycl_fiber_start);
  fresh.sp = sp;
}

} // namespace manycl::fiber

#else // the portable fallback

namespace manycl::fiber {

namespace {
// makecontext passes int arguments only: the entry and its argument travel as 32-bit halves.
using Entry = void (*)(void *);
unsigned half(uintptr_t value, int which) {
  return static_cast<unsigned>(static_cast<uint64_t>(value) >> (which * 32));
}
uintptr_t join(unsigned lo, unsigned hi) {
  return static_cast<uintptr_t>((uint64_t{hi} << 32) | lo);
}
void start(unsigned entry_lo, unsigned entry_hi, unsigned arg_lo, unsigned arg_hi) {
  reinterpret_cast<Entry>(join(entry_lo, entry_hi))(reinterpret_cast<void *>(join(arg_lo, arg_hi)));
  __builtin_trap(); // entry never returns
}
} // namespace

void prepare(Context &fresh, void *stack_base, size_t stack_size, void (*entry)(void *),
             void *arg) {
  forget_old_frames(stack_base, stack_size);
  getcontext(&fresh.uc);
  fresh.uc.uc_stack.ss_sp = stack_base;
  fresh.uc.uc_stack.ss_size = stack_size;
  fresh.uc.uc_link = nullptr;
  const auto entry_bits = reinterpret_cast<uintptr_t>(entry);
  const auto arg_bits = reinterpret_cast<uintptr_t>(arg);
  makecontext(&fresh.uc, reinterpret_cast<void (*)()>(&start), 4, half(entry_bits, 0),
              half(entry_bits, 1), half(arg_bits, 0), half(arg_bits, 1));
}

void switch_to(Context &from, const Context &to) {
  swapcontext(&from.uc, &to.uc);
}

} // namespace manycl::fiber

#endif
