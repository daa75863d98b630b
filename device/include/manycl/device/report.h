// Process-wide sinks for what commands report:
//  - MANYCL_TRACE=file.json: a Chrome/Perfetto trace event file. Per device one process
//    "ManyCL <device> (modeled time)" with a "commands" track and, per cluster, the tracks
//    "cluster N compute", "cluster N dma" and "cluster N sync" (waits and barriers), all in
//    modeled time; and one process "host (wall time)" with a track per device showing when
//    the host ran each command. Written at exit and by flush_reports().
//  - MANYCL_STATS=1 (stderr) or MANYCL_STATS=path: one line per command as it ends, per
//    cluster details, and a per-device summary at exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "manycl/result.h"

namespace manycl::device {

struct CommandStats;

enum class TraceTrack { Compute = 0, Dma = 1, Sync = 2 };

class Reports {
public:
  // The process-wide instance (never destroyed; flushed by an atexit handler).
  static Reports &instance();

  bool tracing() const;
  bool stats_enabled() const;
  // Overrides MANYCL_TRACE ("" turns tracing off) / MANYCL_STATS ("" off, "1" stderr, or a
  // path). Tests use them; events already recorded are kept.
  void set_trace_path(std::string path);
  void set_stats_destination(std::string destination);

  // Called by Device's constructor: names the device's trace process.
  void register_device(unsigned device_index, std::string name, unsigned clusters, double clock_hz);

  // A span of modeled time on one cluster's track.
  void modeled_span(unsigned device_index, unsigned cluster, TraceTrack track, std::string name,
                    uint64_t start_cycle, uint64_t end_cycle, std::string args_json = {});
  // An instant (e.g. a log line) on a cluster's compute track.
  void modeled_instant(unsigned device_index, unsigned cluster, std::string name, uint64_t cycle,
                       std::string args_json = {});
  // Feeds the command's span (modeled and host) to the trace and its line to the stats.
  void command_finished(const CommandStats &stats, std::chrono::steady_clock::time_point host_begin,
                        std::chrono::steady_clock::time_point host_end);

  // The trace document as it would be written now.
  std::string trace_json() const;
  // Writes the trace file (if tracing) and flushes the stats stream; `final` adds the
  // per-device summary to the stats.
  Result<void> flush(bool final = false);

  size_t trace_event_count() const;

private:
  Reports();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes MANYCL_TRACE and flushes MANYCL_STATS now (also done automatically at exit).
void flush_reports();

} // namespace manycl::device
