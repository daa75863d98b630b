#include "manycl/device/host_placement.h"

#include <cstdlib>
#include <hwloc.h>

#include "manycl/env.h"

namespace manycl::device {

struct HostPlacement::Impl {
  hwloc_topology_t topology = nullptr;
  unsigned pus = 1;
  bool synthetic = false;
};

HostPlacement::HostPlacement(const std::string &synthetic) : impl_(std::make_unique<Impl>()) {
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
  int n = hwloc_get_nbobjs_by_type(impl_->topology, HWLOC_OBJ_PU);
  impl_->pus = n > 0 ? static_cast<unsigned>(n) : 1;
}

HostPlacement::~HostPlacement() {
  if (impl_->topology)
    hwloc_topology_destroy(impl_->topology);
}

unsigned HostPlacement::host_pus() const {
  return impl_->pus;
}

std::pair<unsigned, unsigned> HostPlacement::pu_range(unsigned cluster, unsigned clusters) const {
  if (clusters == 0 || impl_->pus < clusters || cluster >= clusters)
    return {0, 0};
  unsigned per = impl_->pus / clusters;
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
