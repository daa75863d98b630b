// SPM allocation: one offset per buffer, the same on every cluster (multicast needs it).
#include "tiler/tiler.h"

#include <numeric>

namespace kann::tiler {

// One SPM offset per buffer, the same on every cluster. Buffers whose lifetimes overlap
// must not overlap in the SPM. A greedy placement fragments differently depending on the
// order and on the gap chosen, so several are tried; when the bytes live at one step
// exceed the SPM, none can succeed and the failure names that step's buffers.
bool Compiler::allocate() {
  const uint64_t capacity = opt.device.spm_bytes;
  int steps = 1;
  for (const SpmBuffer &b : buffers)
    steps = std::max(steps, b.last + 1);
  std::vector<uint64_t> pressure(size_t(steps), 0);
  for (const SpmBuffer &b : buffers)
    for (int t = b.first; t <= b.last; ++t)
      pressure[size_t(t)] += align_up(b.size());
  const auto worst = std::max_element(pressure.begin(), pressure.end());
  if (*worst > capacity) {
    const int step = int(worst - pressure.begin());
    failure.candidates.clear();
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i].size() && buffers[i].first <= step && step <= buffers[i].last)
        failure.candidates.push_back(int(i));
    failure.message = "step " + std::to_string(step) + " needs " + std::to_string(*worst) +
                      " B of SPM buffers, more than the " + std::to_string(capacity) + " B SPM";
    return false;
  }
  AllocFailure first;
  for (int strategy = 0; strategy < 6; ++strategy) {
    if (place(strategy / 2, strategy % 2 == 1))
      return true;
    if (strategy == 0)
      first = failure;
  }
  failure = first;
  return false;
}

// Greedy placement. order 0: largest size x lifetime first, 1: largest first, 2: by first
// step (then largest). best_fit: the smallest free gap that holds the buffer, else the
// lowest one.
bool Compiler::place(int order_kind, bool best_fit) {
  std::vector<int> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  auto area = [&](int i) {
    return buffers[i].size() * uint64_t(buffers[i].last - buffers[i].first + 1);
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (order_kind == 0)
      return area(a) > area(b);
    if (order_kind == 2 && buffers[a].first != buffers[b].first)
      return buffers[a].first < buffers[b].first;
    return buffers[a].size() > buffers[b].size();
  });
  const uint64_t capacity = opt.device.spm_bytes;
  std::vector<int> placed;
  uint64_t high = 0;
  for (int i : order) {
    SpmBuffer &b = buffers[i];
    if (b.size() == 0)
      continue;
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    std::vector<int> live;
    for (int j : placed) {
      const SpmBuffer &o = buffers[j];
      if (o.first <= b.last && b.first <= o.last) {
        busy.push_back({o.offset, o.offset + align_up(o.size())});
        live.push_back(j);
      }
    }
    std::sort(busy.begin(), busy.end());
    busy.push_back({capacity, capacity}); // the end of the SPM closes the last gap
    uint64_t at = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
    for (auto [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= b.size()) {
        const uint64_t gap = lo - cursor;
        if (!best_fit) {
          at = cursor;
          break;
        }
        if (gap < best_gap)
          best_gap = gap, at = cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (at == UINT64_MAX) {
      uint64_t used = 0, end = 0;
      for (auto [lo, hi] : busy) { // union of the live intervals
        used += hi > std::max(lo, end) ? hi - std::max(lo, end) : 0;
        end = std::max(end, hi);
      }
      failure.message = "buffer '" + b.name + "' (" + std::to_string(b.size()) +
                        " B) does not fit in the " + std::to_string(capacity) + " B SPM next to " +
                        std::to_string(used) + " B of live buffers";
      failure.candidates = live;
      failure.candidates.push_back(i);
      return false;
    }
    b.offset = at;
    high = std::max(high, at + b.size());
    placed.push_back(i);
  }
  prog.spm_required = std::max<uint64_t>(high, 64);
  return true;
}

} // namespace kann::tiler
