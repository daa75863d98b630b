// One simulated accelerator: configuration, DDR, clusters and the device-wide part of
// modeled time. Knows nothing of OpenCL.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "manycl/device/cluster.h"
#include "manycl/device/config.h"
#include "manycl/device/ddr.h"
#include "manycl/device/time_model.h"

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
  TimeModel &time_model() { return time_model_; }
  // The DDR domain of the whole device: commands of the device itself reserve its calendar.
  Arbiter &ddr_domain() { return *whole_; }
  // The DDR domain of a partition of the device (a sub-device's clusters, any order): its own
  // calendar with `share` (0..1] of the DDR bandwidth, created on first use. All the
  // clusters with the whole bandwidth: the whole device's domain.
  Arbiter &ddr_domain(const std::vector<unsigned> &clusters, double share);
  // Process-wide number of this device (0, 1, ... in creation order): names its trace
  // process and its statistics.
  unsigned index() const { return index_; }

private:
  DeviceConfig config_;
  Ddr ddr_;
  std::vector<std::unique_ptr<Cluster>> clusters_;
  TimeModel time_model_;
  std::unique_ptr<Arbiter> whole_;
  std::mutex domains_mutex_;
  std::map<std::pair<std::vector<unsigned>, double>, std::unique_ptr<Arbiter>> domains_;
  unsigned index_;
};

} // namespace manycl::device
