// Loop barriers (wgfunc.cpp, addLoopBarriers): uniform loops get a barrier per trip so that the
// work-item loop goes inside them and vectorizes. Each kernel is built with them forced on and
// off (MANYCL_LOOP_BARRIERS) and checked against the host in LWI and SPMD with 4 and 16 PEs,
// for local sizes that leave masked or scalar tails after the vector loop.
#include "helpers.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace mct;

namespace {

// Loop barriers on build with MANYCL_LOOP_BARRIERS=2: also in kernels with barriers of their
// own (off by default there), where the process runs without the cost instrumentation
// (MANYCL_COST=0, read once per process: the CTest entry compiler.LoopBarriersUninstrumented).
std::shared_ptr<Program> buildWith(const char *src, bool loopBarriers) {
  ScopedEnv env("MANYCL_LOOP_BARRIERS", loopBarriers ? "2" : "0");
  return buildLoad(src);
}

// Whether a kernel with barriers of its own gets loop barriers in this process.
bool barrierKernelLoopBarriers(bool lb) {
  const char *cost = std::getenv("MANYCL_COST");
  return lb && cost && std::string(cost) == "0";
}

const char *kSrc = R"(
// A dependent multiply-add chain per work-item in a loop whose trip count is a kernel argument
// (uniform, not a constant: it stays a loop).
kernel void chain_int(global int *out, int seed, int trips) {
  int a = seed, b = (int)get_local_id(0);
  for (int t = 0; t < trips; ++t) {
    a = b * a + b;
    b = a * b + a;
  }
  out[get_global_id(0)] = b;
}
kernel void chain_int4(global int *out, int seed, int trips) {
  int4 a = (int4)(seed, seed + 1, seed + 2, seed + 3), b = (int4)((int)get_local_id(0));
  for (int t = 0; t < trips; ++t) {
    a = b * a + b;
    b = a * b + a;
  }
  out[get_global_id(0)] = b.x ^ b.y ^ b.z ^ b.w;
}
kernel void chain_uint16(global uint *out, uint seed, int trips) {
  uint16 a = (uint16)(seed), b = (uint16)((uint)get_global_id(0)) + (uint16)(0, 1, 2, 3, 4, 5, 6,
                                                                         7, 8, 9, 10, 11, 12, 13,
                                                                         14, 15);
  for (int t = 0; t < trips; ++t) {
    a = (b * a + b) >> (uint16)(1);
    b = a * b + a;
  }
  uint s = 0;
  for (int i = 0; i < 16; ++i)
    s += b[i] * (uint)(i + 1);
  out[get_global_id(0)] = s;
}
// Nested uniform loops, the inner bound from the outer counter; a uniform value (the counters)
// indexing memory.
kernel void nested(global int *out, global const int *table, int outer) {
  int acc = (int)get_global_id(0);
  for (int o = 0; o < outer; ++o)
    for (int i = 0; i <= o; ++i)
      acc = acc * 3 + table[(o * 7 + i) & 15];
  out[get_global_id(0)] = acc;
}
// A loop whose trip count differs per work-item: no loop barrier (items would leave at
// different trips); it must still be right.
kernel void divergent(global int *out, int trips) {
  int l = (int)get_local_id(0), acc = 1;
  for (int t = 0; t < trips + (l & 3); ++t)
    acc = acc * 5 + t;
  out[get_global_id(0)] = acc;
}
// Barriers of its own plus a uniform loop without one: the uniform counter of the barrier loop
// indexes __local memory; the inner loop stays as it is (the kernel keeps its own regions).
kernel void local_rounds(global int *d, local int *s, int rounds) {
  size_t l = get_local_id(0), n = get_local_size(0);
  int v = d[get_global_id(0)];
  for (int k = 0; k < rounds; ++k) {
    s[(l + k) % n] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    v = s[l] + k;
    for (int j = 0; j < rounds; ++j)
      v = v * 3 + j;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  d[get_global_id(0)] = v;
}
// CLBlast's Xgemm in small: private float4 accumulators across two barriers per tile, and
// between them a uniform loop over the tile (trip count = the local size) of two dependent
// multiply-adds per item. With loop barriers that loop gets one too (a kernel with barriers
// of its own): its trips run as work-item loops over the group.
kernel void acc_tiles(global const float4 *a, global const float2 *b, global float4 *c, int K,
                      local float2 *bt) {
  size_t l = get_local_id(0), n = get_local_size(0), g = get_global_id(0);
  float4 cpm[2] = {(float4)(0.0f), (float4)(0.0f)};
  for (int k0 = 0; k0 < K; k0 += (int)n) {
    bt[l] = b[k0 + (int)l];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < (int)n; ++k) {
      float4 av = a[(k0 + k) * (int)get_global_size(0) + (int)g];
      float2 bv = bt[k];
      cpm[0] = mad(av, (float4)(bv.x), cpm[0]);
      cpm[1] = mad(av, (float4)(bv.y), cpm[1]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[2 * g] = cpm[0];
  c[2 * g + 1] = cpm[1];
}
// Nested barrier loops; between the barriers a uniform loop whose trip count comes from the
// outer counter (a loop barrier) and a loop whose trip count differs per item (none).
kernel void nested_barrier_loops(global int *d, local int *s, int rounds) {
  size_t l = get_local_id(0), n = get_local_size(0);
  int v = d[get_global_id(0)];
  for (int r = 0; r < rounds; ++r) {
    for (int q = 0; q < 2; ++q) {
      s[l] = v;
      barrier(CLK_LOCAL_MEM_FENCE);
      v += s[(l + 1) % n];
      for (int j = 0; j < r + 3; ++j)
        v = v * 3 + j;
      for (int j = 0; j < (int)(l & 3); ++j)
        v ^= j << 2;
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  d[get_global_id(0)] = v;
}
)";

uint32_t chainInt(uint32_t seed, uint32_t lid, int trips) {
  uint32_t a = seed, b = lid;
  for (int t = 0; t < trips; ++t) {
    a = b * a + b;
    b = a * b + a;
  }
  return b;
}

struct Case {
  unsigned local, groups;
};
const Case kCases[] = {{1, 3}, {5, 2}, {16, 2}, {37, 2}, {64, 3}, {100, 1}};

class LoopBarriers : public testing::TestWithParam<ModeParam> {};

TEST_P(LoopBarriers, ScalarAndVectorIntegerChains) {
  const int trips = 37, seed = 3;
  for (bool lb : {true, false}) {
    SCOPED_TRACE(lb ? "loop barriers" : "plain");
    auto p = buildWith(kSrc, lb);
    ASSERT_TRUE(p);
    for (const char *k : {"chain_int", "chain_int4", "chain_uint16"}) {
      SCOPED_TRACE(k);
      EXPECT_EQ(p->kernel(k)->info().loop_barriers, lb);
      EXPECT_EQ(p->kernel(k)->info().region_based, lb);
    }
    for (const Case &c : kCases) {
      SCOPED_TRACE(c.local);
      const unsigned n = c.local * c.groups;
      NDRange r;
      r.global[0] = n;
      r.local[0] = c.local;
      std::vector<uint32_t> out(n);
      auto args = [&](auto seedValue) {
        return std::vector<ArgValue>{ArgValue::pointer(out.data()), ArgValue::of(seedValue),
                                     ArgValue::of(trips)};
      };
      ASSERT_TRUE(runND(*p, "chain_int", args(seed), r, GetParam().mode, GetParam().pes));
      for (unsigned i = 0; i < n; ++i)
        ASSERT_EQ(out[i], chainInt(seed, i % c.local, trips)) << i;
      ASSERT_TRUE(runND(*p, "chain_int4", args(seed), r, GetParam().mode, GetParam().pes));
      for (unsigned i = 0; i < n; ++i) {
        uint32_t want = 0;
        for (uint32_t e = 0; e < 4; ++e)
          want ^= chainInt(seed + e, i % c.local, trips);
        ASSERT_EQ(out[i], want) << i;
      }
      ASSERT_TRUE(
          runND(*p, "chain_uint16", args(uint32_t(seed)), r, GetParam().mode, GetParam().pes));
      for (unsigned i = 0; i < n; ++i) {
        uint32_t s = 0;
        for (uint32_t e = 0; e < 16; ++e) {
          uint32_t a = seed, b = i + e;
          for (int t = 0; t < trips; ++t) {
            a = (b * a + b) >> 1;
            b = a * b + a;
          }
          s += b * (e + 1);
        }
        ASSERT_EQ(out[i], s) << i;
      }
    }
  }
}

TEST_P(LoopBarriers, NestedUniformAndDivergentLoops) {
  std::vector<int> table(16);
  for (int i = 0; i < 16; ++i)
    table[i] = i * i - 7;
  for (bool lb : {true, false}) {
    SCOPED_TRACE(lb ? "loop barriers" : "plain");
    auto p = buildWith(kSrc, lb);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->kernel("nested")->info().loop_barriers, lb);
    EXPECT_FALSE(p->kernel("divergent")->info().loop_barriers);
    EXPECT_FALSE(p->kernel("divergent")->info().uses_barriers);
    for (const Case &c : kCases) {
      SCOPED_TRACE(c.local);
      const unsigned n = c.local * c.groups;
      NDRange r;
      r.global[0] = n;
      r.local[0] = c.local;
      std::vector<int> out(n);
      const int outer = 6, trips = 9;
      ASSERT_TRUE(runND(
          *p, "nested",
          {ArgValue::pointer(out.data()), ArgValue::pointer(table.data()), ArgValue::of(outer)}, r,
          GetParam().mode, GetParam().pes));
      for (unsigned i = 0; i < n; ++i) {
        uint32_t acc = i;
        for (int o = 0; o < outer; ++o)
          for (int j = 0; j <= o; ++j)
            acc = acc * 3 + uint32_t(table[(o * 7 + j) & 15]);
        ASSERT_EQ(uint32_t(out[i]), acc) << i;
      }
      ASSERT_TRUE(runND(*p, "divergent", {ArgValue::pointer(out.data()), ArgValue::of(trips)}, r,
                        GetParam().mode, GetParam().pes));
      for (unsigned i = 0; i < n; ++i) {
        uint32_t acc = 1, l = i % c.local;
        for (uint32_t t = 0; t < uint32_t(trips) + (l & 3); ++t)
          acc = acc * 5 + t;
        ASSERT_EQ(uint32_t(out[i]), acc) << i;
      }
    }
  }
}

TEST_P(LoopBarriers, UniformCountersIndexLocalMemoryAcrossBarriers) {
  for (bool lb : {true, false}) {
    SCOPED_TRACE(lb ? "loop barriers" : "plain");
    auto p = buildWith(kSrc, lb);
    ASSERT_TRUE(p);
    const KernelInfo &info = p->kernel("local_rounds")->info();
    EXPECT_TRUE(info.region_based);
    EXPECT_EQ(info.loop_barriers, barrierKernelLoopBarriers(lb)); // the inner loop
    EXPECT_EQ(info.source_barriers, 2u);    // region ids 1, 2 follow the source's barriers
    EXPECT_GT(info.uniform_frame_size, 0u); // k
    for (const Case &c : kCases) {
      SCOPED_TRACE(c.local);
      const unsigned n = c.local * c.groups;
      NDRange r;
      r.global[0] = n;
      r.local[0] = c.local;
      std::vector<int> d(n);
      for (unsigned i = 0; i < n; ++i)
        d[i] = int(i * 5 % 11);
      const auto in = d;
      const int rounds = 4;
      ASSERT_TRUE(
          runND(*p, "local_rounds",
                {ArgValue::pointer(d.data()), ArgValue::local(c.local * 4), ArgValue::of(rounds)},
                r, GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < c.groups; ++g) {
        std::vector<uint32_t> v(in.begin() + g * c.local, in.begin() + (g + 1) * c.local),
            s(c.local);
        for (int k = 0; k < rounds; ++k) {
          for (unsigned l = 0; l < c.local; ++l)
            s[(l + k) % c.local] = v[l];
          for (unsigned l = 0; l < c.local; ++l) {
            v[l] = s[l] + uint32_t(k);
            for (int j = 0; j < rounds; ++j)
              v[l] = v[l] * 3 + uint32_t(j);
          }
        }
        for (unsigned l = 0; l < c.local; ++l)
          ASSERT_EQ(uint32_t(d[g * c.local + l]), v[l]) << g << " " << l;
      }
    }
  }
}

TEST_P(LoopBarriers, PrivateAccumulatorsAcrossBarriersWithAnInnerTripLoop) {
  {
    // Default configuration: no loop barriers in a kernel with barriers of its own.
    ScopedEnv unset("MANYCL_LOOP_BARRIERS", "");
    auto p = buildLoad(kSrc);
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->kernel("acc_tiles")->info().loop_barriers);
    EXPECT_EQ(p->kernel("acc_tiles")->info().source_barriers, 2u);
    EXPECT_TRUE(p->kernel("chain_int")->info().loop_barriers);
    EXPECT_EQ(p->kernel("chain_int")->info().source_barriers, 0u);
  }
  for (bool lb : {true, false}) {
    SCOPED_TRACE(lb ? "loop barriers" : "plain");
    auto p = buildWith(kSrc, lb);
    ASSERT_TRUE(p);
    const KernelInfo &info = p->kernel("acc_tiles")->info();
    EXPECT_TRUE(info.region_based);
    EXPECT_EQ(info.loop_barriers, barrierKernelLoopBarriers(lb));
    EXPECT_EQ(info.source_barriers, 2u);
    for (const Case &c : kCases) {
      SCOPED_TRACE(c.local);
      const unsigned n = c.local * c.groups, K = 3 * c.local;
      // Small integers: every product and sum is exact, whatever mad() fuses.
      std::vector<float> a(size_t(K) * n * 4), b(size_t(K) * 2), out(size_t(n) * 8, -1.0f);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = float(int(i * 7 % 13) - 6);
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = float(int(i * 5 % 9) - 4);
      NDRange r;
      r.global[0] = n;
      r.local[0] = c.local;
      ASSERT_TRUE(
          runND(*p, "acc_tiles",
                {ArgValue::pointer(a.data()), ArgValue::pointer(b.data()),
                 ArgValue::pointer(out.data()), ArgValue::of(int(K)), ArgValue::local(c.local * 8)},
                r, GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < n; ++g)
        for (unsigned j = 0; j < 2; ++j)
          for (unsigned e = 0; e < 4; ++e) {
            float want = 0.0f;
            for (unsigned k = 0; k < K; ++k)
              want += a[(size_t(k) * n + g) * 4 + e] * b[size_t(k) * 2 + j];
            ASSERT_EQ(out[(size_t(g) * 2 + j) * 4 + e], want) << g << " " << j << " " << e;
          }
    }
  }
}

TEST_P(LoopBarriers, NestedBarrierLoopsWithUniformAndDivergentInnerLoops) {
  for (bool lb : {true, false}) {
    SCOPED_TRACE(lb ? "loop barriers" : "plain");
    auto p = buildWith(kSrc, lb);
    ASSERT_TRUE(p);
    const KernelInfo &info = p->kernel("nested_barrier_loops")->info();
    EXPECT_TRUE(info.region_based);
    EXPECT_EQ(info.loop_barriers, barrierKernelLoopBarriers(lb));
    EXPECT_EQ(info.source_barriers, 2u);
    for (const Case &c : kCases) {
      SCOPED_TRACE(c.local);
      const unsigned n = c.local * c.groups;
      NDRange r;
      r.global[0] = n;
      r.local[0] = c.local;
      std::vector<int> d(n);
      for (unsigned i = 0; i < n; ++i)
        d[i] = int(i * 3 % 7);
      const auto in = d;
      const int rounds = 3;
      ASSERT_TRUE(
          runND(*p, "nested_barrier_loops",
                {ArgValue::pointer(d.data()), ArgValue::local(c.local * 4), ArgValue::of(rounds)},
                r, GetParam().mode, GetParam().pes));
      for (unsigned g = 0; g < c.groups; ++g) {
        std::vector<uint32_t> v(in.begin() + g * c.local, in.begin() + (g + 1) * c.local),
            s(c.local);
        for (int rr = 0; rr < rounds; ++rr)
          for (int q = 0; q < 2; ++q) {
            s = v;
            for (unsigned l = 0; l < c.local; ++l) {
              v[l] += s[(l + 1) % c.local];
              for (int j = 0; j < rr + 3; ++j)
                v[l] = v[l] * 3 + uint32_t(j);
              for (int j = 0; j < int(l & 3); ++j)
                v[l] ^= uint32_t(j) << 2;
            }
          }
        for (unsigned l = 0; l < c.local; ++l)
          ASSERT_EQ(uint32_t(d[g * c.local + l]), v[l]) << g << " " << l;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LoopBarriers,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4},
                                         ModeParam{ExecMode::SPMD, 16}),
                         modeName);

// Golden: a small kernel's shape after the work-group builder. Its loop counter is one uniform
// slot per group (8 bytes, held twice), its two loop-carried ints are per-item context arrays
// (4 bytes each), and the region of the loop's trip is a vectorized work-item loop (vector
// multiplies of i32 lanes, the loop marked vectorized) with the host's vector width.
TEST(LoopBarriersGolden, UniformSlotsAndVectorizedTrip) {
  const char *src = R"(
kernel void golden(global int *out, int trips) {
  int a = 1, b = (int)get_local_id(0);
  for (int t = 0; t < trips; ++t) {
    a = a * b + 7;
    b = b * a + 3;
  }
  out[get_global_id(0)] = a + b;
})";
  const std::string dump = (std::filesystem::temp_directory_path() /
                            ("manycl-golden-" + std::to_string(getpid()) + ".ll"))
                               .string();
  std::shared_ptr<Program> p;
  {
    ScopedEnv lb("MANYCL_LOOP_BARRIERS", "1");
    ScopedEnv nocache("MANYCL_CACHE", "0");
    ScopedEnv ir("MANYCL_DUMP_IR", dump.c_str());
    p = buildLoad(src);
  }
  ASSERT_TRUE(p);
  const KernelInfo &info = p->kernel("golden")->info();
  EXPECT_TRUE(info.loop_barriers);
  EXPECT_TRUE(info.region_based);
  EXPECT_EQ(info.uniform_frame_size, 64u); // t: 8 bytes x 2 copies, rounded to 64
  EXPECT_EQ(info.frame_size, 16u);         // a and b: 4 bytes per item each, rounded to 16
  std::ifstream f(dump);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string ir = ss.str();
  std::remove(dump.c_str());
  const size_t at = ir.find("define i32 @__manycl_region_golden(");
  ASSERT_NE(at, std::string::npos) << ir;
  const std::string region = ir.substr(at, ir.find("\n}\n", at) - at);
  // Vector multiplies of i32 lanes in the region function (16 lanes with AVX-512, 8 with AVX2).
  bool vectorMul = false;
  std::istringstream lines(region);
  for (std::string line; std::getline(lines, line);)
    vectorMul |=
        line.find("= mul") != std::string::npos && line.find(" x i32>") != std::string::npos;
  EXPECT_TRUE(vectorMul) << region;
  EXPECT_NE(ir.find("llvm.loop.isvectorized"), std::string::npos);
  EXPECT_NE(ir.find("manycl.loop-frame"), std::string::npos);   // the arrays' alias scopes
  EXPECT_EQ(ir.find("@__manycl_wg_golden"), std::string::npos); // no plain version left
}

} // namespace
