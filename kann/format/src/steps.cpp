#include "kann/steps.h"

#include <nlohmann/json.hpp>

namespace kann::format {

std::vector<std::string> step_names(const Program &program) {
  if (program.report_json.empty())
    return {};
  const auto report = nlohmann::json::parse(program.report_json, nullptr, false);
  if (report.is_discarded() || !report.contains("ops") || !report["ops"].is_array())
    return {};
  std::vector<std::string> names{"prologue"};
  for (const auto &op : report["ops"]) {
    if (!op.is_object() || !op.contains("name") || !op["name"].is_string())
      return {};
    std::string name = op["name"].get<std::string>();
    if (op.contains("op") && op["op"].is_string())
      name += " (" + op["op"].get<std::string>() + ")";
    names.push_back(std::move(name));
  }
  const bool multi = program.cluster_count > 1;
  for (const auto &stream : program.streams) {
    size_t steps = 0;
    uint32_t previous = 0;
    for (const auto &r : stream) {
      steps += ends_step(previous, r.function_id, multi);
      previous = r.function_id;
    }
    if (steps != names.size())
      return {};
  }
  return names;
}

} // namespace kann::format
