#include "fiber.h"

#include <cstdint>
#include <cstring>

#if !defined(__x86_64__)
#error "ManyCL fibers: only x86-64 is implemented"
#endif

// Stack layout expected by manycl_fiber_switch (from the saved sp upwards):
//   [sp+0]  mxcsr (4 bytes) | x87 control word (2 bytes)
//   [sp+8]  r15  [sp+16] r14  [sp+24] r13  [sp+32] r12  [sp+40] rbx
//   [sp+48] rbp  [sp+56] return address
asm(R"(
  .text
  .globl manycl_fiber_switch
  .hidden manycl_fiber_switch
  .type manycl_fiber_switch,@function
manycl_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size manycl_fiber_switch, .-manycl_fiber_switch

  .globl manycl_fiber_start
  .hidden manycl_fiber_start
  .type manycl_fiber_start,@function
manycl_fiber_start:
  movq %rbx, %rdi
  callq *%r12
  ud2
  .size manycl_fiber_start, .-manycl_fiber_start
)");

extern "C" void manycl_fiber_start();

namespace manycl::compiler::detail {

void *fiberInitStack(void *base, size_t size, void (*fn)(void *), void *arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(base) + size) & ~uintptr_t(15);
  uintptr_t a = top - 16; // rsp after 'ret' into manycl_fiber_start: 16-aligned
  auto *sp = reinterpret_cast<uint64_t *>(a - 64);
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  std::memset(sp, 0, 64);
  std::memcpy(reinterpret_cast<char *>(sp), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char *>(sp) + 4, &fcw, 2);
  sp[4] = reinterpret_cast<uint64_t>(fn);  // r12
  sp[5] = reinterpret_cast<uint64_t>(arg); // rbx
  sp[6] = 0;                               // rbp
  sp[7] = reinterpret_cast<uint64_t>(&manycl_fiber_start);
  return sp;
}

} // namespace manycl::compiler::detail
