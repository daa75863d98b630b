#include "manycl/device/time_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace manycl::device {

namespace {
// The calendar only needs the recent past: commands start at or after the time their
// clusters reached. Beyond this many intervals the oldest are forgotten (treated as free),
// which bounds memory on long runs at the price of slightly optimistic contention for a
// cluster that lags far behind the others.
constexpr size_t kMaxDdrIntervals = 1 << 16;
} // namespace

uint64_t transfer_cycles(uint64_t bytes, double bytes_per_cycle) {
  if (bytes == 0)
    return 0;
  double cycles = std::ceil(static_cast<double>(bytes) / bytes_per_cycle);
  return cycles < 1 ? 1 : static_cast<uint64_t>(cycles);
}

TimeModel::TimeModel(unsigned clusters) : cluster_time_(clusters, 0) {}

uint64_t TimeModel::cluster_time(unsigned c) const {
  std::lock_guard lock(mutex_);
  return c < cluster_time_.size() ? cluster_time_[c] : 0;
}

void TimeModel::set_cluster_time(unsigned c, uint64_t cycle) {
  std::lock_guard lock(mutex_);
  if (c < cluster_time_.size())
    cluster_time_[c] = cycle;
}

uint64_t TimeModel::device_time() const {
  std::lock_guard lock(mutex_);
  return cluster_time_.empty() ? 0 : *std::max_element(cluster_time_.begin(), cluster_time_.end());
}

size_t TimeModel::ddr_intervals() const {
  std::lock_guard lock(mutex_);
  return ddr_busy_.size();
}

uint64_t TimeModel::reserve_ddr(uint64_t not_before, uint64_t cycles) {
  if (cycles == 0)
    return not_before;
  std::lock_guard lock(mutex_);
  uint64_t cursor = not_before;
  uint64_t remaining = cycles;
  // Start inside the interval that covers `cursor`, if any.
  auto it = ddr_busy_.upper_bound(cursor);
  if (it != ddr_busy_.begin()) {
    auto prev = std::prev(it);
    if (prev->second > cursor)
      cursor = prev->second;
  }
  uint64_t first_start = cursor;
  uint64_t end = cursor;
  while (remaining > 0) {
    uint64_t gap_end = it == ddr_busy_.end() ? UINT64_MAX : it->first;
    uint64_t take = std::min(remaining, gap_end - cursor);
    remaining -= take;
    end = cursor + take;
    if (remaining > 0) {
      cursor = it->second;
      ++it;
    }
  }
  // Everything in [first_start, end) is now busy: replace the intervals inside by one and
  // merge with neighbours that touch it.
  uint64_t merged_start = first_start;
  uint64_t merged_end = end;
  auto lo = ddr_busy_.lower_bound(first_start);
  if (lo != ddr_busy_.begin()) {
    auto prev = std::prev(lo);
    if (prev->second >= first_start) {
      merged_start = prev->first;
      merged_end = std::max(merged_end, prev->second);
      lo = prev;
    }
  }
  auto hi = lo;
  while (hi != ddr_busy_.end() && hi->first <= end) {
    merged_end = std::max(merged_end, hi->second);
    ++hi;
  }
  ddr_busy_.erase(lo, hi);
  ddr_busy_.emplace(merged_start, merged_end);
  while (ddr_busy_.size() > kMaxDdrIntervals)
    ddr_busy_.erase(ddr_busy_.begin());
  return end;
}

} // namespace manycl::device
