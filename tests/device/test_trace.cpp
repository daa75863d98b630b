// MANYCL_TRACE / MANYCL_STATS: the trace is valid JSON with a track per cluster and kind of
// activity in modeled time plus a host track, and the stats report names each command.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "device_test_util.h"
#include "manycl/device/report.h"

using namespace manycl::device;
using namespace manycl::device::test;

namespace {

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Trace : public DeviceTest {
protected:
  void TearDown() override {
    Reports::instance().set_trace_path("");
    Reports::instance().set_stats_destination("");
  }
  std::string temp(const char *name) {
    return (std::filesystem::temp_directory_path() /
            (std::string("manycl_device_test_") + std::to_string(getpid()) + name))
        .string();
  }
};

} // namespace

TEST_F(Trace, TraceFileHasModeledTracksPerClusterAndAHostTrack) {
  const std::string path = temp("_trace.json");
  Reports::instance().set_trace_path(path);
  uint64_t in = ddr_block(8192);
  auto rec = begin({0, 1});
  ASSERT_TRUE(
      rec->run([&](ClusterContext &ctx) {
           if (ctx.group_index() == 0) {
             DmaRequest req{DmaEndpoint::ddr(in), DmaEndpoint::spm(0, 0), DmaShape::linear(8192)};
             req.label = "weights";
             req.multicast = {0, 1};
             auto h = ctx.dma(req);
             ASSERT_TRUE(h.ok());
             ASSERT_TRUE(ctx.dma_wait(h.value()).ok()); // 1124 cycles
           }
           ctx.account_cycles(500, "conv");
           ASSERT_TRUE(ctx.barrier().ok());
         })
          .ok());
  rec->end();
  ASSERT_TRUE(Reports::instance().flush().ok());

  auto doc = nlohmann::json::parse(read_file(path), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "trace is not valid JSON";
  ASSERT_TRUE(doc["traceEvents"].is_array());

  // Find this device's process and its track names.
  const std::string process = "ManyCL tiny #" + std::to_string(device->index()) + " (modeled time)";
  int pid = -1, host_pid = -1;
  for (const auto &e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") {
      if (e["args"]["name"] == process)
        pid = e["pid"];
      if (e["args"]["name"] == "host (wall time)")
        host_pid = e["pid"];
    }
  ASSERT_GE(pid, 0);
  ASSERT_GE(host_pid, 0);
  std::map<std::string, int> tracks;
  for (const auto &e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == pid)
      tracks[e["args"]["name"]] = e["tid"];
  for (unsigned c = 0; c < 4; ++c)
    for (const char *kind : {"compute", "dma", "sync"})
      EXPECT_TRUE(tracks.count("cluster " + std::to_string(c) + " " + kind))
          << "cluster " << c << " " << kind;
  ASSERT_TRUE(tracks.count("commands"));

  // The events land on the right tracks at the modeled times (1 GHz: 1 cycle = 1 ns).
  int dma = 0, conv = 0, barrier = 0, command = 0, host = 0;
  for (const auto &e : doc["traceEvents"]) {
    if (e["ph"] != "X")
      continue;
    if (e["pid"] == host_pid && e["name"] == "test")
      host++;
    if (e["pid"] != pid)
      continue;
    const std::string name = e["name"];
    const int tid = e["tid"];
    double ts = e["ts"], dur = e["dur"];
    if (tid == tracks["cluster 0 dma"] && name.find("weights") == 0) {
      dma++;
      EXPECT_DOUBLE_EQ(ts, 0.0);
      EXPECT_NEAR(dur, 1.124, 1e-9);
      EXPECT_EQ(e["args"]["bytes"], 8192);
    }
    if (name == "conv") {
      conv++;
      EXPECT_TRUE(tid == tracks["cluster 0 compute"] || tid == tracks["cluster 1 compute"]);
      EXPECT_NEAR(dur, 0.5, 1e-9);
    }
    if (name == "barrier" && tid == tracks["cluster 1 sync"]) {
      barrier++;
      EXPECT_NEAR(ts, 0.5, 1e-9); // cluster 1 arrives at 500, cluster 0 at 1624
      EXPECT_NEAR(ts + dur, 1.674, 1e-9);
    }
    if (tid == tracks["commands"] && name == "test") {
      command++;
      EXPECT_NEAR(dur, 1.674, 1e-9);
      EXPECT_EQ(e["args"]["multicast_saved_bytes"], 8192);
    }
  }
  EXPECT_EQ(dma, 1);
  EXPECT_EQ(conv, 2);
  EXPECT_EQ(barrier, 1);
  EXPECT_EQ(command, 1);
  EXPECT_GE(host, 1);
  std::filesystem::remove(path);
}

TEST_F(Trace, StatsReportAndJson) {
  const std::string path = temp("_stats.txt");
  Reports::instance().set_stats_destination(path);
  auto rec = CommandRecorder::begin(*device, "stats probe", {0, 1}).value();
  ASSERT_TRUE(rec->run([](ClusterContext &ctx) { ctx.account_cycles(1200); }).ok());
  const auto &s = rec->end();
  EXPECT_GE(s.host_seconds, 0.0);
  ASSERT_TRUE(Reports::instance().flush(/*final=*/true).ok());
  std::string text = read_file(path);
  EXPECT_NE(text.find("'stats probe'"), std::string::npos) << text;
  EXPECT_NE(text.find("1200 modeled cycles"), std::string::npos) << text;
  EXPECT_NE(text.find("cluster 1: end 1200"), std::string::npos) << text;
  EXPECT_NE(text.find("device #" + std::to_string(device->index()) + " tiny"), std::string::npos)
      << text;

  auto j = nlohmann::json::parse(s.to_json());
  EXPECT_EQ(j["modeled_cycles"], 1200);
  EXPECT_DOUBLE_EQ(j["modeled_seconds"].get<double>(), 1.2e-6);
  EXPECT_EQ(j["clusters"].size(), 2u);
  EXPECT_EQ(j["clusters"][1]["compute_cycles"], 1200);
  EXPECT_EQ(j["ok"], true);
  std::filesystem::remove(path);
}
