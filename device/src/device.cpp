#include "manycl/device/device.h"

#include <algorithm>
#include <atomic>

#include "manycl/device/report.h"

namespace manycl::device {

namespace {
std::atomic<unsigned> next_device_index{0};
}

Device::Device(DeviceConfig config)
    : config_(std::move(config)), ddr_(config_.ddr_bytes), time_model_(config_.clusters),
      index_(next_device_index.fetch_add(1)) {
  for (unsigned i = 0; i < config_.clusters; ++i)
    clusters_.push_back(
        std::make_unique<Cluster>(i, config_.clusters, config_.pes_per_cluster, config_.spm_bytes));
  whole_ = std::make_unique<Arbiter>(config_.ddr_bytes_per_cycle, config_.clusters);
  Reports::instance().register_device(index_, config_.name, config_.clusters, config_.clock_hz);
}

Arbiter &Device::ddr_domain(const std::vector<unsigned> &clusters, double share) {
  std::vector<unsigned> key = clusters;
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  share = std::clamp(share, 1e-6, 1.0);
  if (key.empty() || (key.size() >= clusters_.size() && share == 1.0))
    return *whole_;
  std::lock_guard lock(domains_mutex_);
  auto &domain = domains_[{key, share}];
  if (!domain)
    domain = std::make_unique<Arbiter>(config_.ddr_bytes_per_cycle * share, cluster_count());
  return *domain;
}

} // namespace manycl::device
