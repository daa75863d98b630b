#include "manycl/device/device.h"

namespace manycl::device {

Device::Device(DeviceConfig config) : config_(std::move(config)), ddr_(config_.ddr_bytes) {
  for (unsigned i = 0; i < config_.clusters; ++i)
    clusters_.push_back(std::make_unique<Cluster>(i, config_.clusters, config_.pes_per_cluster,
                                                  config_.spm_bytes));
}

} // namespace manycl::device
