// Host placement: the host pool is sized from the CPUs the process may run on (the scheduler's
// affinity mask), whatever hwloc can see of the machine; a synthetic topology replaces the
// host for placement tests.
#include <sched.h>

#include <gtest/gtest.h>

#include <thread>

#include "manycl/device/host_placement.h"
#include "manycl/device/host_pool.h"

using manycl::device::HostPlacement;

namespace {
unsigned allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return static_cast<unsigned>(CPU_COUNT(&set));
}

// Restricts the calling thread to the first CPU it may run on, as `taskset -c N` would.
bool restrict_to_first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return false;
  int first = 0;
  while (!CPU_ISSET(first, &set))
    ++first;
  CPU_ZERO(&set);
  CPU_SET(first, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}
} // namespace

TEST(HostPlacement, CountsTheCpusTheProcessMayUse) {
  HostPlacement placement;
  EXPECT_EQ(placement.host_pus(), allowed_cpus());
}

TEST(HostPlacement, FollowsARestrictedAffinityMask) {
  // On a thread restricted to one CPU (as `taskset -c N` restricts a process), a placement
  // made there sees one CPU and binds nothing.
  unsigned seen = 0;
  std::pair<unsigned, unsigned> range{1, 1};
  std::thread restricted([&] {
    ASSERT_TRUE(restrict_to_first_allowed_cpu());
    HostPlacement placement;
    seen = placement.host_pus();
    range = placement.pu_range(0, 2);
  });
  restricted.join();
  EXPECT_EQ(seen, 1u);
  EXPECT_EQ(range, (std::pair<unsigned, unsigned>{0, 0})); // fewer CPUs than clusters
}

TEST(HostPlacement, SyntheticTopologySplitsPusAmongClusters) {
  HostPlacement placement("pack:2 core:4 pu:2");
  ASSERT_EQ(placement.host_pus(), 16u);
  EXPECT_EQ(placement.pu_range(0, 5), (std::pair<unsigned, unsigned>{0, 3}));
  EXPECT_EQ(placement.pu_range(4, 5), (std::pair<unsigned, unsigned>{12, 15}));
  EXPECT_EQ(placement.pu_range(0, 32), (std::pair<unsigned, unsigned>{0, 0}));
  EXPECT_FALSE(placement.bind_current_thread(0, 5)); // synthetic: never binds the real host
}

TEST(HostPlacement, PoolWorkersMadeFromABoundThreadUseEveryCpu) {
  // A cluster thread binds itself to its PUs; the process-wide pool may be created from such
  // a thread, and its workers (which serve every cluster) must not inherit that binding: on a
  // 16-core host they all ran on one cluster's core.
  const unsigned all = manycl::device::HostPlacement::host().host_pus();
  if (all < 2)
    GTEST_SKIP() << "needs a host with at least 2 CPUs";
  unsigned bound_here = 0, on_worker = 0;
  std::thread bound([&] {
    ASSERT_TRUE(restrict_to_first_allowed_cpu());
    bound_here = allowed_cpus();
    manycl::device::HostPool pool(2);
    pool.run_cooperative(0, [&] { on_worker = allowed_cpus(); });
  });
  bound.join();
  EXPECT_EQ(bound_here, 1u);
  EXPECT_EQ(on_worker, all);
}
