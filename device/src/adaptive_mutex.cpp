#include "manycl/device/adaptive_mutex.h"

#include <pthread.h>

namespace manycl::device {

void make_adaptive([[maybe_unused]] std::mutex &fresh) {
#if defined(__GLIBC__) && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0)
    return;
  if (pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP) == 0) {
    pthread_mutex_destroy(fresh.native_handle());
    pthread_mutex_init(fresh.native_handle(), &attr);
  }
  pthread_mutexattr_destroy(&attr);
#endif
}

} // namespace manycl::device
