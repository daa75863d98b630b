// MANYCL_NATIVE_PROFILE=1: host time per kind of native call (function, precision, shape
// class), printed to stderr when the process exits. A developer's view of where an
// inference's host time goes by layer shape, which whole-process profiles cannot tell apart.
#pragma once

#include <cstdint>

namespace manycl::native {

bool call_profile_enabled();
// The calling thread's CPU time (ns).
uint64_t call_profile_thread_cpu_ns();
// One finished call: its wall and calling-thread CPU time, and the multiply-accumulates the
// operation needs.
void call_profile_record(uint32_t fn, const void *args, uint64_t host_ns, uint64_t cpu_ns,
                         uint64_t macs);

} // namespace manycl::native
