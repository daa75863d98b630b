#include "manycl/device/report.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "manycl/device/command.h"
#include "manycl/env.h"

namespace manycl::device {

namespace {

// Trace processes: the host gets pid 1, device i gets pid 100 + i. Within a device, tid 1
// is the command track and cluster c uses tids 10 + 4c + track.
constexpr int kHostPid = 1;
int device_pid(unsigned device) {
  return 100 + static_cast<int>(device);
}
int cluster_tid(unsigned cluster, TraceTrack track) {
  return 10 + 4 * static_cast<int>(cluster) + static_cast<int>(track);
}
constexpr int kCommandTid = 1;
// Bounds the memory a long traced run uses; later events are counted, not kept.
constexpr size_t kMaxTraceEvents = 4u << 20;

struct Event {
  int pid;
  int tid;
  char phase; // 'X' complete, 'i' instant
  double ts_us;
  double dur_us;
  std::string name;
  std::string args_json;
};

struct DeviceInfo {
  std::string name;
  unsigned clusters = 0;
  double clock_hz = 1;
  // Summary for MANYCL_STATS.
  uint64_t commands = 0;
  uint64_t modeled_cycles = 0;
  double host_seconds = 0;
  uint64_t ddr_read = 0, ddr_written = 0, noc = 0, multicast_saved = 0;
};

const char *track_name(TraceTrack track) {
  switch (track) {
  case TraceTrack::Compute:
    return "compute";
  case TraceTrack::Dma:
    return "dma";
  case TraceTrack::Sync:
    return "sync";
  }
  return "?";
}

void flush_at_exit() {
  Reports::instance().flush(/*final=*/true);
}

} // namespace

struct Reports::Impl {
  mutable std::mutex mutex;
  // Mirrors !trace_path.empty(): checked without the lock on every accounted span, so an
  // untraced run never serializes its clusters on this mutex.
  std::atomic<bool> tracing{false};
  std::string trace_path;
  std::string stats_destination;
  FILE *stats_stream = nullptr; // stderr or an opened file
  bool stats_stream_owned = false;
  std::vector<Event> events;
  size_t dropped = 0;
  std::map<unsigned, DeviceInfo> devices;
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();

  double cycles_to_us(unsigned device, uint64_t cycles) const {
    auto it = devices.find(device);
    double hz = it == devices.end() ? 1e9 : it->second.clock_hz;
    return static_cast<double>(cycles) * 1e6 / hz;
  }
  void push(Event e) {
    if (events.size() >= kMaxTraceEvents) {
      ++dropped;
      return;
    }
    events.push_back(std::move(e));
  }
  FILE *stats_file() {
    if (stats_destination.empty())
      return nullptr;
    if (!stats_stream) {
      if (stats_destination == "1" || stats_destination == "stderr") {
        stats_stream = stderr;
      } else {
        stats_stream = std::fopen(stats_destination.c_str(), "w");
        stats_stream_owned = stats_stream != nullptr;
        if (!stats_stream)
          std::fprintf(stderr, "manycl: MANYCL_STATS: cannot open '%s'\n",
                       stats_destination.c_str());
      }
    }
    return stats_stream;
  }
  void close_stats() {
    if (stats_stream_owned)
      std::fclose(stats_stream);
    stats_stream = nullptr;
    stats_stream_owned = false;
  }
};

Reports::Reports() : impl_(std::make_unique<Impl>()) {
  if (const char *t = env::get("MANYCL_TRACE"))
    impl_->trace_path = t;
  impl_->tracing = !impl_->trace_path.empty();
  if (env::flag("MANYCL_STATS"))
    impl_->stats_destination = env::get("MANYCL_STATS");
}

Reports &Reports::instance() {
  // Leaked on purpose: devices may finish commands during static destruction.
  static Reports *reports = [] {
    auto *r = new Reports();
    std::atexit(flush_at_exit);
    return r;
  }();
  return *reports;
}

bool Reports::tracing() const {
  return impl_->tracing.load(std::memory_order_relaxed);
}

bool Reports::stats_enabled() const {
  std::lock_guard lock(impl_->mutex);
  return !impl_->stats_destination.empty();
}

void Reports::set_trace_path(std::string path) {
  std::lock_guard lock(impl_->mutex);
  impl_->trace_path = std::move(path);
  impl_->tracing = !impl_->trace_path.empty();
}

void Reports::set_stats_destination(std::string destination) {
  std::lock_guard lock(impl_->mutex);
  if (destination == "0")
    destination.clear();
  impl_->close_stats();
  impl_->stats_destination = std::move(destination);
}

void Reports::register_device(unsigned device_index, std::string name, unsigned clusters,
                              double clock_hz) {
  std::lock_guard lock(impl_->mutex);
  auto &info = impl_->devices[device_index];
  info.name = std::move(name);
  info.clusters = clusters;
  info.clock_hz = clock_hz;
}

void Reports::modeled_span(unsigned device_index, unsigned cluster, TraceTrack track,
                           std::string name, uint64_t start_cycle, uint64_t end_cycle,
                           std::string args_json) {
  if (!tracing())
    return;
  std::lock_guard lock(impl_->mutex);
  if (impl_->trace_path.empty())
    return;
  double ts = impl_->cycles_to_us(device_index, start_cycle);
  double dur = impl_->cycles_to_us(device_index, end_cycle - start_cycle);
  impl_->push({device_pid(device_index), cluster_tid(cluster, track), 'X', ts, dur, std::move(name),
               std::move(args_json)});
}

void Reports::modeled_instant(unsigned device_index, unsigned cluster, std::string name,
                              uint64_t cycle, std::string args_json) {
  if (!tracing())
    return;
  std::lock_guard lock(impl_->mutex);
  if (impl_->trace_path.empty())
    return;
  impl_->push({device_pid(device_index), cluster_tid(cluster, TraceTrack::Compute), 'i',
               impl_->cycles_to_us(device_index, cycle), 0, std::move(name), std::move(args_json)});
}

void Reports::command_finished(const CommandStats &stats,
                               std::chrono::steady_clock::time_point host_begin,
                               std::chrono::steady_clock::time_point host_end) {
  std::lock_guard lock(impl_->mutex);
  auto &info = impl_->devices[stats.device_index];
  info.commands++;
  info.modeled_cycles += stats.cycles();
  info.host_seconds += stats.host_seconds;
  info.ddr_read += stats.ddr_bytes_read;
  info.ddr_written += stats.ddr_bytes_written;
  info.noc += stats.noc_bytes;
  info.multicast_saved += stats.multicast_saved_bytes;

  if (!impl_->trace_path.empty()) {
    std::string args = stats.to_json();
    impl_->push({device_pid(stats.device_index), kCommandTid, 'X',
                 impl_->cycles_to_us(stats.device_index, stats.start_cycle),
                 impl_->cycles_to_us(stats.device_index, stats.cycles()), stats.name, args});
    using us = std::chrono::duration<double, std::micro>;
    impl_->push({kHostPid, 1 + static_cast<int>(stats.device_index), 'X',
                 us(host_begin - impl_->epoch).count(), us(host_end - host_begin).count(),
                 stats.name, std::move(args)});
  }
  if (FILE *out = impl_->stats_file()) {
    std::string text = stats.to_text();
    std::fputs(text.c_str(), out);
    std::fflush(out);
  }
}

std::string Reports::trace_json() const {
  std::lock_guard lock(impl_->mutex);
  nlohmann::json events = nlohmann::json::array();
  auto meta = [&](int pid, int tid, const char *what, const std::string &name) {
    nlohmann::json m = {{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", {{"name", name}}}};
    if (tid >= 0)
      m["tid"] = tid;
    events.push_back(std::move(m));
  };
  auto sort_index = [&](int pid, int tid, int index) {
    events.push_back({{"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", index}}}});
  };
  meta(kHostPid, -1, "process_name", "host (wall time)");
  for (const auto &[index, info] : impl_->devices) {
    int pid = device_pid(index);
    meta(pid, -1, "process_name",
         "ManyCL " + info.name + " #" + std::to_string(index) + " (modeled time)");
    meta(pid, kCommandTid, "thread_name", "commands");
    sort_index(pid, kCommandTid, kCommandTid);
    for (unsigned c = 0; c < info.clusters; ++c)
      for (TraceTrack t : {TraceTrack::Compute, TraceTrack::Dma, TraceTrack::Sync}) {
        int tid = cluster_tid(c, t);
        meta(pid, tid, "thread_name", "cluster " + std::to_string(c) + " " + track_name(t));
        sort_index(pid, tid, tid);
      }
    meta(kHostPid, 1 + static_cast<int>(index), "thread_name",
         "host: " + info.name + " #" + std::to_string(index));
  }
  for (const auto &e : impl_->events) {
    nlohmann::json j = {{"ph", std::string(1, e.phase)},
                        {"pid", e.pid},
                        {"tid", e.tid},
                        {"ts", e.ts_us},
                        {"name", e.name}};
    if (e.phase == 'X')
      j["dur"] = e.dur_us;
    else
      j["s"] = "t";
    if (!e.args_json.empty()) {
      auto args = nlohmann::json::parse(e.args_json, nullptr, false);
      if (!args.is_discarded())
        j["args"] = std::move(args);
    }
    events.push_back(std::move(j));
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)},
                        {"displayTimeUnit", "ns"},
                        {"otherData",
                         {{"generator", "ManyCL device model"},
                          {"dropped_events", impl_->dropped},
                          {"note", "device processes are in modeled time (cycles / clock_hz); "
                                   "the host process is in wall time since start"}}}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

size_t Reports::trace_event_count() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->events.size();
}

Result<void> Reports::flush(bool final) {
  std::string path;
  {
    std::lock_guard lock(impl_->mutex);
    path = impl_->trace_path;
  }
  Result<void> result;
  if (!path.empty()) {
    std::string doc = trace_json();
    std::ofstream out(path, std::ios::trunc);
    if (out)
      out << doc;
    if (!out)
      result = make_error("MANYCL_TRACE: cannot write '" + path + "'");
  }
  std::lock_guard lock(impl_->mutex);
  if (final && !impl_->stats_destination.empty()) {
    if (FILE *out = impl_->stats_file()) {
      for (const auto &[index, info] : impl_->devices) {
        if (info.commands == 0)
          continue;
        std::fprintf(out,
                     "manycl stats: device #%u %s: %llu commands, %llu modeled cycles (%.6f s "
                     "at %.3g Hz), host %.6f s, DDR read %llu B, written %llu B, NoC %llu B, "
                     "multicast saved %llu B\n",
                     index, info.name.c_str(), (unsigned long long)info.commands,
                     (unsigned long long)info.modeled_cycles,
                     static_cast<double>(info.modeled_cycles) / info.clock_hz, info.clock_hz,
                     info.host_seconds, (unsigned long long)info.ddr_read,
                     (unsigned long long)info.ddr_written, (unsigned long long)info.noc,
                     (unsigned long long)info.multicast_saved);
      }
    }
  }
  if (impl_->stats_stream)
    std::fflush(impl_->stats_stream);
  if (!result.ok() && final)
    std::fprintf(stderr, "manycl: %s\n", result.error().message.c_str());
  return result;
}

void flush_reports() {
  Reports::instance().flush(false);
}

} // namespace manycl::device
