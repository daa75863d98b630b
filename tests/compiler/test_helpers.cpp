#include "helpers.h"

#include <map>
#include <mutex>

namespace mct {

std::shared_ptr<Program> buildLoad(const std::string &src, const std::string &opts) {
  BuildResult b = build(src, opts, dev());
  EXPECT_TRUE(b.ok()) << b.status.message << "\n" << b.log;
  if (!b.ok())
    return nullptr;
  auto p = load(b.binary);
  EXPECT_TRUE(p.ok()) << p.status().message;
  if (!p.ok())
    return nullptr;
  return p.value();
}

PeTeam &team(unsigned n) {
  static std::mutex mu;
  static std::map<unsigned, std::unique_ptr<PeTeam>> teams;
  std::lock_guard<std::mutex> l(mu);
  auto &t = teams[n];
  if (!t)
    t = makeThreadPeTeam(n);
  return *t;
}

Status runND(const Program &p, const std::string &kernel, const std::vector<ArgValue> &args,
             const NDRange &r, ExecMode mode, unsigned pes) {
  const Kernel *k = p.kernel(kernel);
  if (!k)
    return Status::error(ErrorCode::InvalidKernelName, kernel);
  auto l = Launch::prepare(*k, args, r);
  if (!l.ok())
    return l.status();
  return forEachGroup(*l, r, [&](const Launch &launch, const uint64_t g[3], void *a, size_t n) {
    return launch.runGroup(g, a, n, mode, mode == ExecMode::SPMD ? &team(pes) : nullptr);
  });
}

Status forEachGroup(const Launch &l, const NDRange &r,
                    const std::function<Status(const Launch &, const uint64_t group[3], void *arena,
                                               size_t arenaSize)> &run) {
  const size_t arenaSize = l.localMemSize();
  std::vector<uint64_t> arena(arenaSize / 8 + 16);
  void *a =
      reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(arena.data()) + 63) & ~uintptr_t(63));
  for (uint64_t gz = 0; gz < r.numGroups(2); ++gz)
    for (uint64_t gy = 0; gy < r.numGroups(1); ++gy)
      for (uint64_t gx = 0; gx < r.numGroups(0); ++gx) {
        const uint64_t g[3] = {gx, gy, gz};
        if (Status s = run(l, g, a, arenaSize); !s)
          return s;
      }
  return Status::success();
}

} // namespace mct
