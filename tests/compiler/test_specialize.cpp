// Specialization by local size: the specialized code computes what the generic code computes, at
// the same modeled cost, shares the program's variables, and is made when the policy says so.
#include "helpers.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace mct {
namespace {

struct CostedRun {
  std::vector<uint64_t> cycles; // per group, in launch order
  bool specialized = false;
};

// Runs every group of the NDRange with its modeled cost (LWI, one modeled PE per group, as the
// runtime runs them whole) and returns the cycles of each group.
CostedRun runCosted(const Program &p, const std::string &kernel, const std::vector<ArgValue> &args,
                    const NDRange &r, Launch::Specialize specialize, unsigned pes = 16) {
  CostedRun out;
  const Kernel *k = p.kernel(kernel);
  EXPECT_NE(k, nullptr) << kernel;
  if (!k)
    return out;
  auto l = Launch::prepare(*k, args, r, specialize);
  EXPECT_TRUE(l.ok()) << l.status().message;
  if (!l.ok())
    return out;
  out.specialized = l->specialized();
  Status s = forEachGroup(*l, r, [&](const Launch &launch, const uint64_t g[3], void *a, size_t n) {
    GroupCost cost;
    cost.pes = pes;
    Status st = launch.runGroup(g, a, n, ExecMode::LWI, nullptr, &cost);
    out.cycles.push_back(cost.cycles);
    return st;
  });
  EXPECT_TRUE(s.ok()) << s.message;
  return out;
}

NDRange range3(const uint64_t global[3], const uint64_t local[3]) {
  NDRange r;
  r.work_dim = 3;
  for (int d = 0; d < 3; ++d) {
    r.global[d] = global[d];
    r.local[d] = local[d];
  }
  return r;
}

// Every work-item function that depends on the local size, in three dimensions, with partial
// groups at the end of each dimension (they run the generic code).
TEST(Specialization, WorkItemFunctionsAndCostsMatchTheGenericCode) {
  const std::string src = R"(
    kernel void wi(global ulong *o, global float *f) {
      size_t i = get_global_linear_id();
      global ulong *p = o + i * 6;
      p[0] = get_local_id(0) + 100 * get_local_id(1) + 10000 * get_local_id(2);
      p[1] = get_local_size(0) + 100 * get_local_size(1) + 10000 * get_local_size(2);
      p[2] = get_enqueued_local_size(0) * get_enqueued_local_size(1) * get_enqueued_local_size(2);
      p[3] = get_local_linear_id();
      p[4] = get_group_id(0) + 100 * get_group_id(1) + 10000 * get_group_id(2);
      uint d = (uint)(i % 4);
      p[5] = get_local_size(d) + 10 * get_local_id(d);
      float acc = 0.0f;
      for (size_t k = 0; k < get_local_size(0); ++k)
        acc = acc * 0.5f + (float)(k + get_local_id(0));
      f[i] = acc;
    })";
  auto p = buildLoad(src, "-cl-std=CL2.0");
  ASSERT_TRUE(p);
  const uint64_t G[3] = {37, 9, 5}, L[3] = {16, 4, 2};
  const NDRange r = range3(G, L);
  const size_t items = G[0] * G[1] * G[2];
  std::vector<uint64_t> generic(items * 6, ~0ull), special(items * 6, 0);
  std::vector<float> genericF(items, -1.0f), specialF(items, 0.0f);
  CostedRun g =
      runCosted(*p, "wi", {ArgValue::pointer(generic.data()), ArgValue::pointer(genericF.data())},
                r, Launch::Specialize::Never);
  CostedRun s =
      runCosted(*p, "wi", {ArgValue::pointer(special.data()), ArgValue::pointer(specialF.data())},
                r, Launch::Specialize::Now);
  EXPECT_FALSE(g.specialized);
  EXPECT_TRUE(s.specialized);
  EXPECT_EQ(generic, special);
  EXPECT_EQ(0, std::memcmp(genericF.data(), specialF.data(), items * sizeof(float)));
  EXPECT_EQ(g.cycles, s.cycles);
  // The generic results are right, so both are.
  for (size_t i = 0; i < items; ++i) {
    const uint64_t x = i % G[0], y = i / G[0] % G[1], z = i / (G[0] * G[1]);
    const uint64_t lx = std::min(L[0], G[0] - x / L[0] * L[0]);
    const uint64_t ly = std::min(L[1], G[1] - y / L[1] * L[1]);
    const uint64_t lz = std::min(L[2], G[2] - z / L[2] * L[2]);
    ASSERT_EQ(generic[i * 6 + 0], x % L[0] + 100 * (y % L[1]) + 10000 * (z % L[2])) << i;
    ASSERT_EQ(generic[i * 6 + 1], lx + 100 * ly + 10000 * lz) << i;
    ASSERT_EQ(generic[i * 6 + 2], L[0] * L[1] * L[2]) << i;
  }
}

// A reduction through __local memory with barriers (region entry points), the tree's loop
// bounded by the local size; the last group is partial.
TEST(Specialization, BarrierKernelsMatchTheGenericCode) {
  const std::string src = R"(
    kernel void reduce(global const float *in, global float *out, local float *tmp) {
      size_t l = get_local_id(0), n = get_local_size(0);
      tmp[l] = in[get_global_id(0)];
      barrier(CLK_LOCAL_MEM_FENCE);
      for (size_t s = (n + 1) / 2, w = n; w > 1; w = s, s = (s + 1) / 2) {
        if (l < w - s)
          tmp[l] += tmp[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
      }
      if (l == 0)
        out[get_group_id(0)] = tmp[0];
    })";
  auto p = buildLoad(src, "-cl-std=CL2.0");
  ASSERT_TRUE(p);
  const uint64_t G[3] = {1000, 1, 1}, L[3] = {128, 1, 1};
  const NDRange r = range3(G, L);
  std::vector<float> in(G[0]);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 97) * 0.25f - 3.0f;
  const size_t groups = r.numGroups(0);
  std::vector<float> generic(groups, -1.0f), special(groups, 0.0f);
  CostedRun g = runCosted(*p, "reduce",
                          {ArgValue::pointer(in.data()), ArgValue::pointer(generic.data()),
                           ArgValue::local(L[0] * sizeof(float))},
                          r, Launch::Specialize::Never);
  CostedRun s = runCosted(*p, "reduce",
                          {ArgValue::pointer(in.data()), ArgValue::pointer(special.data()),
                           ArgValue::local(L[0] * sizeof(float))},
                          r, Launch::Specialize::Now);
  EXPECT_TRUE(s.specialized);
  EXPECT_EQ(0, std::memcmp(generic.data(), special.data(), groups * sizeof(float)));
  EXPECT_EQ(g.cycles, s.cycles);
  for (size_t gi = 0; gi < groups; ++gi) {
    double sum = 0;
    for (size_t i = gi * L[0]; i < std::min<size_t>(G[0], (gi + 1) * L[0]); ++i)
      sum += in[i];
    EXPECT_NEAR(generic[gi], sum, 1e-3) << gi;
  }
}

// Program-scope variables are the program's: the specialized full groups and the generic
// partial group count into the same one.
TEST(Specialization, SharesProgramScopeVariables) {
  const std::string src = R"(
    global int hits = 0;
    kernel void count(void) { atomic_inc(&hits); }
    kernel void read(global int *out) { *out = hits; })";
  auto p = buildLoad(src, "-cl-std=CL2.0");
  ASSERT_TRUE(p);
  const uint64_t G[3] = {300, 1, 1}, L[3] = {64, 1, 1};
  CostedRun s = runCosted(*p, "count", {}, range3(G, L), Launch::Specialize::Now);
  EXPECT_TRUE(s.specialized);
  int hits = -1;
  const uint64_t one[3] = {1, 1, 1};
  runCosted(*p, "read", {ArgValue::pointer(&hits)}, range3(one, one), Launch::Specialize::Never);
  EXPECT_EQ(hits, 300);
}

// When specializations are made: after enough groups or launches of one size, at once for a
// required size, never for one-item groups, for at most a few sizes per kernel.
TEST(Specialization, MadeWhenItPays) {
  if (std::getenv("MANYCL_SPECIALIZE"))
    GTEST_SKIP() << "MANYCL_SPECIALIZE overrides the policy under test";
  const std::string src = R"(
    kernel void add(global int *a) { a[get_global_id(0)] += (int)get_local_size(0); }
    kernel __attribute__((reqd_work_group_size(8, 1, 1))) void fixed(global int *a) {
      a[get_global_id(0)] += 1;
    })";
  auto p = buildLoad(src);
  ASSERT_TRUE(p);
  std::vector<int> a(4096, 0);
  const std::vector<ArgValue> args = {ArgValue::pointer(a.data())};
  auto launch = [&](const char *kernel, uint64_t global, uint64_t local) {
    NDRange r;
    r.global[0] = global;
    r.local[0] = local;
    auto l = Launch::prepare(*p->kernel(kernel), args, r);
    EXPECT_TRUE(l.ok());
    return l.ok() && l->specialized();
  };
  // The launch that earns a specialization starts its compile in the background and runs the
  // generic code itself; later launches of the size run the specialized code once it is made
  // (how soon is not fixed: from the object cache it can be the very next launch).
  auto settled = [&](const char *kernel, uint64_t global, uint64_t local) {
    p->waitForSpecializations();
    return launch(kernel, global, local);
  };
  // Few groups: made after the fourth launch of the size.
  EXPECT_FALSE(launch("add", 64, 32));
  EXPECT_FALSE(launch("add", 64, 32));
  EXPECT_FALSE(launch("add", 64, 32));
  EXPECT_FALSE(settled("add", 64, 32)); // the fourth launch starts it and runs generic code
  EXPECT_TRUE(settled("add", 64, 32));
  // Enough groups in one launch: made after that launch.
  EXPECT_FALSE(launch("add", 4096, 16));
  EXPECT_TRUE(settled("add", 4096, 16));
  // One-item groups have no loop to specialize.
  for (int i = 0; i < 8; ++i)
    EXPECT_FALSE(settled("add", 4096, 1));
  // At most four sizes per kernel (32, 16 and these two; one-item groups do not count).
  launch("add", 4096, 64);
  EXPECT_TRUE(settled("add", 4096, 64));
  launch("add", 4096, 8);
  EXPECT_TRUE(settled("add", 4096, 8));
  launch("add", 4096, 4);
  EXPECT_FALSE(settled("add", 4096, 4));
  // A required local size: the first launch, without waiting.
  EXPECT_TRUE(launch("fixed", 8, 8));
  // Specialize::Now: this launch.
  NDRange r;
  r.global[0] = 64;
  r.local[0] = 2;
  auto now = Launch::prepare(*p->kernel("add"), args, r, Launch::Specialize::Now);
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE(now->specialized()); // the kernel's four sizes are taken
}

// A program released while specializations compile in the background waits for them (no
// compile outlives its JIT; ASan and TSan runs check it).
TEST(Specialization, ProgramReleasedWhileCompilingInTheBackground) {
  if (std::getenv("MANYCL_SPECIALIZE"))
    GTEST_SKIP() << "MANYCL_SPECIALIZE overrides the policy under test";
  const std::string src = R"(
    kernel void a(global int *x) { x[get_global_id(0)] += (int)get_local_size(0); }
    kernel void b(global int *x) { x[get_global_id(0)] *= (int)get_local_size(0); })";
  std::vector<int> x(4096, 1);
  const std::vector<ArgValue> args = {ArgValue::pointer(x.data())};
  for (int round = 0; round < 3; ++round) {
    auto p = buildLoad(src);
    ASSERT_TRUE(p);
    for (const char *k : {"a", "b"})
      for (uint64_t local : {16, 32, 64}) {
        NDRange r;
        r.global[0] = 4096;
        r.local[0] = local;
        ASSERT_TRUE(Launch::prepare(*p->kernel(k), args, r).ok()); // starts a compile
      }
  } // released with compiles running
}

// A process that exits with a program it never released, its specialization still compiling
// in the background, exits cleanly (exit() waits for the compile; without that wait this test
// still passed in 3 runs here: it guards the clean exit, it does not prove the race).
TEST(Specialization, ProcessExitsWhileCompilingInTheBackground) {
  if (std::getenv("MANYCL_SPECIALIZE"))
    GTEST_SKIP() << "MANYCL_SPECIALIZE overrides the policy under test";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto p = buildLoad("kernel void k(global int *x) { x[get_global_id(0)] += "
                           "(int)get_local_size(0); }");
        if (!p)
          std::exit(3);
        static std::vector<int> x(4096, 1);
        const std::vector<ArgValue> args = {ArgValue::pointer(x.data())};
        NDRange r;
        r.global[0] = 4096;
        r.local[0] = 32;
        if (!Launch::prepare(*p->kernel("k"), args, r).ok()) // starts the compile
          std::exit(4);
        new std::shared_ptr<Program>(p); // never released
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// The object code of a specialization goes to the kernel cache: a second load of the program
// (another process, or here another Program) reuses it.
TEST(Specialization, ObjectCodeIsCached) {
  if (cacheDirectory().empty())
    GTEST_SKIP() << "kernel cache disabled (MANYCL_CACHE=0)";
  // A cache of its own: other test processes write to the shared one meanwhile.
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("manycl-specialization-" + std::to_string(getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  const ScopedEnv cacheDir("MANYCL_CACHE_DIR", dir.c_str());
  const long salt =
      static_cast<long>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
  const std::string src = "kernel void k(global long *a) { a[get_global_id(0)] = "
                          "(long)get_local_size(0) * get_local_id(0) + " +
                          std::to_string(salt) + "L; }";
  auto objects = [&] {
    size_t n = 0;
    for (auto &e : std::filesystem::directory_iterator(dir))
      n += e.path().extension() == ".obj";
    return n;
  };
  const uint64_t G[3] = {256, 1, 1}, L[3] = {32, 1, 1};
  std::vector<long> a(256, 0);
  auto p1 = buildLoad(src);
  ASSERT_TRUE(p1);
  const size_t before = objects();
  EXPECT_TRUE(
      runCosted(*p1, "k", {ArgValue::pointer(a.data())}, range3(G, L), Launch::Specialize::Now)
          .specialized);
  EXPECT_EQ(objects(), before + 1);
  auto p2 = buildLoad(src);
  ASSERT_TRUE(p2);
  std::fill(a.begin(), a.end(), 0);
  EXPECT_TRUE(
      runCosted(*p2, "k", {ArgValue::pointer(a.data())}, range3(G, L), Launch::Specialize::Now)
          .specialized);
  EXPECT_EQ(objects(), before + 1);
  std::filesystem::remove_all(dir);
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(a[i], long(32 * (i % 32) + salt)) << i;
}

} // namespace
} // namespace mct
