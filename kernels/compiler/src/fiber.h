// Minimal fibers with a hand-written x86-64 context switch (no syscalls).
#pragma once
#include <cstddef>

namespace manycl::compiler::detail {

/// Saves callee-saved state on the current stack, stores the stack pointer
/// in *from, and resumes the context whose stack pointer is `to`.
extern "C" void manycl_fiber_switch(void **from, void *to);

/// Prepares a fresh stack [base, base+size) so that switching to the
/// returned stack pointer calls fn(arg) (fn must never return).
void *fiberInitStack(void *base, size_t size, void (*fn)(void *), void *arg);

} // namespace manycl::compiler::detail
