#include "manycl/device/time_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>

#include "manycl/device/adaptive_mutex.h"

namespace manycl::device {

namespace {
// The calendar only needs the recent past: commands start at or after the time their
// clusters reached. Beyond this many intervals the oldest are forgotten (treated as free),
// which bounds memory on long runs at the price of slightly optimistic contention for a
// cluster that lags far behind the others.
constexpr size_t kMaxDdrIntervals = 1 << 16;
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

const char *state_name(ArbiterSlot::State state) {
  switch (state) {
  case ArbiterSlot::State::NotStarted:
    return "not started";
  case ArbiterSlot::State::Running:
    return "running";
  case ArbiterSlot::State::Blocked:
    return "blocked";
  case ArbiterSlot::State::Done:
    break;
  }
  return "done";
}
} // namespace

uint64_t transfer_cycles(uint64_t bytes, double bytes_per_cycle) {
  if (bytes == 0)
    return 0;
  double cycles = std::ceil(static_cast<double>(bytes) / bytes_per_cycle);
  return cycles < 1 ? 1 : static_cast<uint64_t>(cycles);
}

// ---------------------------------------------------------------------------------------
// DdrCalendar

uint64_t DdrCalendar::reserve(uint64_t not_before, uint64_t cycles) {
  if (cycles == 0)
    return not_before;
  uint64_t cursor = not_before;
  uint64_t remaining = cycles;
  // Start inside the interval that covers `cursor`, if any.
  auto it = busy_.upper_bound(cursor);
  if (it != busy_.begin()) {
    auto prev = std::prev(it);
    if (prev->second > cursor)
      cursor = prev->second;
  }
  uint64_t first_start = cursor;
  uint64_t end = cursor;
  while (remaining > 0) {
    uint64_t gap_end = it == busy_.end() ? UINT64_MAX : it->first;
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
  auto lo = busy_.lower_bound(first_start);
  if (lo != busy_.begin()) {
    auto prev = std::prev(lo);
    if (prev->second >= first_start) {
      merged_start = prev->first;
      merged_end = std::max(merged_end, prev->second);
      lo = prev;
    }
  }
  auto hi = lo;
  while (hi != busy_.end() && hi->first <= end) {
    merged_end = std::max(merged_end, hi->second);
    ++hi;
  }
  busy_.erase(lo, hi);
  busy_.emplace(merged_start, merged_end);
  while (busy_.size() > kMaxDdrIntervals)
    busy_.erase(busy_.begin());
  return end;
}

// ---------------------------------------------------------------------------------------
// Arbiter

Arbiter::Arbiter(double ddr_bytes_per_cycle, unsigned device_clusters)
    : ddr_bytes_per_cycle_(ddr_bytes_per_cycle), started_on_(device_clusters, 0) {
  make_adaptive(mutex_);
}

size_t Arbiter::ddr_intervals() const {
  std::lock_guard lock(mutex_);
  return calendar_.intervals();
}

void Arbiter::join(ArbiterSlot &slot, unsigned cluster, uint64_t command, uint64_t start) {
  slot.cluster = cluster;
  slot.command = command;
  slot.time.store(start);
  std::lock_guard lock(mutex_);
  slot.state = ArbiterSlot::State::NotStarted;
  slot.joined = true;
  slot.prev = nullptr;
  slot.next = head_;
  if (head_)
    head_->prev = &slot;
  head_ = &slot;
}

void Arbiter::leave(ArbiterSlot &slot) {
  {
    std::lock_guard lock(mutex_);
    if (!slot.joined)
      return;
    if (slot.state == ArbiterSlot::State::Running || slot.state == ArbiterSlot::State::Blocked)
      --started_on_[slot.cluster];
    slot.state = ArbiterSlot::State::Done;
    (slot.prev ? slot.prev->next : head_) = slot.next;
    if (slot.next)
      slot.next->prev = slot.prev;
    slot.prev = slot.next = nullptr;
    slot.joined = false;
  }
  cv_.notify_all();
}

void Arbiter::start(ArbiterSlot &slot, uint64_t now) {
  {
    std::lock_guard lock(mutex_);
    if (!slot.joined || slot.state != ArbiterSlot::State::NotStarted)
      return;
    slot.state = ArbiterSlot::State::Running;
    slot.time.store(now);
    ++started_on_[slot.cluster];
  }
  // Another command's slot waiting on this cluster no longer holds the others back.
  cv_.notify_all();
}

void Arbiter::finish(ArbiterSlot &slot) {
  {
    std::lock_guard lock(mutex_);
    if (!slot.joined || slot.state == ArbiterSlot::State::Done)
      return;
    if (slot.state != ArbiterSlot::State::NotStarted)
      --started_on_[slot.cluster];
    slot.state = ArbiterSlot::State::Done;
  }
  cv_.notify_all();
}

void Arbiter::publish(ArbiterSlot &slot, uint64_t now) {
  // Seq-cst store then load: a waiter registers (clock_waiters_) before it checks the
  // clocks under the mutex, so either it sees this time or we see it and wake it.
  // Only ever forward: PE threads of one cluster may account concurrently and publish out
  // of order, and a published clock behind the real one could make two clusters wait for
  // each other. Under the mutex, set_locked() may move it back (signal releases).
  uint64_t seen = slot.time.load();
  while (seen < now && !slot.time.compare_exchange_weak(seen, now)) {
  }
  if (clock_waiters_.load() == 0)
    return;
  { std::lock_guard lock(mutex_); }
  cv_.notify_all();
}

void Arbiter::set_locked(ArbiterSlot &slot, ArbiterSlot::State state, uint64_t time) {
  const bool was_started =
      slot.state == ArbiterSlot::State::Running || slot.state == ArbiterSlot::State::Blocked;
  const bool is_started =
      state == ArbiterSlot::State::Running || state == ArbiterSlot::State::Blocked;
  if (slot.joined && was_started != is_started)
    started_on_[slot.cluster] += is_started ? 1 : -1;
  slot.state = state;
  slot.time.store(time);
  cv_.notify_all();
}

uint64_t Arbiter::bound_locked(const ArbiterSlot &slot) const {
  switch (slot.state) {
  case ArbiterSlot::State::Running:
    return slot.time.load();
  case ArbiterSlot::State::NotStarted:
    // Queued behind another command of this domain on the same cluster: that one runs
    // first and holds the cluster's place (waiting for this one would deadlock).
    return started_on_[slot.cluster] ? kNever : slot.time.load();
  case ArbiterSlot::State::Blocked:
    // Only another cluster can release it, and a release is never earlier than the
    // releaser's own clock, which is checked on its own.
  case ArbiterSlot::State::Done:
    break;
  }
  return kNever;
}

bool Arbiter::ddr_turn_locked(const ArbiterSlot &self, uint64_t time) const {
  const auto mine = std::make_tuple(time, self.sequence, self.cluster, self.command);
  for (const ArbiterSlot *s = head_; s; s = s->next) {
    if (s == &self)
      continue;
    uint64_t bound = bound_locked(*s);
    if (bound == kNever)
      continue;
    if (std::make_tuple(bound, s->sequence, s->cluster, s->command) < mine)
      return false;
  }
  return true;
}

bool Arbiter::signal_final_locked(const ArbiterSlot &self, uint64_t time) const {
  for (const ArbiterSlot *s = head_; s; s = s->next)
    if (s != &self && s->command == self.command && bound_locked(*s) < time)
      return false;
  return true;
}

Result<uint64_t> Arbiter::reserve_ddr(ArbiterSlot &slot, uint64_t time, uint64_t not_before,
                                      uint64_t cycles, const std::atomic<bool> &failed,
                                      long long timeout_ms) {
  std::unique_lock lock(mutex_);
  if (!ddr_turn_locked(slot, time)) {
    clock_waiters_.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    bool turn = cv_.wait_until(lock, deadline,
                               [&] { return failed.load() || ddr_turn_locked(slot, time); });
    clock_waiters_.fetch_sub(1);
    if (failed.load())
      return make_error("DDR reservation abandoned: the command failed");
    if (!turn) {
      std::string who;
      for (const ArbiterSlot *s = head_; s; s = s->next)
        if (s != &slot && bound_locked(*s) <= time)
          who += " cluster " + std::to_string(s->cluster) + " of command " +
                 std::to_string(s->command) + " (" + state_name(s->state) + " at cycle " +
                 std::to_string(s->time.load()) + " seq " + std::to_string(s->sequence) + ")";
      return make_error("DDR arbitration timed out (MANYCL_SYNC_TIMEOUT_S) at cycle " +
                        std::to_string(time) + ", waiting for" + who);
    }
  }
  // The slot's key grew: a waiter at the same time with fewer reservations may go now.
  ++slot.sequence;
  const uint64_t end = calendar_.reserve(not_before, cycles);
  const bool wake = clock_waiters_.load() != 0;
  lock.unlock();
  if (wake)
    cv_.notify_all();
  return end;
}

// ---------------------------------------------------------------------------------------
// TimeModel

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

} // namespace manycl::device
