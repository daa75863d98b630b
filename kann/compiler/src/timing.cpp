// Replay of a program's record streams in modeled time (see kann/timing.h).
#include "kann/timing.h"

#include <algorithm>
#include <string>

#include "kann/kbin.h"
#include "manycl/device/time_model.h"
#include "manycl/native/native.h"

namespace kann {

namespace {

using manycl::make_error;

enum class State { Running, AtBarrier, WaitSignal, Done };

struct Cluster {
  State state = State::Running;
  size_t pc = 0;
  uint64_t now = 0;
  uint64_t engine_free = 0;
  uint64_t last_done = 0;    // latest completion of the transfers issued so far
  uint64_t reservations = 0; // DDR reservations so far: the arbiter's second key
  uint32_t wait_signal = 0;
  uint64_t wait_value = 0;
  std::vector<std::vector<uint64_t>> increments; // per signal: modeled times of its increments
};

uint64_t bytes_of(const kbin_dma_args &d) {
  return d.shape.row_bytes * d.shape.rows * d.shape.planes;
}

} // namespace

double program_ddr_bytes_per_cycle(const manycl::device::DeviceConfig &device, unsigned clusters) {
  const double share =
      clusters < device.clusters ? double(clusters) / double(device.clusters) : 1.0;
  return device.ddr_bytes_per_cycle * share;
}

manycl::Result<ProgramTiming> predict_timing(const format::Program &program,
                                             const manycl::device::DeviceConfig &device,
                                             double ddr_bytes_per_cycle) {
  const unsigned K = unsigned(program.streams.size());
  const uint32_t pes = program.pes_per_cluster ? program.pes_per_cluster : device.pes_per_cluster;
  ProgramTiming out;
  out.compute_cycles.assign(K, 0);
  out.dma_wait_cycles.assign(K, 0);
  out.barrier_wait_cycles.assign(K, 0);
  out.signal_wait_cycles.assign(K, 0);
  out.time_after.resize(K);
  for (unsigned c = 0; c < K; ++c)
    out.time_after[c].reserve(program.streams[c].size());
  std::vector<Cluster> cl(K);
  manycl::device::DdrCalendar ddr;

  auto signal_slot = [&](unsigned c, uint32_t s) -> std::vector<uint64_t> & {
    if (cl[c].increments.size() <= s)
      cl[c].increments.resize(s + 1);
    return cl[c].increments[s];
  };
  auto finish_record = [&](unsigned c) {
    out.time_after[c].push_back(cl[c].now);
    ++cl[c].pc;
    if (cl[c].pc == program.streams[c].size()) { // the final wait leaves nothing in flight
      out.dma_wait_cycles[c] += std::max(cl[c].now, cl[c].last_done) - cl[c].now;
      cl[c].now = std::max(cl[c].now, cl[c].last_done);
      cl[c].state = State::Done;
    }
  };
  for (unsigned c = 0; c < K; ++c)
    if (program.streams[c].empty())
      cl[c].state = State::Done;

  for (;;) {
    // Signal waits whose value arrived resume at the time of that increment.
    for (unsigned c = 0; c < K; ++c) {
      Cluster &x = cl[c];
      if (x.state != State::WaitSignal)
        continue;
      auto &inc = signal_slot(c, x.wait_signal);
      if (inc.size() < x.wait_value)
        continue;
      std::vector<uint64_t> sorted = inc;
      std::nth_element(sorted.begin(), sorted.begin() + (x.wait_value - 1), sorted.end());
      const uint64_t resume = std::max(x.now, sorted[x.wait_value - 1]);
      out.signal_wait_cycles[c] += resume - x.now;
      x.now = resume;
      x.state = State::Running;
      finish_record(c);
    }
    // The running cluster with the smallest (clock, reservations, index) goes next: shared
    // resources see requests in modeled-time order, as the simulator's arbiter serves them.
    int next = -1;
    for (unsigned c = 0; c < K; ++c) {
      const Cluster &x = cl[c];
      if (x.state != State::Running)
        continue;
      if (next < 0 || x.now < cl[next].now ||
          (x.now == cl[next].now && x.reservations < cl[next].reservations))
        next = int(c);
    }
    if (next < 0) {
      unsigned at_barrier = 0, done = 0;
      uint64_t release = 0;
      for (const Cluster &x : cl) {
        at_barrier += x.state == State::AtBarrier;
        done += x.state == State::Done;
        release = std::max(release, x.now);
      }
      if (done == K)
        break;
      if (at_barrier != K)
        return make_error("timing replay: clusters wait for each other forever (" +
                          std::to_string(at_barrier) + " at a barrier, " + std::to_string(done) +
                          " done)");
      release += device.barrier_latency_cycles;
      for (unsigned c = 0; c < K; ++c) {
        out.barrier_wait_cycles[c] += release - cl[c].now;
        cl[c].now = release;
        cl[c].state = State::Running;
        finish_record(c);
      }
      continue;
    }
    const unsigned c = unsigned(next);
    Cluster &x = cl[c];
    const format::Record &r = program.streams[c][x.pc];
    const std::string where = "cluster " + std::to_string(c) + " record " + std::to_string(x.pc);
    switch (r.function_id) {
    case KBIN_FN_DMA: {
      kbin_dma_args d;
      if (!r.decode(d))
        return make_error(where + ": short DMA record");
      const uint64_t b = bytes_of(d);
      const uint64_t start = std::max(x.now, x.engine_free);
      uint64_t done = start;
      if (b > 0) {
        const uint64_t data_start = start + device.dma_latency_cycles;
        done = data_start + manycl::device::transfer_cycles(b, device.noc_bytes_per_cycle);
        if (d.kind != KBIN_DMA_EXCHANGE && d.kind != KBIN_DMA_EXCHANGE_MULTICAST) {
          done =
              std::max(done, ddr.reserve(data_start,
                                         manycl::device::transfer_cycles(b, ddr_bytes_per_cycle)));
          ++x.reservations;
        }
      }
      x.engine_free = done;
      x.last_done = std::max(x.last_done, done);
      if (d.notify_signal >= 0) {
        std::vector<unsigned> targets;
        if (d.kind == KBIN_DMA_MULTICAST || d.kind == KBIN_DMA_EXCHANGE_MULTICAST) {
          for (unsigned t = 0; t < K && t < 32; ++t)
            if (d.cluster_mask & (1u << t))
              targets.push_back(t);
        } else if (d.kind == KBIN_DMA_EXCHANGE) {
          targets.push_back(d.dst_cluster);
        } else if (d.kind == KBIN_DMA_LOAD) {
          targets.push_back(c);
        }
        for (unsigned t : targets) {
          if (t >= K)
            return make_error(where + ": DMA notifies cluster " + std::to_string(t));
          signal_slot(t, uint32_t(d.notify_signal)).push_back(done);
        }
      }
      finish_record(c);
      break;
    }
    case KBIN_FN_WAIT_DMA:
      out.dma_wait_cycles[c] += std::max(x.now, x.last_done) - x.now;
      x.now = std::max(x.now, x.last_done);
      finish_record(c);
      break;
    case KBIN_FN_BARRIER:
      x.state = State::AtBarrier;
      break;
    case KBIN_FN_SIGNAL: {
      kbin_signal_args s;
      if (!r.decode(s) || s.cluster >= K)
        return make_error(where + ": bad signal record");
      auto &inc = signal_slot(s.cluster, s.signal);
      for (uint64_t i = 0; i < s.count; ++i)
        inc.push_back(x.now + device.signal_latency_cycles);
      finish_record(c);
      break;
    }
    case KBIN_FN_WAIT_SIGNAL: {
      kbin_wait_signal_args w;
      if (!r.decode(w))
        return make_error(where + ": short wait_signal record");
      if (w.value == 0) {
        finish_record(c);
        break;
      }
      x.state = State::WaitSignal;
      x.wait_signal = w.signal;
      x.wait_value = w.value;
      break;
    }
    default: {
      const size_t size = mcl_native_args_size(r.function_id);
      if (size == 0 || r.args.size() < size)
        return make_error(where + ": unknown function id " + std::to_string(r.function_id));
      const uint64_t cycles = mcl_native_cost(r.function_id, r.args.data(), pes);
      x.now += cycles;
      out.compute_cycles[c] += cycles;
      finish_record(c);
      break;
    }
    }
  }
  for (const Cluster &x : cl)
    out.total_cycles = std::max(out.total_cycles, x.now);
  return out;
}

} // namespace kann
