// Where the simulator's host threads run. Host placement is an implementation detail of the
// simulator, never a device property: nothing here feeds a device-visible limit.
#pragma once

#include <memory>
#include <string>

namespace manycl::device {

class HostPlacement {
public:
  // Loads the host topology with hwloc (its OpenCL component disabled: it would enumerate
  // OpenCL platforms through the loader from inside our own initialization). A non-empty
  // `synthetic` description (hwloc syntax, e.g. "pack:2 core:4 pu:1") replaces the real
  // host, which makes placement testable.
  explicit HostPlacement(const std::string &synthetic = "");
  ~HostPlacement();
  HostPlacement(const HostPlacement &) = delete;
  HostPlacement &operator=(const HostPlacement &) = delete;

  unsigned host_pus() const;
  // The first and one-past-last host PU index given to `cluster` of `clusters`, when the
  // host has at least as many PUs as clusters; otherwise {0, 0}: no binding.
  std::pair<unsigned, unsigned> pu_range(unsigned cluster, unsigned clusters) const;
  // Binds the calling thread to the PUs of pu_range(); returns false when nothing was bound.
  bool bind_current_thread(unsigned cluster, unsigned clusters) const;

  static const HostPlacement &host();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace manycl::device
