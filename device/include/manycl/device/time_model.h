// The device-wide part of modeled time: the cycle at which each cluster becomes free between
// commands, and the calendar of the DDR, whose bandwidth all clusters share.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace manycl::device {

// Ceil(bytes / bytes_per_cycle), the cycles a link of that bandwidth needs for `bytes`.
uint64_t transfer_cycles(uint64_t bytes, double bytes_per_cycle);

class TimeModel {
public:
  explicit TimeModel(unsigned clusters);

  // Reserves `cycles` of DDR time, not before `not_before`, filling the gaps between earlier
  // reservations (a transfer's DDR time may be split around others: the DDR interleaves
  // requests). Returns the cycle at which the last of them is served.
  uint64_t reserve_ddr(uint64_t not_before, uint64_t cycles);

  // The cycle at which cluster `c` finished its last command.
  uint64_t cluster_time(unsigned c) const;
  void set_cluster_time(unsigned c, uint64_t cycle);
  // Latest cluster time: the device's modeled "now" once all commands finished.
  uint64_t device_time() const;

  // Number of separate busy intervals in the DDR calendar (for tests of its bound).
  size_t ddr_intervals() const;

private:
  mutable std::mutex mutex_;
  std::vector<uint64_t> cluster_time_;
  std::map<uint64_t, uint64_t> ddr_busy_; // start -> end, disjoint, not adjacent
};

} // namespace manycl::device
