#include "manycl/device/host_placement.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <hwloc.h>
#include <thread>

#include "manycl/env.h"

namespace manycl::device {

struct HostPlacement::Impl {
  hwloc_topology_t topology = nullptr;
  cpu_set_t *allowed = nullptr; // the CPUs the process could use before any binding
  size_t allowed_bytes = 0;
  unsigned pus = 1;       // CPUs the process may run on
  unsigned placeable = 0; // PUs hwloc can bind to (0: none)
  bool synthetic = false;
};

namespace {
// The CPUs the calling thread may run on (taskset, cgroup cpusets). hwloc can see fewer than
// that (a virtual machine whose /sys it cannot read reports one PU), so the count comes
// from the scheduler, not from the topology.
void read_allowed(cpu_set_t *&set, size_t &bytes) {
  for (size_t cpus = 1024; cpus <= (size_t{1} << 16); cpus *= 2) {
    set = CPU_ALLOC(cpus);
    if (!set)
      return;
    bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0)
      return;
    CPU_FREE(set);
    set = nullptr;
    bytes = 0;
    if (errno != EINVAL)
      return; // EINVAL: the kernel's mask is larger than ours, try a larger one
  }
}
} // namespace

HostPlacement::HostPlacement(const std::string &synthetic) : impl_(std::make_unique<Impl>()) {
  read_allowed(impl_->allowed, impl_->allowed_bytes);
  const int allowed = impl_->allowed ? CPU_COUNT_S(impl_->allowed_bytes, impl_->allowed) : 0;
  impl_->pus = allowed > 0 ? static_cast<unsigned>(allowed)
                           : std::max(1u, std::thread::hardware_concurrency());
  // A synthetic topology replaces the count below.
  if (hwloc_topology_init(&impl_->topology) != 0) {
    impl_->topology = nullptr;
    return;
  }
  hwloc_topology_set_components(impl_->topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                "opencl");
  if (!synthetic.empty()) {
    impl_->synthetic = hwloc_topology_set_synthetic(impl_->topology, synthetic.c_str()) == 0;
  }
  if (hwloc_topology_load(impl_->topology) != 0) {
    hwloc_topology_destroy(impl_->topology);
    impl_->topology = nullptr;
    return;
  }
  // A synthetic topology is the host; a real one only places threads: the count of CPUs the
  // process may use stays the scheduler's (binding never uses a PU index past hwloc's own).
  const int n = hwloc_get_nbobjs_by_type(impl_->topology, HWLOC_OBJ_PU);
  if (impl_->synthetic)
    impl_->pus = n > 0 ? static_cast<unsigned>(n) : 1;
  else if (n > 0)
    impl_->placeable = static_cast<unsigned>(n);
}

HostPlacement::~HostPlacement() {
  if (impl_->topology)
    hwloc_topology_destroy(impl_->topology);
  if (impl_->allowed)
    CPU_FREE(impl_->allowed);
}

bool HostPlacement::unbind_current_thread() const {
  if (!impl_->allowed || impl_->synthetic)
    return false;
  return sched_setaffinity(0, impl_->allowed_bytes, impl_->allowed) == 0;
}

unsigned HostPlacement::host_pus() const {
  return impl_->pus;
}

std::pair<unsigned, unsigned> HostPlacement::pu_range(unsigned cluster, unsigned clusters) const {
  const unsigned pus = impl_->synthetic ? impl_->pus : std::min(impl_->pus, impl_->placeable);
  if (clusters == 0 || pus < clusters || cluster >= clusters)
    return {0, 0};
  unsigned per = pus / clusters;
  return {cluster * per, (cluster + 1) * per};
}

bool HostPlacement::bind_current_thread(unsigned cluster, unsigned clusters) const {
  if (!impl_->topology || impl_->synthetic)
    return false;
  if (const char *bind = env::get("MANYCL_BIND"); bind && bind[0] == '0')
    return false;
  auto [first, last] = pu_range(cluster, clusters);
  if (first == last)
    return false;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (unsigned i = first; i < last; ++i) {
    hwloc_obj_t pu = hwloc_get_obj_by_type(impl_->topology, HWLOC_OBJ_PU, i);
    if (pu && pu->cpuset)
      hwloc_bitmap_or(set, set, pu->cpuset);
  }
  bool ok = hwloc_set_cpubind(impl_->topology, set, HWLOC_CPUBIND_THREAD) == 0;
  hwloc_bitmap_free(set);
  return ok;
}

const HostPlacement &HostPlacement::host() {
  // Never destroyed: cluster threads are never joined and may still be starting (and
  // binding themselves) while exit() runs static destructors.
  static const HostPlacement *placement = new HostPlacement();
  return *placement;
}

} // namespace manycl::device
