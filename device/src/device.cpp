#include "manycl/device/device.h"

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
  Reports::instance().register_device(index_, config_.name, config_.clusters, config_.clock_hz);
}

} // namespace manycl::device
