// An OpenCL device: a root simulated accelerator or a sub-device owning a disjoint subset of
// its clusters. Commands sent to a device run on its clusters only.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include <CL/cl.h>

#include "manycl/device/device.h"
#include "manycl/result.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

class Device : public Object<Device, _cl_device_id, Kind::Device> {
public:
  // A root device covering all clusters of `hardware`.
  explicit Device(device::Device &hardware);
  // A sub-device of `parent` owning `pes[i]` PEs of cluster `clusters[i]` (indices into the
  // hardware's clusters). Only LWI sub-devices own part of a cluster.
  Device(Device *parent, std::vector<unsigned> clusters, std::vector<unsigned> pes,
         std::vector<cl_device_partition_property> partition_type);
  ~Device();

  bool is_root() const { return parent_ == nullptr; }
  Device *parent() const { return parent_; }
  Device *root() { return parent_ ? parent_->root() : this; }
  device::Device &hardware() const { return hardware_; }
  const device::DeviceConfig &config() const { return hardware_.config(); }
  const std::vector<unsigned> &clusters() const { return clusters_; }
  // Where its commands reserve DDR time. A sub-device owns the share of the DDR bandwidth
  // of its clusters (K of N clusters: K/N), fixed, so that its modeled time does not depend
  // on what the other sub-devices run meanwhile (docs/device-model.md, "Determinism").
  device::Arbiter &ddr_domain() const { return *ddr_domain_; }
  unsigned compute_units() const;
  // The PEs this device may use on hardware cluster `cluster` (0 when not one of its clusters).
  unsigned pes_on(unsigned cluster) const;
  // Whether every cluster of the device is wholly its own (kann programs need whole clusters).
  bool owns_whole_clusters() const;

  // Picks the cluster that runs the next command: the least busy one, round-robin on ties.
  device::Cluster &pick_cluster();

  cl_int info(cl_device_info param, size_t size, void *value, size_t *size_ret);

  // clCreateSubDevices: validates `properties` and creates the sub-devices (API refcount 1
  // each), or returns the error code the specification names.
  Result<std::vector<Device *>> partition(const cl_device_partition_property *properties);

  // Held while one command's jobs are submitted to several clusters that must run it
  // together (they synchronize with each other): every cluster then sees such commands in
  // the same order, so two of them can never wait for each other.
  std::mutex &gang_submit_mutex() { return root()->gang_submit_mutex_; }

  // Root devices are not reference counted by the application.
  void retain_device();
  bool release_device();

private:
  struct Share {
    std::vector<unsigned> clusters, pes;
  };
  Result<std::vector<Share>> plan_partition(const cl_device_partition_property *properties,
                                            std::vector<cl_device_partition_property> &type);

  device::Device &hardware_;
  Device *parent_ = nullptr;
  std::vector<unsigned> clusters_;
  std::vector<unsigned> pes_; // PEs owned on each of clusters_
  std::vector<cl_device_partition_property> partition_type_;
  device::Arbiter *ddr_domain_;
  std::atomic<unsigned> next_cluster_{0};
  std::mutex gang_submit_mutex_;
};

// Whether `device` is one of ours and alive; a sub-device counts as valid until released.
Device *checked_device(cl_device_id device);

} // namespace manycl::rt
