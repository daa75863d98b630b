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

  // The CPUs the process may run on (its affinity mask when the placement was made), or the
  // PUs of the synthetic topology.
  unsigned host_pus() const;
  // The first and one-past-last host PU index given to `cluster` of `clusters`, when the
  // host has at least as many PUs as clusters; otherwise {0, 0}: no binding.
  std::pair<unsigned, unsigned> pu_range(unsigned cluster, unsigned clusters) const;
  // Binds the calling thread to the PUs of pu_range(); returns false when nothing was bound.
  bool bind_current_thread(unsigned cluster, unsigned clusters) const;
  // Gives the calling thread every CPU the process could use when this placement was made.
  // Threads inherit their creator's binding: a thread that serves all clusters (a host pool
  // worker) calls this first, or a pool created from a bound cluster thread would run on
  // that cluster's PUs alone.
  bool unbind_current_thread() const;

  static const HostPlacement &host();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace manycl::device
