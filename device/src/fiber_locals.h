// The device's thread-local state that belongs to whatever runs on a thread: a cluster's
// cooperative fiber carries its own copy, swapped in when the fiber resumes on its worker and
// out when it yields (host_pool.cpp). Each part is swapped by the file that owns it.
#pragma once

#include <string>

namespace manycl::device {

class Cluster;
class ClusterContext;

struct FiberLocals {
  ClusterContext *context = nullptr; // command.cpp: current cluster context
  void *pe_scope = nullptr;          // command.cpp: the modeled PE of a parallel_for slice
  const Cluster *cluster = nullptr;  // cluster.cpp: the cluster whose job runs here
  std::string last_error;            // device_api.cpp: mcl_last_error()
  bool inside_task = false;          // host_pool.cpp: a team member runs as a task
};

// Exchanges the calling thread's values with `saved`.
void swap_command_locals(FiberLocals &saved);
void swap_cluster_locals(FiberLocals &saved);
void swap_api_locals(FiberLocals &saved);
void swap_pool_locals(FiberLocals &saved);

inline void swap_fiber_locals(FiberLocals &saved) {
  swap_command_locals(saved);
  swap_cluster_locals(saved);
  swap_api_locals(saved);
  swap_pool_locals(saved);
}

} // namespace manycl::device
