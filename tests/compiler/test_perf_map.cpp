// MANYCL_PERF_MAP=1 (read once per process): every JIT'ed entry point is listed in
// /tmp/perf-<pid>.map ("start size name", hexadecimal) for perf. The CTest entry
// compiler.PerfMapListsJitFunctions runs this test with the variable set; in the plain run of
// the suite it checks that no map is written.
#include "helpers.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace mct;

namespace {

TEST(PerfMap, ListsJitFunctionsWhenAsked) {
  const char *v = std::getenv("MANYCL_PERF_MAP");
  const bool asked = v && *v && std::string(v) != "0";
  auto p = buildLoad(R"(
kernel void perf_map_plain(global int *out) { out[get_global_id(0)] = 1; }
kernel void perf_map_barrier(global int *out, local int *t) {
  t[get_local_id(0)] = (int)get_global_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  out[get_global_id(0)] = t[0];
})");
  ASSERT_TRUE(p);
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  if (!asked) {
    EXPECT_FALSE(std::filesystem::exists(path));
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  bool plain = false, region = false;
  for (std::string line; std::getline(f, line);) {
    std::istringstream ls(line);
    std::string start, size, name;
    ls >> std::hex >> start >> size >> name;
    ASSERT_FALSE(name.empty()) << line;
    const unsigned long long a = std::stoull(start, nullptr, 16),
                             n = std::stoull(size, nullptr, 16);
    EXPECT_NE(a, 0u) << line;
    EXPECT_GT(n, 0u) << line;
    // The entry point's code really is there: its first bytes are readable.
    volatile const unsigned char *code = reinterpret_cast<const unsigned char *>(a);
    (void)*code;
    plain |= name == "__manycl_wg_perf_map_plain";
    region |= name == "__manycl_region_perf_map_barrier";
  }
  EXPECT_TRUE(plain);
  EXPECT_TRUE(region);
  std::filesystem::remove(path);
}

} // namespace
