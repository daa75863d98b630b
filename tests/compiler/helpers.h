#pragma once
#include "manycl/compiler/compiler.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mct {
using namespace manycl::compiler;

inline DeviceDesc dev() {
  return DeviceDesc{};
}

/// Builds and loads, failing the test with the log on error.
std::shared_ptr<Program> buildLoad(const std::string &src, const std::string &opts = "");

/// Sets an environment variable for a scope (the compiler reads it per build).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  std::string name_, old_;
  bool had_ = false;
};

/// Runs every group of a prepared launch, x fastest, on a __local arena of its size: the
/// group's status from `run(launch, group, arena, arenaSize)`; stops at the first error.
Status forEachGroup(const Launch &l, const NDRange &r,
                    const std::function<Status(const Launch &, const uint64_t group[3], void *arena,
                                               size_t arenaSize)> &run);

/// Runs a whole NDRange, group by group, in the given mode.
Status runND(const Program &p, const std::string &kernel, const std::vector<ArgValue> &args,
             const NDRange &r, ExecMode mode, unsigned pes = 4);

PeTeam &team(unsigned n);

struct ModeParam {
  ExecMode mode;
  unsigned pes;
};
inline std::string modeName(const testing::TestParamInfo<ModeParam> &i) {
  return i.param.mode == ExecMode::LWI ? "LWI" : "SPMD" + std::to_string(i.param.pes);
}
} // namespace mct
