// Barriers in every legal place, LWI and SPMD, several local sizes.
#include "helpers.h"

#include <numeric>

using namespace mct;

class Barriers : public testing::TestWithParam<ModeParam> {};

static const char *kSrc = R"(
// reverse within the group through __local memory (kernel-scope + arg)
__kernel void reverse(__global const int* in, __global int* out, __local int* tmp) {
  __local int tile[256];
  size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
  tile[l] = in[g];
  tmp[l] = in[g] * 2;
  barrier(CLK_LOCAL_MEM_FENCE);
  out[g] = tile[n - 1 - l] + tmp[n - 1 - l];
}

// tree reduction: barrier inside a loop
__kernel void reduce(__global const float* in, __global float* out, __local float* s) {
  size_t l = get_local_id(0);
  s[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t k = get_local_size(0) / 2; k > 0; k >>= 1) {
    if (l < k) s[l] += s[l + k];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) out[get_group_id(0)] = s[0];
}

// barrier in a uniform conditional, and in a called function
void sync_and_rotate(__local int* t, int* v) {
  size_t l = get_local_id(0), n = get_local_size(0);
  t[l] = *v;
  barrier(CLK_LOCAL_MEM_FENCE);
  *v = t[(l + 1) % n];
  barrier(CLK_LOCAL_MEM_FENCE);
}
__kernel void rotate(__global int* data, int times, int flag) {
  __local int t[256];
  int v = data[get_global_id(0)];
  for (int i = 0; i < times; ++i) sync_and_rotate(t, &v);
  if (flag) {
    t[get_local_id(0)] = v * 10;
    barrier(CLK_LOCAL_MEM_FENCE);
    v = t[get_local_size(0) - 1 - get_local_id(0)];
  }
  data[get_global_id(0)] = v;
}

// while loop with a barrier and early-exit-free uniform trip count from memory
__kernel void prefix(__global int* data, __local int* s) {
  size_t l = get_local_id(0), n = get_local_size(0);
  s[l] = data[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  size_t off = 1;
  while (off < n) {
    int add = l >= off ? s[l - off] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    s[l] += add;
    barrier(CLK_LOCAL_MEM_FENCE);
    off *= 2;
  }
  data[get_global_id(0)] = s[l];
}

// nested loops, private array live across barriers, if/else with barriers
// on both sides, uniform early return
__kernel void nested(__global int* d, int outer) {
  __local int t[128];
  int acc = 0;
  int priv[4];
  for (int o = 0; o < outer; ++o) {
    for (int i = 0; i < 2; ++i) {
      t[get_local_id(0)] = d[get_global_id(0)] + o + i;
      barrier(CLK_LOCAL_MEM_FENCE);
      acc += t[(get_local_id(0) + 1) % get_local_size(0)];
      priv[(o + i) & 3] = acc;
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  if (outer > 2) { barrier(CLK_LOCAL_MEM_FENCE); acc += 1; }
  else { acc -= 1; barrier(CLK_GLOBAL_MEM_FENCE); }
  if (outer == 100) return;
  d[get_global_id(0)] = acc + priv[0] + priv[1];
}

// 2-D tiles: transpose through local memory
__kernel void transpose(__global const float* in, __global float* out, int w, int h) {
  __local float tile[16][17];
  int x = get_global_id(0), y = get_global_id(1);
  int lx = get_local_id(0), ly = get_local_id(1);
  tile[ly][lx] = in[y * w + x];
  barrier(CLK_LOCAL_MEM_FENCE);
  int ox = get_group_id(1) * get_local_size(1) + lx;
  int oy = get_group_id(0) * get_local_size(0) + ly;
  out[oy * h + ox] = tile[lx][ly];
}
)";

static std::shared_ptr<Program> prog() {
  static std::shared_ptr<Program> p = buildLoad(kSrc);
  return p;
}

static void checkNested(const Program &p, ExecMode mode, unsigned pes) {
  for (unsigned ls : {1u, 8u, 100u}) {
    const unsigned groups = 2, n = ls * groups;
    std::vector<int> d(n);
    for (unsigned i = 0; i < n; ++i)
      d[i] = int(i * 3 % 17);
    auto in = d;
    NDRange r;
    r.global[0] = n;
    r.local[0] = ls;
    int outer = 3;
    ASSERT_TRUE(
        runND(p, "nested", {ArgValue::pointer(d.data()), ArgValue::of(outer)}, r, mode, pes));
    for (unsigned g = 0; g < groups; ++g)
      for (unsigned l = 0; l < ls; ++l) {
        int acc = 0, priv[4] = {0, 0, 0, 0};
        for (int o = 0; o < outer; ++o)
          for (int i = 0; i < 2; ++i) {
            acc += in[g * ls + (l + 1) % ls] + o + i;
            priv[(o + i) & 3] = acc;
          }
        acc += 1;
        ASSERT_EQ(d[g * ls + l], acc + priv[0] + priv[1]) << ls << " " << l;
      }
  }
}

TEST_P(Barriers, Metadata) {
  auto p = prog();
  ASSERT_TRUE(p);
  for (const char *k : {"reverse", "reduce", "rotate", "prefix", "transpose", "nested"}) {
    EXPECT_TRUE(p->kernel(k)->info().uses_barriers) << k;
    EXPECT_TRUE(p->kernel(k)->info().region_based) << k;
  }
  EXPECT_EQ(p->kernel("reverse")->info().static_local_size, 1024u);
  EXPECT_EQ(p->kernel("transpose")->info().static_local_size, 1088u);
}

TEST_P(Barriers, ReverseAndReduce) {
  auto p = prog();
  ASSERT_TRUE(p);
  for (unsigned ls : {1u, 7u, 16u, 64u, 256u}) {
    const unsigned groups = 3, n = ls * groups;
    std::vector<int> in(n), out(n, 0);
    std::iota(in.begin(), in.end(), 1);
    NDRange r;
    r.global[0] = n;
    r.local[0] = ls;
    ASSERT_TRUE(runND(
        *p, "reverse",
        {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()), ArgValue::local(ls * 4)}, r,
        GetParam().mode, GetParam().pes));
    for (unsigned g = 0; g < groups; ++g)
      for (unsigned l = 0; l < ls; ++l)
        ASSERT_EQ(out[g * ls + l], 3 * in[g * ls + ls - 1 - l]) << ls << " " << l;
    if ((ls & (ls - 1)) == 0) {
      std::vector<float> fin(n), fout(groups, 0);
      for (unsigned i = 0; i < n; ++i)
        fin[i] = float(i % 13);
      ASSERT_TRUE(runND(
          *p, "reduce",
          {ArgValue::pointer(fin.data()), ArgValue::pointer(fout.data()), ArgValue::local(ls * 4)},
          r, GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < groups; ++g) {
        float ref = 0;
        for (unsigned l = 0; l < ls; ++l)
          ref += fin[g * ls + l];
        ASSERT_EQ(fout[g], ref) << ls;
      }
    }
  }
}

TEST_P(Barriers, RotateCalledFunctionAndConditional) {
  auto p = prog();
  ASSERT_TRUE(p);
  for (unsigned ls : {4u, 32u, 100u}) {
    for (int flag : {0, 1}) {
      const unsigned groups = 2, n = ls * groups;
      std::vector<int> d(n);
      std::iota(d.begin(), d.end(), 0);
      NDRange r;
      r.global[0] = n;
      r.local[0] = ls;
      int times = 3;
      ASSERT_TRUE(runND(*p, "rotate",
                        {ArgValue::pointer(d.data()), ArgValue::of(times), ArgValue::of(flag)}, r,
                        GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < groups; ++g)
        for (unsigned l = 0; l < ls; ++l) {
          unsigned src = flag ? ls - 1 - l : l;
          int ref = int(g * ls + (src + times) % ls);
          if (flag)
            ref *= 10;
          ASSERT_EQ(d[g * ls + l], ref) << ls << " " << flag << " " << l;
        }
    }
  }
}

TEST_P(Barriers, PrefixWhileLoop) {
  auto p = prog();
  ASSERT_TRUE(p);
  for (unsigned ls : {1u, 5u, 64u, 128u}) {
    std::vector<int> d(ls * 2);
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = int(i % 7);
    auto ref = d;
    NDRange r;
    r.global[0] = d.size();
    r.local[0] = ls;
    ASSERT_TRUE(runND(*p, "prefix", {ArgValue::pointer(d.data()), ArgValue::local(ls * 4)}, r,
                      GetParam().mode, GetParam().pes));
    for (unsigned g = 0; g < 2; ++g)
      for (unsigned l = 1; l < ls; ++l)
        ref[g * ls + l] += ref[g * ls + l - 1];
    ASSERT_EQ(d, ref) << ls;
  }
}

TEST_P(Barriers, Transpose2D) {
  auto p = prog();
  ASSERT_TRUE(p);
  const int w = 64, h = 32;
  std::vector<float> in(w * h), out(w * h, -1);
  for (int i = 0; i < w * h; ++i)
    in[i] = float(i);
  for (unsigned t : {4u, 16u}) {
    NDRange r;
    r.work_dim = 2;
    r.global[0] = w;
    r.global[1] = h;
    r.local[0] = t;
    r.local[1] = t;
    ASSERT_TRUE(runND(*p, "transpose",
                      {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()), ArgValue::of(w),
                       ArgValue::of(h)},
                      r, GetParam().mode, GetParam().pes));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        ASSERT_EQ(out[x * h + y], in[y * w + x]) << t;
  }
}

TEST_P(Barriers, NestedLoopsPrivateArraysEarlyReturn) {
  auto p = prog();
  ASSERT_TRUE(p);
  checkNested(*p, GetParam().mode, GetParam().pes);
}

// The fiber fallback stays correct too.
TEST_P(Barriers, FiberFallback) {
  setenv("MANYCL_WG_METHOD", "fibers", 1);
  auto p = buildLoad(kSrc);
  unsetenv("MANYCL_WG_METHOD");
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->kernel("nested")->info().region_based);
  checkNested(*p, GetParam().mode, GetParam().pes);
  std::vector<int> in(64), out(64);
  std::iota(in.begin(), in.end(), 1);
  NDRange r;
  r.global[0] = 64;
  r.local[0] = 16;
  ASSERT_TRUE(
      runND(*p, "reverse",
            {ArgValue::pointer(in.data()), ArgValue::pointer(out.data()), ArgValue::local(64)}, r,
            GetParam().mode, GetParam().pes));
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 16; ++l)
      ASSERT_EQ(out[g * 16 + l], 3 * in[g * 16 + 15 - l]);
}

TEST_P(Barriers, OptDisable) {
  auto p = buildLoad(kSrc, "-cl-opt-disable");
  ASSERT_TRUE(p);
  checkNested(*p, GetParam().mode, GetParam().pes);
}

// Work-group uniform values live across barriers once per group, not in per-work-item context
// arrays: a uniform loop counter and a uniform loop-carried value that also indexes __local
// memory, next to loop-carried values that differ per item (one from memory, one from the item's
// id), with and without optimization. The reduction's loop counter needs no per-item slot at all.
static const char *kUniformSrc = R"(
__kernel void mixed(__global int* d, __local int* s, int rounds) {
  size_t l = get_local_id(0), n = get_local_size(0);
  int mine = d[get_global_id(0)];
  int u = rounds;
  for (int k = 0; k < rounds; ++k) {
    s[l] = mine + u;
    barrier(CLK_LOCAL_MEM_FENCE);
    mine = s[(l + u) % n];
    u = u * 2 + 1;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  int j = (int)(l % 3);
  for (int k = 0; k < rounds; ++k) {
    s[l] = j;
    barrier(CLK_LOCAL_MEM_FENCE);
    j += s[(l + 1) % n] & 1;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  d[get_global_id(0)] = mine * 1000 + u * 10 + j;
})";

TEST_P(Barriers, UniformValuesOncePerGroup) {
  auto reduceInfo = prog()->kernel("reduce")->info();
  EXPECT_EQ(reduceInfo.frame_size, 0u);
  EXPECT_GT(reduceInfo.uniform_frame_size, 0u);
  for (const char *opt : {"", "-cl-opt-disable"}) {
    SCOPED_TRACE(opt);
    auto p = buildLoad(kUniformSrc, opt);
    ASSERT_TRUE(p);
    const KernelInfo &info = p->kernel("mixed")->info();
    ASSERT_TRUE(info.region_based);
    EXPECT_GT(info.uniform_frame_size, 0u); // k and u
    EXPECT_GT(info.frame_size, 0u);         // mine and j: per item
    const int rounds = 3;
    for (unsigned ls : {1u, 5u, 16u, 64u}) {
      const unsigned groups = 2, n = ls * groups;
      std::vector<int> d(n);
      for (unsigned i = 0; i < n; ++i)
        d[i] = int(i * 7 % 23);
      const auto in = d;
      NDRange r;
      r.global[0] = n;
      r.local[0] = ls;
      ASSERT_TRUE(runND(
          *p, "mixed", {ArgValue::pointer(d.data()), ArgValue::local(ls * 4), ArgValue::of(rounds)},
          r, GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < groups; ++g) {
        std::vector<int> mine(in.begin() + g * ls, in.begin() + (g + 1) * ls), s(ls), j(ls);
        int u = rounds;
        for (int k = 0; k < rounds; ++k) {
          for (unsigned l = 0; l < ls; ++l)
            s[l] = mine[l] + u;
          for (unsigned l = 0; l < ls; ++l)
            mine[l] = s[(l + u) % ls];
          u = u * 2 + 1;
        }
        for (unsigned l = 0; l < ls; ++l)
          j[l] = int(l % 3);
        for (int k = 0; k < rounds; ++k) {
          s = j;
          for (unsigned l = 0; l < ls; ++l)
            j[l] += s[(l + 1) % ls] & 1;
        }
        for (unsigned l = 0; l < ls; ++l)
          ASSERT_EQ(d[g * ls + l], mine[l] * 1000 + u * 10 + j[l]) << ls << " " << l;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Barriers,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4},
                                         ModeParam{ExecMode::SPMD, 16}),
                         modeName);
