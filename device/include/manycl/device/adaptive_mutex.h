// Mutexes that spin for a short while on a held lock before they sleep in the kernel (glibc's
// adaptive mutex type). The simulator's shared state (the arbiter of each DDR domain, the host
// pool's queues) is taken by every cluster's fiber for a few hundred nanoseconds at a time,
// from as many host threads as cores: a plain mutex put the losing thread to sleep and woke it
// again, two context switches and a cross-core wake-up where a short wait would do (about 30
// futex sleeps per MobileNetV2 inference on two workers, most of the workers' context
// switches).
#pragma once

#include <mutex>

namespace manycl::device {

// Makes `fresh`, a mutex just constructed and not used yet, adaptive where the C library has
// the type; it stays a std::mutex for std::unique_lock and std::condition_variable.
void make_adaptive(std::mutex &fresh);

} // namespace manycl::device
