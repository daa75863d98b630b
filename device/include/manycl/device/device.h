// One simulated accelerator: configuration, DDR and clusters. Knows nothing of OpenCL.
#pragma once

#include <memory>
#include <vector>

#include "manycl/device/cluster.h"
#include "manycl/device/config.h"
#include "manycl/device/ddr.h"

namespace manycl::device {

class Device {
public:
  explicit Device(DeviceConfig config);
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  const DeviceConfig &config() const { return config_; }
  Ddr &ddr() { return ddr_; }
  unsigned cluster_count() const { return static_cast<unsigned>(clusters_.size()); }
  Cluster &cluster(unsigned index) { return *clusters_[index]; }

private:
  DeviceConfig config_;
  Ddr ddr_;
  std::vector<std::unique_ptr<Cluster>> clusters_;
};

} // namespace manycl::device
