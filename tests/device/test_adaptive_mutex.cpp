// make_adaptive: the mutex becomes glibc's adaptive type and still excludes and waits as a
// std::mutex with std::unique_lock and std::condition_variable.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>

#include "manycl/device/adaptive_mutex.h"

using manycl::device::make_adaptive;

TEST(AdaptiveMutex, IsTheAdaptiveTypeWhereTheLibraryHasIt) {
#if defined(__GLIBC__) && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
  std::mutex plain, adaptive;
  make_adaptive(adaptive);
  // glibc keeps the type in the mutex itself (the kind a mutex attribute sets).
  EXPECT_EQ(plain.native_handle()->__data.__kind & 0x7f, PTHREAD_MUTEX_TIMED_NP);
  EXPECT_EQ(adaptive.native_handle()->__data.__kind & 0x7f, PTHREAD_MUTEX_ADAPTIVE_NP);
#else
  GTEST_SKIP() << "no adaptive mutexes in this C library";
#endif
}

TEST(AdaptiveMutex, ExcludesAndWaitsLikeAStdMutex) {
  std::mutex mutex;
  make_adaptive(mutex);
  std::condition_variable turn_changed;
  constexpr unsigned kThreads = 4, kRounds = 2000;
  unsigned turn = 0;
  uint64_t counter = 0; // plain: only the mutex keeps the increments whole
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (unsigned r = 0; r < kRounds; ++r) {
        std::unique_lock lock(mutex);
        turn_changed.wait(lock, [&] { return turn % kThreads == t; }); // strict rotation
        ++counter;
        ++turn;
        turn_changed.notify_all();
      }
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(turn, kThreads * kRounds);
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}
