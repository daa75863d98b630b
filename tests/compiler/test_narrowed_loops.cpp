// Work-item loops narrowed by their guard (narrow_loops.cpp): a guard that fails from some
// work-item on (a tree reduction's `l < s`, `s > l`, `l <= m`) stops the loop there. Results
// against the host for local sizes 1 to 256, LWI and SPMD with 4 and 16 PEs (SPMD slices start
// past the bound), also for guard forms left alone (a 32-bit signed id, `== 0`) and guards whose
// failing items still do something (a store before the guard, an else branch); guards on the
// global id and guards around loops (hashcat's shape) with global offsets; golden tests show which
// loops were narrowed.
#include "helpers.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace mct;

namespace {

class NarrowedLoops : public testing::TestWithParam<ModeParam> {};

const char *kTree = R"(
kernel void tree(global const int *in, global int *out, local int *t) {
  size_t l = get_local_id(0);
  t[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      t[l] += t[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = t[0];
}
)";

// The same tree on the host, local size `ls` (items past 2 x s are left out for sizes that are
// not powers of two, as on the device).
int host_tree(const std::vector<int> &in, size_t base, size_t ls) {
  std::vector<int> t(in.begin() + long(base), in.begin() + long(base + ls));
  for (size_t s = ls / 2; s > 0; s >>= 1)
    for (size_t l = 0; l < s; ++l)
      t[l] += t[l + s];
  return t[0];
}

TEST_P(NarrowedLoops, TreeReduction) {
  auto p = buildLoad(kTree);
  ASSERT_TRUE(p);
  for (unsigned local : {1u, 2u, 7u, 64u, 100u, 256u}) {
    SCOPED_TRACE(local);
    const unsigned groups = 3, n = local * groups;
    std::vector<int> in(n), out(groups, -1);
    for (unsigned i = 0; i < n; ++i)
      in[i] = int(i * 37 % 101) - 50;
    NDRange r;
    r.global[0] = n;
    r.local[0] = local;
    ASSERT_TRUE(runND(*p, "tree",
                      {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()),
                       ArgValue::local(local * sizeof(int))},
                      r, GetParam().mode, GetParam().pes));
    for (unsigned g = 0; g < groups; ++g)
      EXPECT_EQ(out[g], host_tree(in, size_t(g) * local, local)) << g;
  }
}

// One guard form per kernel, so that each is the loop's only branch; `kept_*` have failing
// items that still store something.
const char *kGuards = R"(
kernel void lt_signed(global int *out, int n) {
  int l = get_local_id(0);
  if (l < n)
    out[get_global_id(0)] = l + 1;
}
kernel void gt_swapped(global int *out, uint m) {
  uint l = get_local_id(0);
  if (m > l)
    out[get_global_id(0)] = 7;
}
kernel void le_unsigned(global int *out, uint m) {
  if (get_local_id(0) <= m)
    out[get_global_id(0)] += 3;
}
kernel void eq_zero(global int *out, uint m) {
  if (get_local_id(0) == 0)
    out[get_global_id(0)] = 9 + m;
}
kernel void global_bound(global int *out, uint m) {
  if (get_global_id(0) < m)
    out[get_global_id(0)] = 5;
}
kernel void kept_store_before(global int *out, int n) {
  out[get_global_id(0)] = 1;
  if ((int)get_local_id(0) < n)
    out[get_global_id(0)] = 2;
}
kernel void kept_else(global int *out, int n) {
  if ((int)get_local_id(0) < n)
    out[get_global_id(0)] = 3;
  else
    out[get_global_id(0)] = 4;
}
)";

// What item `g` (local id `l`) leaves in out[g], starting from `before`.
int host_guard(const std::string &k, int before, unsigned g, unsigned l, int n) {
  const unsigned m = unsigned(n);
  if (k == "lt_signed")
    return int(l) < n ? int(l) + 1 : before;
  if (k == "gt_swapped")
    return m > l ? 7 : before;
  if (k == "le_unsigned")
    return l <= m ? before + 3 : before;
  if (k == "eq_zero")
    return l == 0 ? int(9 + m) : before;
  if (k == "global_bound")
    return g < m ? 5 : before;
  if (k == "kept_store_before")
    return int(l) < n ? 2 : 1;
  return int(l) < n ? 3 : 4; // kept_else
}

TEST_P(NarrowedLoops, GuardForms) {
  auto p = buildLoad(kGuards);
  ASSERT_TRUE(p);
  for (const char *k : {"lt_signed", "gt_swapped", "le_unsigned", "eq_zero", "global_bound",
                        "kept_store_before", "kept_else"})
    for (unsigned local : {1u, 7u, 32u, 100u})
      for (int n : {-3, 0, 1, 5, 40, 1000}) {
        if (n < 0 && std::string(k) != "lt_signed" && std::string(k) != "kept_store_before" &&
            std::string(k) != "kept_else")
          continue; // unsigned bounds: -3 is 2^32 - 3, as good as 1000
        SCOPED_TRACE(std::string(k) + " local " + std::to_string(local) + " n " +
                     std::to_string(n));
        const unsigned total = local * 3;
        std::vector<int> out(total);
        for (unsigned i = 0; i < total; ++i)
          out[i] = -int(i) - 1;
        const std::vector<int> before = out;
        NDRange r;
        r.global[0] = total;
        r.local[0] = local;
        ASSERT_TRUE(runND(*p, k, {ArgValue::pointer(out.data()), ArgValue::of(n)}, r,
                          GetParam().mode, GetParam().pes));
        for (unsigned g = 0; g < total; ++g)
          ASSERT_EQ(out[g], host_guard(k, before[g], g, g % local, n)) << g;
      }
}

// Guards around loops (the work-item loop is not innermost): hashcat's bounds check on the 64-bit
// global id that returns before its candidate loop (the bound an argument, or read from a buffer
// as hashcat's kernel_param->gid_max), a local-id guard around a loop, and a kernel whose failing
// items still store after the loop (kept). Global offsets move the global id.
const char *kOuterGuards = R"(
kernel void outer_global(global uint *out, global const uint *in, ulong gid_max, uint loops) {
  const ulong gid = get_global_id(0);
  if (gid >= gid_max) return;
  const size_t i = gid - get_global_offset(0);
  uint h = in[i];
  for (uint k = 0; k < loops; k++)
    h = h * 31u + k;
  out[i] = h;
}
kernel void outer_local(global uint *out, ulong m, uint loops) {
  const size_t l = get_local_id(0);
  if (l < m) {
    uint s = 1;
    for (uint k = 0; k < loops; k++)
      s = s * 3u + (uint)l;
    out[get_global_id(0) - get_global_offset(0)] = s;
  }
}
typedef struct { ulong gid_max; uint loops; } param_t;
kernel void outer_param(global uint *out, global const param_t *p) {
  const ulong gid = get_global_id(0);
  if (gid >= p->gid_max) return;
  uint h = (uint)gid;
  for (uint k = 0; k < p->loops; k++)
    h = h * 31u + k;
  out[gid - get_global_offset(0)] = h;
}
kernel void outer_kept(global uint *out, ulong gid_max, uint loops) {
  const size_t gid = get_global_id(0);
  uint h = 5;
  if (gid < gid_max)
    for (uint k = 0; k < loops; k++)
      h = h * 7u + k;
  out[gid - get_global_offset(0)] = h;
}
)";

// What item i (global id `gid`, local id `l`) leaves in out[i], starting from `before`.
uint32_t host_outer(const std::string &k, uint32_t before, uint32_t in, uint64_t gid, uint64_t l,
                    uint64_t bound, uint32_t loops) {
  if (k == "outer_global") {
    if (gid >= bound)
      return before;
    uint32_t h = in;
    for (uint32_t i = 0; i < loops; ++i)
      h = h * 31u + i;
    return h;
  }
  if (k == "outer_param") {
    if (gid >= bound)
      return before;
    uint32_t h = uint32_t(gid);
    for (uint32_t i = 0; i < loops; ++i)
      h = h * 31u + i;
    return h;
  }
  if (k == "outer_local") {
    if (l >= bound)
      return before;
    uint32_t s = 1;
    for (uint32_t i = 0; i < loops; ++i)
      s = s * 3u + uint32_t(l);
    return s;
  }
  uint32_t h = 5; // outer_kept
  if (gid < bound)
    for (uint32_t i = 0; i < loops; ++i)
      h = h * 7u + i;
  return h;
}

TEST_P(NarrowedLoops, GuardsAroundLoops) {
  auto p = buildLoad(kOuterGuards);
  ASSERT_TRUE(p);
  for (const char *k : {"outer_global", "outer_param", "outer_local", "outer_kept"})
    for (unsigned local : {1u, 7u, 32u, 100u})
      for (uint64_t offset : {uint64_t(0), uint64_t(5)}) {
        const unsigned total = local * 3;
        for (uint64_t bound : {uint64_t(0), uint64_t(1), offset + 4, offset + total / 2,
                               offset + total, ~uint64_t(0)})
          for (uint32_t loops : {0u, 3u}) {
            SCOPED_TRACE(std::string(k) + " local " + std::to_string(local) + " offset " +
                         std::to_string(offset) + " bound " + std::to_string(bound) + " loops " +
                         std::to_string(loops));
            std::vector<uint32_t> in(total), out(total);
            for (unsigned i = 0; i < total; ++i) {
              in[i] = i * 2654435761u;
              out[i] = ~i;
            }
            const std::vector<uint32_t> before = out;
            NDRange r;
            r.global[0] = total;
            r.local[0] = local;
            r.offset[0] = offset;
            struct {
              uint64_t gid_max;
              uint32_t loops, pad;
            } param{bound, loops, 0};
            std::vector<ArgValue> args{ArgValue::pointer(out.data())};
            if (std::string(k) == "outer_param") {
              args.push_back(ArgValue::pointer(&param));
            } else {
              if (std::string(k) == "outer_global")
                args.push_back(ArgValue::pointer(in.data()));
              args.push_back(ArgValue::of(bound));
              args.push_back(ArgValue::of(loops));
            }
            ASSERT_TRUE(runND(*p, k, args, r, GetParam().mode, GetParam().pes));
            for (unsigned i = 0; i < total; ++i)
              ASSERT_EQ(out[i],
                        host_outer(k, before[i], in[i], offset + i, i % local, bound, loops))
                  << i;
          }
      }
}

INSTANTIATE_TEST_SUITE_P(Modes, NarrowedLoops,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4},
                                         ModeParam{ExecMode::SPMD, 16}),
                         modeName);

// The final IR of `src` (MANYCL_DUMP_IR, no cache).
std::string dumpedIr(const std::string &src) {
  const std::string dump = (std::filesystem::temp_directory_path() /
                            ("manycl-narrowed-" + std::to_string(getpid()) + ".ll"))
                               .string();
  setenv("MANYCL_DUMP_IR", dump.c_str(), 1);
  setenv("MANYCL_CACHE", "0", 1);
  auto p = buildLoad(src);
  unsetenv("MANYCL_DUMP_IR");
  unsetenv("MANYCL_CACHE");
  EXPECT_TRUE(p);
  std::ifstream f(dump);
  std::stringstream ss;
  ss << f.rdbuf();
  std::remove(dump.c_str());
  return ss.str();
}

std::string functionBody(const std::string &ir, const std::string &name) {
  const size_t at = ir.find("@" + name + "(");
  if (at == std::string::npos)
    return {};
  const size_t start = ir.rfind("\ndefine ", at);
  return ir.substr(start, ir.find("\n}\n", at) - start);
}

// How many loops of `body` carry the `manycl.narrowed` property in the module `ir`.
int narrowedLoops(const std::string &ir, const std::string &body) {
  std::smatch m;
  if (!std::regex_search(ir, m, std::regex(R"((![0-9]+) = !\{!"manycl\.narrowed"\})")))
    return 0;
  const std::string prop = m[1];
  std::set<std::string> ids;
  const std::regex loopRef(R"(!llvm\.loop (![0-9]+))");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), loopRef);
       it != std::sregex_iterator(); ++it)
    ids.insert((*it)[1]);
  int n = 0;
  for (const std::string &id : ids) {
    const size_t def = ir.find("\n" + id + " = distinct !{");
    if (def == std::string::npos)
      continue;
    const std::string line = ir.substr(def + 1, ir.find('\n', def + 1) - def - 1);
    if (std::regex_search(line, std::regex(prop + R"([,}])")))
      ++n;
  }
  return n;
}

// The tree's step runs the items below s without masks (before: a masked load, add and masked
// store over the whole group in every step); the kernels whose failing items store keep their
// guard.
TEST(NarrowedLoopsGolden, TreeStepWithoutMasksAndKeptGuards) {
  const std::string tree = dumpedIr(kTree);
  const std::string region = functionBody(tree, "__manycl_region_tree");
  ASSERT_FALSE(region.empty()) << tree;
  EXPECT_EQ(region.find("llvm.masked.store"), std::string::npos) << region;
  EXPECT_EQ(region.find("llvm.masked.load"), std::string::npos) << region;
  EXPECT_GE(narrowedLoops(tree, region), 1) << region;

  // Narrowed where the compared id does not wrap: 64-bit local ids, and the global id (its
  // no-wrap adds). Not (yet) the 32-bit signed copy of the id or `== 0` (a 32-bit induction
  // variable without no-wrap flags): those keep their guard, and their results are checked above.
  const std::string guards = dumpedIr(kGuards);
  for (const char *k : {"gt_swapped", "le_unsigned", "global_bound"}) {
    const std::string body = functionBody(guards, std::string("__manycl_wg_") + k);
    ASSERT_FALSE(body.empty()) << k;
    EXPECT_GE(narrowedLoops(guards, body), 1) << k << "\n" << body;
    EXPECT_EQ(body.find("llvm.masked.store"), std::string::npos) << k << "\n" << body;
  }
  for (const char *k : {"kept_store_before", "kept_else"}) {
    const std::string body = functionBody(guards, std::string("__manycl_wg_") + k);
    ASSERT_FALSE(body.empty()) << k;
    EXPECT_EQ(narrowedLoops(guards, body), 0) << k << "\n" << body;
  }
}

// Guards around loops: the work-item loop stops at the bound and its body, loop included, runs
// unguarded; hashcat's `if (gid >= gid_max) return;` is the global-id form, and `outer_param`'s
// bound is read from a buffer at the start of each item (stores to `out` may alias it).
TEST(NarrowedLoopsGolden, GuardsAroundLoops) {
  const std::string ir = dumpedIr(kOuterGuards);
  for (const char *k : {"outer_global", "outer_param", "outer_local"}) {
    const std::string body = functionBody(ir, std::string("__manycl_wg_") + k);
    ASSERT_FALSE(body.empty()) << k;
    EXPECT_GE(narrowedLoops(ir, body), 1) << k << "\n" << body;
  }
  const std::string kept = functionBody(ir, "__manycl_wg_outer_kept");
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(narrowedLoops(ir, kept), 0) << kept;
}

} // namespace
