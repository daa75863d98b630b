#include "helpers.h"

using namespace mct;

TEST(Basic, VectorAdd) {
  auto p = buildLoad(R"(
    __kernel void add(__global const float* a, __global const float* b, __global float* c, float s) {
      size_t i = get_global_id(0);
      c[i] = a[i] + b[i] * s;
    })");
  ASSERT_TRUE(p);
  const int n = 1000;
  std::vector<float> a(n), b(n), c(n, -1);
  for (int i = 0; i < n; ++i) {
    a[i] = i;
    b[i] = 2 * i;
  }
  NDRange r;
  r.global[0] = n;
  r.local[0] = 100;
  float s = 0.5f;
  for (ExecMode m : {ExecMode::LWI, ExecMode::SPMD}) {
    std::fill(c.begin(), c.end(), -1);
    ASSERT_TRUE(runND(*p, "add",
                      {ArgValue::pointer(a.data()), ArgValue::pointer(b.data()),
                       ArgValue::pointer(c.data()), ArgValue::of(s)},
                      r, m));
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(c[i], a[i] + b[i] * s) << i;
  }
}

class WorkItem : public testing::TestWithParam<ModeParam> {};

// Every work-item function, 3-D, global offsets, non-uniform last groups.
TEST_P(WorkItem, FunctionsOffsetsNonUniform) {
  for (bool barrier : {false, true}) {
    std::string src = std::string(R"(
      __kernel void wi(__global ulong* o) {
        size_t gx = get_global_id(0) - get_global_offset(0), gy = get_global_id(1) - get_global_offset(1),
               gz = get_global_id(2) - get_global_offset(2);
        size_t idx = (gz * get_global_size(1) + gy) * get_global_size(0) + gx;
        __global ulong* p = o + idx * 12;
        )") + (barrier ? "barrier(CLK_GLOBAL_MEM_FENCE);" : "") +
                      R"(
        p[0] = get_global_id(0) + 1000 * get_global_id(1) + 1000000 * get_global_id(2);
        p[1] = get_local_id(0) + 100 * get_local_id(1) + 10000 * get_local_id(2);
        p[2] = get_group_id(0) + 100 * get_group_id(1) + 10000 * get_group_id(2);
        p[3] = get_local_size(0) + 100 * get_local_size(1) + 10000 * get_local_size(2);
        p[4] = get_enqueued_local_size(0) + 100 * get_enqueued_local_size(1);
        p[5] = get_num_groups(0) + 100 * get_num_groups(1) + 10000 * get_num_groups(2);
        p[6] = get_work_dim();
        p[7] = get_global_linear_id();
        p[8] = get_local_linear_id();
        p[9] = get_local_id(3) + get_global_id(7) + get_group_id(5);
        p[10] = get_local_size(3) + get_global_size(4) + get_num_groups(9);
        uint d = (uint)(get_global_id(0) % 4);
        p[11] = get_local_id(d) + 10 * get_global_size(d);
      })";
    auto p = buildLoad(src, "-cl-std=CL2.0");
    ASSERT_TRUE(p);
    NDRange r;
    r.work_dim = 3;
    const uint64_t G[3] = {7, 5, 3}, Lc[3] = {4, 2, 2}, O[3] = {10, 20, 30};
    for (int d = 0; d < 3; ++d) {
      r.global[d] = G[d];
      r.local[d] = Lc[d];
      r.offset[d] = O[d];
    }
    std::vector<uint64_t> o(7 * 5 * 3 * 12, 0);
    ASSERT_TRUE(runND(*p, "wi", {ArgValue::pointer(o.data())}, r, GetParam().mode, GetParam().pes));
    for (uint64_t z = 0; z < G[2]; ++z)
      for (uint64_t y = 0; y < G[1]; ++y)
        for (uint64_t x = 0; x < G[0]; ++x) {
          const uint64_t *q = &o[((z * G[1] + y) * G[0] + x) * 12];
          uint64_t g[3] = {x, y, z}, l[3], gr[3], ls[3], ng[3];
          for (int d = 0; d < 3; ++d) {
            l[d] = g[d] % Lc[d];
            gr[d] = g[d] / Lc[d];
            ng[d] = (G[d] + Lc[d] - 1) / Lc[d];
            ls[d] = std::min(Lc[d], G[d] - gr[d] * Lc[d]);
          }
          ASSERT_EQ(q[0], (x + O[0]) + 1000 * (y + O[1]) + 1000000 * (z + O[2]));
          ASSERT_EQ(q[1], l[0] + 100 * l[1] + 10000 * l[2]);
          ASSERT_EQ(q[2], gr[0] + 100 * gr[1] + 10000 * gr[2]);
          ASSERT_EQ(q[3], ls[0] + 100 * ls[1] + 10000 * ls[2]);
          ASSERT_EQ(q[4], Lc[0] + 100 * Lc[1]);
          ASSERT_EQ(q[5], ng[0] + 100 * ng[1] + 10000 * ng[2]);
          ASSERT_EQ(q[6], 3u);
          ASSERT_EQ(q[7], (z * G[1] + y) * G[0] + x);
          ASSERT_EQ(q[8], (l[2] * ls[1] + l[1]) * ls[0] + l[0]);
          ASSERT_EQ(q[9], 0u);
          ASSERT_EQ(q[10], 3u);
          uint64_t d = (x + O[0]) % 4;
          ASSERT_EQ(q[11], (d < 3 ? l[d] : 0) + 10 * (d < 3 ? G[d] : 1));
        }
  }
}
INSTANTIATE_TEST_SUITE_P(Modes, WorkItem,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 3}),
                         modeName);

#include <pthread.h>
#include <thread>

// Builds, loads and runs several programs from several threads at once.
TEST(Basic, ConcurrentBuildsAndRuns) {
  std::vector<std::thread> ts;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &ok] {
      std::string src =
          "__kernel void k(__global int* a) { __local int s[64]; s[get_local_id(0)] = " +
          std::to_string(t) +
          "; barrier(CLK_LOCAL_MEM_FENCE); a[get_global_id(0)] = s[63 - get_local_id(0)] + "
          "get_global_id(0); }";
      BuildResult b = build(src, "", dev());
      if (!b.ok())
        return;
      auto p = load(b.binary);
      if (!p.ok())
        return;
      std::vector<int> a(256);
      NDRange r;
      r.global[0] = 256;
      r.local[0] = 64;
      if (!runND(**p, "k", {ArgValue::pointer(a.data())}, r, t % 2 ? ExecMode::SPMD : ExecMode::LWI,
                 2))
        return;
      for (int i = 0; i < 256; ++i)
        if (a[i] != t + i)
          return;
      ok[t] = 1;
    });
  for (auto &t : ts)
    t.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

// A large private array (barrier-free kernel) lives in a per-PE heap
// scratch, not on the PE thread's stack.
TEST(Basic, LargePrivateArray) {
  auto p = buildLoad(R"(
    __kernel void big(__global const int* in, __global int* out) {
      int priv[65536];
      int g = get_global_id(0);
      for (int i = 0; i < 65536; ++i) priv[i] = in[g] + i;
      int s = 0;
      for (int i = 0; i < 65536; i += 4099) s += priv[i];
      out[g] = s;
    })");
  ASSERT_TRUE(p);
  EXPECT_GT(p->kernel("big")->info().frame_size, 65536u * 4 - 1);
  std::vector<int> in = {1, 2, 3, 4, 5, 6, 7, 8}, out(8);
  NDRange r;
  r.global[0] = 8;
  r.local[0] = 4;
  for (ExecMode m : {ExecMode::LWI, ExecMode::SPMD}) {
    // A small-stack thread: 256 KiB would overflow with the array on the stack.
    struct Job {
      Program *p;
      std::vector<int> *in, *out;
      NDRange r;
      ExecMode m;
      bool ok = false;
    } job{p.get(), &in, &out, r, m};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_t th;
    ASSERT_EQ(pthread_create(
                  &th, &attr,
                  [](void *a) -> void * {
                    auto *j = static_cast<Job *>(a);
                    j->ok =
                        runND(*j->p, "big",
                              {ArgValue::pointer(j->in->data()), ArgValue::pointer(j->out->data())},
                              j->r, j->m, 2)
                            .ok();
                    return nullptr;
                  },
                  &job),
              0);
    pthread_join(th, nullptr);
    pthread_attr_destroy(&attr);
    ASSERT_TRUE(job.ok);
    for (int g = 0; g < 8; ++g) {
      int s = 0;
      for (int i = 0; i < 65536; i += 4099)
        s += in[g] + i;
      ASSERT_EQ(out[g], s);
    }
  }
}
