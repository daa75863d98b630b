#include "manycl/device/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "manycl/env.h"

namespace manycl::device {

uint64_t DeviceConfig::max_alloc() const {
  if (max_alloc_bytes != 0)
    return std::min(max_alloc_bytes, ddr_bytes);
  uint64_t quarter = ddr_bytes / 4;
  uint64_t rounded = quarter & ~((1ull << 20) - 1);
  return rounded != 0 ? rounded : ddr_bytes;
}

namespace {

// "clusters = 0 is out of range (allowed: 1..256)": the field, the value and what is allowed,
// so that a bad device file can be fixed from the message alone.
template <class T>
std::string out_of_range(const char *field, T value, const std::string &allowed) {
  std::ostringstream s;
  s << field << " = " << value << " is out of range (allowed: " << allowed << ")";
  return s.str();
}

} // namespace

Result<void> DeviceConfig::validate() const {
  if (clusters == 0 || clusters > 256)
    return make_error(out_of_range("clusters", clusters, "1..256"));
  if (pes_per_cluster == 0 || pes_per_cluster > 256)
    return make_error(out_of_range("pes_per_cluster", pes_per_cluster, "1..256"));
  // The floor refuses nonsense (a 1-byte SPM) and keeps the tiny test devices (8 KiB) usable.
  if (spm_bytes < 4096 || spm_bytes > (1ull << 30))
    return make_error(out_of_range("spm_bytes", spm_bytes, "4096 (4 KiB)..1073741824 (1 GiB)"));
  if (spm_reserved_bytes >= spm_bytes)
    return make_error(out_of_range("spm_reserved_bytes", spm_reserved_bytes,
                                   "0.." + std::to_string(spm_bytes - 1) + ", below spm_bytes"));
  if (ddr_bytes < (1ull << 20) || ddr_bytes > (1ull << 40))
    return make_error(
        out_of_range("ddr_bytes", ddr_bytes, "1048576 (1 MiB)..1099511627776 (1 TiB)"));
  if (!(clock_hz >= 1e6 && clock_hz <= 1e11))
    return make_error(out_of_range("clock_hz", clock_hz, "1e6..1e11 Hz"));
  const std::pair<const char *, unsigned> rates[] = {{"int8_macs_per_cycle", int8_macs_per_cycle},
                                                     {"int16_macs_per_cycle", int16_macs_per_cycle},
                                                     {"fp16_fmas_per_cycle", fp16_fmas_per_cycle},
                                                     {"fp32_fmas_per_cycle", fp32_fmas_per_cycle}};
  for (const auto &[field, rate] : rates)
    if (rate == 0 || rate > 65536)
      return make_error(out_of_range(field, rate, "1..65536"));
  const std::pair<const char *, double> bandwidths[] = {
      {"ddr_bytes_per_cycle", ddr_bytes_per_cycle}, {"noc_bytes_per_cycle", noc_bytes_per_cycle}};
  for (const auto &[field, bandwidth] : bandwidths)
    if (!(bandwidth > 0 && bandwidth <= 1e6))
      return make_error(out_of_range(field, bandwidth, "greater than 0, at most 1e6"));
  return {};
}

std::vector<std::string> preset_names() {
  return {"mppa3", "small"};
}

Result<DeviceConfig> preset(const std::string &name) {
  DeviceConfig config;
  if (name == "mppa3")
    return config;
  if (name == "small") {
    config.name = "small";
    config.clusters = 2;
    config.pes_per_cluster = 4;
    config.spm_bytes = 256ull << 10;
    config.ddr_bytes = 256ull << 20;
    return config;
  }
  return make_error("unknown device preset '" + name +
                    "' (known: mppa3, small; a device file must end in .json or contain '/')");
}

namespace {

template <class T> Result<void> read_number(const nlohmann::json &value, const char *key, T &out) {
  if (!value.is_number())
    return make_error(std::string("device file: '") + key + "' must be a number");
  if constexpr (std::is_floating_point_v<T>) {
    out = value.get<T>();
  } else {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
      return make_error(std::string("device file: '") + key + "' must be a non-negative integer");
    uint64_t v = value.get<uint64_t>();
    if (v > std::numeric_limits<T>::max())
      return make_error(std::string("device file: '") + key + "' is out of range");
    out = static_cast<T>(v);
  }
  return {};
}

} // namespace

Result<DeviceConfig> config_from_json_text(const std::string &text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error &e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: ...".
    std::string why = e.what();
    if (auto at = why.find("] "); at != std::string::npos)
      why = why.substr(at + 2);
    return make_error("device file: not valid JSON: " + why);
  }
  if (!doc.is_object())
    return make_error("device file: top level must be an object");

  std::string base = "mppa3";
  if (auto it = doc.find("preset"); it != doc.end()) {
    if (!it->is_string())
      return make_error("device file: 'preset' must be a string");
    base = it->get<std::string>();
  }
  auto configured = preset(base);
  if (!configured)
    return configured.error();
  DeviceConfig config = configured.value();

  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string &key = it.key();
    const nlohmann::json &value = it.value();
    Result<void> r;
    if (key == "preset")
      continue;
    else if (key == "name") {
      if (!value.is_string())
        return make_error("device file: 'name' must be a string");
      config.name = value.get<std::string>();
    } else if (key == "mode") {
      std::string m = value.is_string() ? value.get<std::string>() : "";
      if (m == "lwi" || m == "LWI")
        config.mode = ExecutionMode::LWI;
      else if (m == "spmd" || m == "SPMD")
        config.mode = ExecutionMode::SPMD;
      else
        return make_error("device file: 'mode' must be \"lwi\" or \"spmd\"");
    } else if (key == "clusters")
      r = read_number(value, "clusters", config.clusters);
    else if (key == "pes_per_cluster")
      r = read_number(value, "pes_per_cluster", config.pes_per_cluster);
    else if (key == "spm_bytes")
      r = read_number(value, "spm_bytes", config.spm_bytes);
    else if (key == "spm_reserved_bytes")
      r = read_number(value, "spm_reserved_bytes", config.spm_reserved_bytes);
    else if (key == "ddr_bytes")
      r = read_number(value, "ddr_bytes", config.ddr_bytes);
    else if (key == "max_alloc_bytes")
      r = read_number(value, "max_alloc_bytes", config.max_alloc_bytes);
    else if (key == "clock_hz")
      r = read_number(value, "clock_hz", config.clock_hz);
    else if (key == "int8_macs_per_cycle")
      r = read_number(value, "int8_macs_per_cycle", config.int8_macs_per_cycle);
    else if (key == "int16_macs_per_cycle")
      r = read_number(value, "int16_macs_per_cycle", config.int16_macs_per_cycle);
    else if (key == "fp16_fmas_per_cycle")
      r = read_number(value, "fp16_fmas_per_cycle", config.fp16_fmas_per_cycle);
    else if (key == "fp32_fmas_per_cycle")
      r = read_number(value, "fp32_fmas_per_cycle", config.fp32_fmas_per_cycle);
    else if (key == "ddr_bytes_per_cycle")
      r = read_number(value, "ddr_bytes_per_cycle", config.ddr_bytes_per_cycle);
    else if (key == "noc_bytes_per_cycle")
      r = read_number(value, "noc_bytes_per_cycle", config.noc_bytes_per_cycle);
    else if (key == "dma_latency_cycles")
      r = read_number(value, "dma_latency_cycles", config.dma_latency_cycles);
    else if (key == "barrier_latency_cycles")
      r = read_number(value, "barrier_latency_cycles", config.barrier_latency_cycles);
    else if (key == "signal_latency_cycles")
      r = read_number(value, "signal_latency_cycles", config.signal_latency_cycles);
    else
      return make_error("device file: unknown key '" + key + "'");
    if (!r)
      return r.error();
  }
  if (auto v = config.validate(); !v)
    return make_error("device file: " + v.error().message);
  return config;
}

Result<DeviceConfig> config_from_file(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return make_error("cannot open device file '" + path + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  auto config = config_from_json_text(text.str());
  if (!config)
    return make_error(path + ": " + config.error().message);
  return config;
}

Result<DeviceConfig> config_from_spec(const std::string &spec) {
  bool is_path = spec.find('/') != std::string::npos ||
                 (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0);
  return is_path ? config_from_file(spec) : preset(spec);
}

Result<std::vector<DeviceConfig>> configs_from_environment() {
  const char *devices = env::get("MANYCL_DEVICES");
  std::string specs = devices ? devices : "mppa3";
  std::vector<DeviceConfig> configs;
  std::stringstream stream(specs);
  std::string spec;
  while (std::getline(stream, spec, ',')) {
    if (spec.empty())
      continue;
    auto config = config_from_spec(spec);
    if (!config)
      return make_error("MANYCL_DEVICES: " + config.error().message);
    configs.push_back(config.value());
  }
  if (configs.empty())
    return make_error("MANYCL_DEVICES='" + specs + "' names no device (give a preset: " +
                      "mppa3, small, or a device file path)");
  if (const char *mode = env::get("MANYCL_DEVICE_MODE")) {
    std::string m = mode;
    ExecutionMode chosen;
    if (m == "lwi" || m == "LWI")
      chosen = ExecutionMode::LWI;
    else if (m == "spmd" || m == "SPMD")
      chosen = ExecutionMode::SPMD;
    else
      return make_error("MANYCL_DEVICE_MODE='" + m + "' is not a mode (allowed: lwi, spmd)");
    for (auto &c : configs)
      c.mode = chosen;
  }
  return configs;
}

} // namespace manycl::device

namespace manycl::device {
std::string config_to_json(const DeviceConfig &c) {
  nlohmann::json j = {
      {"name", c.name},
      {"clusters", c.clusters},
      {"pes_per_cluster", c.pes_per_cluster},
      {"spm_bytes", c.spm_bytes},
      {"spm_reserved_bytes", c.spm_reserved_bytes},
      {"ddr_bytes", c.ddr_bytes},
      {"max_alloc_bytes", c.max_alloc_bytes},
      {"clock_hz", c.clock_hz},
      {"mode", c.mode == ExecutionMode::SPMD ? "spmd" : "lwi"},
      {"int8_macs_per_cycle", c.int8_macs_per_cycle},
      {"int16_macs_per_cycle", c.int16_macs_per_cycle},
      {"fp16_fmas_per_cycle", c.fp16_fmas_per_cycle},
      {"fp32_fmas_per_cycle", c.fp32_fmas_per_cycle},
      {"ddr_bytes_per_cycle", c.ddr_bytes_per_cycle},
      {"noc_bytes_per_cycle", c.noc_bytes_per_cycle},
      {"dma_latency_cycles", c.dma_latency_cycles},
      {"barrier_latency_cycles", c.barrier_latency_cycles},
      {"signal_latency_cycles", c.signal_latency_cycles},
  };
  return j.dump();
}
} // namespace manycl::device
