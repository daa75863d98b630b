// Compile reports: text (terminal), JSON (stored in the binary, read by tools) and a
// self-contained HTML page with a per-cluster timeline and an SPM occupancy map.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kann/compile.h"

namespace kann {

std::string CompileOutput::report_text() const {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-18s %-9s %5s %10s %12s %10s %12s\n", "operator", "op",
                "split", "tiles", "SPM peak", "DDR bytes", "NoC bytes", "cycles");
  o << line;
  for (const OpReport &r : ops) {
    uint64_t peak =
        r.spm_peak.empty() ? 0 : *std::max_element(r.spm_peak.begin(), r.spm_peak.end());
    std::snprintf(line, sizeof line, "%-28.28s %-18.18s %-9s %5u %10llu %12llu %10llu %12llu\n",
                  r.name.c_str(), r.op.c_str(), r.split.c_str(), r.tiles, (unsigned long long)peak,
                  (unsigned long long)r.ddr_bytes, (unsigned long long)r.exchange_bytes,
                  (unsigned long long)r.cycles);
    o << line;
  }
  o << "clusters " << program.cluster_count << ", SPM required " << program.spm_required << " of "
    << program.spm_bytes << " B, parameters " << params_bytes << " B, modeled cycles "
    << total_cycles << "\n";
  if (!schedule_choice.chosen.empty())
    o << "schedule " << schedule_choice.chosen << " (" << schedule_choice.why << ")\n";
  if (total_cycles) {
    auto pct = [&](uint64_t v) { return std::to_string(v * 100 / total_cycles) + " %"; };
    o << "modeled time per cluster (mean): compute " << pct(time.compute) << ", DMA waits "
      << pct(time.dma_wait) << ", barriers " << pct(time.barrier_wait) << ", signal waits "
      << pct(time.signal_wait) << "\n";
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupReport &g = groups[i];
    o << "layer group " << i << ": " << ops[g.first_op].name << " .. " << ops[g.last_op].name
      << " (" << g.last_op - g.first_op + 1 << " operators, " << g.bands << " bands per cluster, "
      << g.intermediates.size() << " intermediates in SPM band buffers)"
      << (g.why.empty() ? "" : "; " + g.why) << "\n";
  }
  if (!spilled.empty()) {
    o << "spilled to DDR:";
    for (const std::string &t : spilled)
      o << " " << t;
    o << "\n";
  }
  if (!streamed.empty()) {
    o << "streamed from DDR in bands (network inputs):";
    for (const std::string &t : streamed)
      o << " " << t;
    o << "\n";
  }
  if (batch.images > 1) {
    o << "batch " << batch.images << ": " << batch.chosen << " (" << batch.why << ")\n";
    for (const BatchReport::Group &g : batch.groups) {
      o << "  clusters " << g.first_cluster << "-" << g.first_cluster + g.clusters - 1
        << ": images";
      for (int64_t i : g.images)
        o << " " << i;
      o << "\n";
    }
    for (const BatchReport::Candidate &c : batch.candidates)
      o << "  candidate " << c.name << ": "
        << (c.error.empty() ? std::to_string(c.cycles) + " cycles" : c.error) << "\n";
  }
  return o.str();
}

std::string CompileOutput::report_json() const {
  nlohmann::json j;
  j["clusters"] = program.cluster_count;
  j["preset"] = program.preset;
  j["spm_bytes"] = program.spm_bytes;
  j["spm_required"] = program.spm_required;
  j["params_bytes"] = params_bytes;
  j["modeled_cycles"] = total_cycles;
  j["spilled"] = spilled;
  j["streamed"] = streamed;
  j["time"] = {{"compute", time.compute},
               {"dma_wait", time.dma_wait},
               {"barrier_wait", time.barrier_wait},
               {"signal_wait", time.signal_wait}};
  j["schedule"] = {{"chosen", schedule_choice.chosen},
                   {"why", schedule_choice.why},
                   {"layer_cycles", schedule_choice.layer_cycles},
                   {"pipeline_cycles", schedule_choice.pipeline_cycles},
                   {"group_cycles", schedule_choice.group_cycles}};
  j["layer_groups"] = nlohmann::json::array();
  for (const GroupReport &g : groups)
    j["layer_groups"].push_back({{"first_op", g.first_op},
                                 {"last_op", g.last_op},
                                 {"bands", g.bands},
                                 {"intermediates", g.intermediates},
                                 {"buffers", g.buffers},
                                 {"why", g.why}});
  j["ops"] = nlohmann::json::array();
  for (const OpReport &r : ops)
    j["ops"].push_back({{"name", r.name},
                        {"op", r.op},
                        {"split", r.split},
                        {"tiles", r.tiles},
                        {"spm_peak", r.spm_peak},
                        {"ddr_bytes", r.ddr_bytes},
                        {"exchange_bytes", r.exchange_bytes},
                        {"compute_cycles", r.compute_cycles},
                        {"shape", r.shape},
                        {"macs", r.macs},
                        {"padded_macs", r.padded_macs},
                        {"bound", r.bound},
                        {"dma_cycles", r.dma_cycles},
                        {"cycles", r.cycles},
                        {"start_cycle", r.start_cycle}});
  j["buffers"] = nlohmann::json::array();
  for (const BufferReport &b : buffers)
    j["buffers"].push_back({{"name", b.name},
                            {"offset", b.offset},
                            {"size", b.size},
                            {"first_step", b.first_step},
                            {"last_step", b.last_step}});
  if (batch.images > 1) { // absent for one image: batch-1 binaries stay as they were
    nlohmann::json b;
    b["images"] = batch.images;
    b["split"] = batch.split;
    b["chosen"] = batch.chosen;
    b["why"] = batch.why;
    b["groups"] = nlohmann::json::array();
    for (const BatchReport::Group &g : batch.groups)
      b["groups"].push_back(
          {{"first_cluster", g.first_cluster}, {"clusters", g.clusters}, {"images", g.images}});
    b["candidates"] = nlohmann::json::array();
    for (const BatchReport::Candidate &c : batch.candidates)
      b["candidates"].push_back({{"name", c.name}, {"cycles", c.cycles}, {"error", c.error}});
    j["batch"] = b;
  }
  return j.dump(-1, ' ', false,
                nlohmann::json::error_handler_t::replace); // names come from the ONNX file
}

namespace {
std::string escape(const std::string &s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}
} // namespace

std::string CompileOutput::report_html() const {
  std::ostringstream o;
  const unsigned K = program.cluster_count;
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>kann compile report</title>"
       "<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}"
       "td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}</style></head><body>";
  o << "<h1>kann compile report</h1><p>" << K << " clusters, preset " << escape(program.preset)
    << ", SPM required " << program.spm_required << " of " << program.spm_bytes << " B, parameters "
    << params_bytes << " B, modeled cycles " << total_cycles << "</p>";
  if (batch.images > 1) {
    o << "<p>batch " << batch.images << ": " << escape(batch.chosen) << " (" << escape(batch.why)
      << "); candidates:";
    for (const BatchReport::Candidate &c : batch.candidates)
      o << " " << escape(c.name) << " "
        << (c.error.empty() ? std::to_string(c.cycles) + " cycles" : escape(c.error)) << ";";
    o << " the operators below are one image's schedule</p>";
  }
  if (!schedule_choice.chosen.empty()) {
    o << "<h2>Schedule</h2><p>built: <b>" << escape(schedule_choice.chosen) << "</b> ("
      << escape(schedule_choice.why) << ")</p>";
    // Every candidate the compiler built, with the replay's cycles that chose among them.
    const ScheduleReport &sc = schedule_choice;
    const std::pair<const char *, uint64_t> candidates[] = {
        {"layer", sc.layer_cycles}, {"pipeline", sc.pipeline_cycles}, {"group", sc.group_cycles}};
    o << "<table class='schedules'><tr><th>schedule</th><th>predicted cycles</th>"
         "<th>speed-up over layer</th><th></th></tr>";
    for (const auto &[name, cycles] : candidates) {
      if (!cycles)
        continue;
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.3f",
                    sc.layer_cycles ? double(sc.layer_cycles) / double(cycles) : 1.0);
      o << "<tr><td>" << name << "</td><td>" << cycles << "</td><td>" << ratio << "</td><td>"
        << (sc.chosen == name ? "chosen" : "") << "</td></tr>";
    }
    o << "</table>";
  }
  if (!groups.empty()) {
    o << "<h2>Layer groups</h2><table class='groups'><tr><th>group</th><th>operators</th>"
         "<th>bands per cluster</th><th>intermediates in SPM band buffers</th><th>why</th></tr>";
    for (size_t i = 0; i < groups.size(); ++i) {
      const GroupReport &g = groups[i];
      std::string inner;
      for (const std::string &t : g.intermediates)
        inner += (inner.empty() ? "" : ", ") + escape(t);
      o << "<tr><td>group " << i << "</td><td>" << escape(ops[g.first_op].name) << " .. "
        << escape(ops[g.last_op].name) << " (" << g.last_op - g.first_op + 1 << ")</td><td>"
        << g.bands << "</td><td>" << inner << "</td><td>" << escape(g.why) << "</td></tr>";
    }
    o << "</table>";
  }
  if (total_cycles)
    o << "<p>modeled time per cluster (mean): compute " << time.compute * 100 / total_cycles
      << " %, DMA waits " << time.dma_wait * 100 / total_cycles << " %, barriers "
      << time.barrier_wait * 100 / total_cycles << " %, signal waits "
      << time.signal_wait * 100 / total_cycles << " %</p>";
  // Timeline: one row per cluster, one rectangle per operator step (compute part darker).
  const double width = 1000.0;
  const double scale = total_cycles ? width / double(total_cycles) : 1.0;
  // With layer groups, a first row marks each group's span: its operators' parameter-only
  // steps and the step where all of them compute band by band.
  const unsigned top = groups.empty() ? 0 : 24;
  o << "<h2>Per-cluster timeline (modeled cycles)</h2><svg width='" << width + 80 << "' height='"
    << K * 24 + 20 + top << "'>";
  const char *colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  if (!groups.empty())
    o << "<text x='0' y='16' font-size='11'>groups</text>";
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupReport &g = groups[i];
    const uint64_t t0 = ops[g.first_op].start_cycle,
                   t1 = ops[g.last_op].start_cycle + ops[g.last_op].cycles;
    o << "<rect class='group' x='" << 70 + double(t0) * scale << "' y='4' width='"
      << std::max(1.0, double(t1 - t0) * scale)
      << "' height='16' fill='#888' stroke='#000' stroke-width='0.5'><title>group " << i << ": "
      << escape(ops[g.first_op].name) << " .. " << escape(ops[g.last_op].name) << ", "
      << g.last_op - g.first_op + 1 << " operators, " << g.bands << " bands, " << t1 - t0
      << " cycles</title></rect>";
  }
  for (unsigned c = 0; c < K; ++c) {
    o << "<g transform='translate(0," << top << ")'>";
    o << "<text x='0' y='" << c * 24 + 16 << "' font-size='11'>cluster " << c << "</text>";
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpReport &r = ops[i];
      const double x = 70 + double(r.start_cycle) * scale;
      const double w = std::max(1.0, double(r.cycles) * scale);
      o << "<rect x='" << x << "' y='" << c * 24 + 4 << "' width='" << w << "' height='16' fill='"
        << colors[i % 10] << "' opacity='" << (c < r.spm_peak.size() && r.spm_peak[c] ? 0.9 : 0.25)
        << "'><title>" << escape(r.name) << " " << escape(r.op) << ", " << escape(r.split) << ", "
        << r.cycles << " cycles</title></rect>";
    }
    o << "</g>";
  }
  o << "</svg>";
  // SPM occupancy: x = step, y = SPM offset.
  int steps = 1;
  for (const BufferReport &b : buffers)
    steps = std::max(steps, b.last_step + 1);
  const double h = 400.0, sx = width / steps;
  const double sy = program.spm_bytes ? h / double(program.spm_bytes) : 1.0;
  o << "<h2>SPM occupancy (x: step, y: offset; same map on every cluster)</h2><svg width='"
    << width + 80 << "' height='" << h + 20 << "'><rect x='70' y='0' width='" << width
    << "' height='" << h << "' fill='#f4f4f4'/>";
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferReport &b = buffers[i];
    o << "<rect x='" << 70 + b.first_step * sx << "' y='" << double(b.offset) * sy << "' width='"
      << (b.last_step - b.first_step + 1) * sx << "' height='" << std::max(1.0, double(b.size) * sy)
      << "' fill='" << colors[i % 10] << "' stroke='#333' stroke-width='0.5'><title>"
      << escape(b.name) << " @" << b.offset << " " << b.size << " B steps " << b.first_step << "-"
      << b.last_step << "</title></rect>";
  }
  o << "</svg>";
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupReport &g = groups[i];
    o << "<h3>SPM during group " << i << " (step " << g.last_op + 1
      << ", offsets per cluster)</h3><svg class='group-spm' width='" << width + 80 << "' height='"
      << 60 << "'><rect x='70' y='0' width='" << width << "' height='40' fill='#f4f4f4'/>";
    const double gx = program.spm_bytes ? width / double(program.spm_bytes) : 1.0;
    for (size_t k : g.buffers) {
      const BufferReport &b = buffers[k];
      // A band buffer is named after its intermediate (group.cpp).
      const bool band = std::any_of(g.intermediates.begin(), g.intermediates.end(),
                                    [&](const std::string &t) { return b.name == t + ".band"; });
      o << "<rect x='" << 70 + double(b.offset) * gx << "' y='2' width='"
        << std::max(1.0, double(b.size) * gx) << "' height='36' fill='"
        << (band ? "#e15759" : colors[k % 10]) << "' stroke='#333' stroke-width='0.5'><title>"
        << escape(b.name) << " @" << b.offset << " " << b.size << " B"
        << (band ? " (band buffer)" : "") << "</title></rect>";
    }
    o << "<text x='70' y='54' font-size='11'>0</text><text x='" << width + 20
      << "' y='54' font-size='11'>" << program.spm_bytes << " B</text></svg>";
  }
  o << "<h2>Operators</h2><table><tr><th>operator</th><th>op</th><th>split</th>"
       "<th>tiles</th><th>SPM peak (per cluster)</th><th>DDR bytes</th><th>NoC bytes</th>"
       "<th>compute cycles</th><th>DMA cycles</th><th>step cycles</th></tr>";
  for (const OpReport &r : ops) {
    std::string peaks;
    for (uint64_t p : r.spm_peak)
      peaks += (peaks.empty() ? "" : " / ") + std::to_string(p);
    o << "<tr><td>" << escape(r.name) << "</td><td>" << escape(r.op) << "</td><td>" << r.split
      << "</td><td>" << r.tiles << "</td><td>" << peaks << "</td><td>" << r.ddr_bytes << "</td><td>"
      << r.exchange_bytes << "</td><td>" << r.compute_cycles << "</td><td>" << r.dma_cycles
      << "</td><td>" << r.cycles << "</td></tr>";
  }
  o << "</table></body></html>\n";
  return o.str();
}

} // namespace kann
