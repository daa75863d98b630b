// Shapes of real OpenCL programs (issue 15: hashcat, CLBlast, clpeak) that the kernel compiler
// once handled badly, each checked against the host in LWI and SPMD with 4 and 16 PEs.
#include "helpers.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <unistd.h>

using namespace mct;

namespace {

class ProgramKernels : public testing::TestWithParam<ModeParam> {};

// hashcat's kernels keep their state in small private arrays of `u32x` vectors (`uint16` on a
// 16-wide device) inside helper functions: inlined 100 times here, 256 bytes each, 25 KiB of
// locals before SROA, none after it. They must stay in registers, not move to the per-PE
// scratch that only private memory SROA cannot remove goes to (frame_size 0).
const char *kHelperLocals = R"(
uint16 mix_step(uint16 x, uint k) {
  uint16 t[4];
  t[0] = x ^ (uint16)(k);
  t[1] = t[0] * (uint16)(2654435761u);
  t[2] = rotate(t[1], (uint16)(13));
  t[3] = t[2] + x;
  return t[3];
}
#define S1(i) x = mix_step(x, i);
#define S10(i) S1(i) S1(i + 1) S1(i + 2) S1(i + 3) S1(i + 4) S1(i + 5) S1(i + 6) S1(i + 7) \
               S1(i + 8) S1(i + 9)
kernel void helper_locals(global uint *out, uint seed) {
  uint16 x = (uint16)(seed + (uint)get_global_id(0) * 16u) +
             (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  S10(0) S10(10) S10(20) S10(30) S10(40) S10(50) S10(60) S10(70) S10(80) S10(90)
  uint s = 0;
  for (int i = 0; i < 16; ++i)
    s ^= x[i] * (uint)(2 * i + 1);
  out[get_global_id(0)] = s;
}
)";

uint32_t rotl(uint32_t v, unsigned r) {
  return (v << r) | (v >> (32 - r));
}

TEST_P(ProgramKernels, HelperLocalArraysStayInRegisters) {
  auto p = buildLoad(kHelperLocals);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kernel("helper_locals")->info().frame_size, 0u);
  const uint32_t seed = 12345;
  for (unsigned local : {1u, 7u, 32u}) {
    SCOPED_TRACE(local);
    const unsigned n = local * 3;
    NDRange r;
    r.global[0] = n;
    r.local[0] = local;
    std::vector<uint32_t> out(n);
    ASSERT_TRUE(runND(*p, "helper_locals", {ArgValue::pointer(out.data()), ArgValue::of(seed)}, r,
                      GetParam().mode, GetParam().pes));
    for (unsigned g = 0; g < n; ++g) {
      uint32_t s = 0;
      for (uint32_t e = 0; e < 16; ++e) {
        uint32_t x = seed + g * 16u + e;
        for (uint32_t k = 0; k < 100; ++k) {
          uint32_t t = rotl((x ^ k) * 2654435761u, 13);
          x = t + x;
        }
        s ^= x * (2 * e + 1);
      }
      ASSERT_EQ(out[g], s) << g;
    }
  }
}

// CLBlast's Xgemm shape: tiles in __local memory between barriers, and private arrays (the
// accumulators, a copy of A's and B's values) that live across them, so they are per-item
// context arrays. Each array has its own alias scope, also where it is reached through element
// addresses: the accumulators then stay in registers through the inner loop (a `<4 x float>`
// phi) instead of a store and a reload per multiply-add.
const char *kTileAccumulators = R"(
kernel void acc_tiles(global const float *a, global const float4 *b, global float4 *c, int K,
                      int kt) {
  local float ta[8][8];
  local float4 tb[8][8];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int gx = get_global_id(0), gy = get_global_id(1), nx = get_global_size(0);
  float4 acc[2];
  float bpm[2];
  for (int i = 0; i < 2; ++i) // loops over the arrays, as CLBlast's `#pragma unroll` ones are
    acc[i] = (float4)(0.0f);  // before the optimizer unrolls them: element addresses
  for (int t = 0; t < K; t += kt) {
    ta[ly][lx] = a[gy * K + t + lx];
    tb[ly][lx] = b[(t + ly) * nx + gx];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < kt; ++k) {
      const float4 apm = tb[k][lx];
      for (int i = 0; i < 2; ++i)
        bpm[i] = ta[ly][(k + i) % kt];
      for (int i = 0; i < 2; ++i)
        acc[i] = fma(apm, (float4)(bpm[i]), acc[i]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  c[gy * nx + gx] = acc[0] - acc[1] * 0.5f;
}
)";

TEST_P(ProgramKernels, PrivateAccumulatorsAcrossBarriers) {
  auto p = buildLoad(kTileAccumulators);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->kernel("acc_tiles")->info().region_based);
  const int K = 24, kt = 8, nx = 16, ny = 16;
  std::vector<float> a(ny * K), b(K * nx * 4), c(ny * nx * 4);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(int(i * 7 % 11) - 5); // small integers: every sum is exact
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float(int(i * 5 % 13) - 6);
  NDRange r;
  r.work_dim = 2;
  r.global[0] = nx;
  r.global[1] = ny;
  r.local[0] = 8;
  r.local[1] = 8;
  ASSERT_TRUE(runND(*p, "acc_tiles",
                    {ArgValue::pointer(a.data()), ArgValue::pointer(b.data()),
                     ArgValue::pointer(c.data()), ArgValue::of(K), ArgValue::of(kt)},
                    r, GetParam().mode, GetParam().pes));
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x)
      for (int e = 0; e < 4; ++e) {
        float acc0 = 0, acc1 = 0;
        for (int t = 0; t < K; t += kt)
          for (int k = 0; k < kt; ++k) {
            float bv = b[((t + k) * nx + x) * 4 + e];
            acc0 += bv * a[y * K + t + k];
            acc1 += bv * a[y * K + t + (k + 1) % kt];
          }
        ASSERT_EQ(c[(y * nx + x) * 4 + e], acc0 - acc1 * 0.5f) << x << "," << y << "," << e;
      }
}

TEST(ProgramKernelsGolden, PrivateAccumulatorsStayInRegisters) {
  const std::string dump = (std::filesystem::temp_directory_path() /
                            ("manycl-acc-tiles-" + std::to_string(getpid()) + ".ll"))
                               .string();
  setenv("MANYCL_DUMP_IR", dump.c_str(), 1);
  setenv("MANYCL_CACHE", "0", 1);
  auto p = buildLoad(kTileAccumulators);
  unsetenv("MANYCL_DUMP_IR");
  unsetenv("MANYCL_CACHE");
  ASSERT_TRUE(p);
  std::ifstream f(dump);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string ir = ss.str();
  std::remove(dump.c_str());
  const size_t at = ir.find("define i32 @__manycl_region_acc_tiles(");
  ASSERT_NE(at, std::string::npos) << ir;
  const std::string region = ir.substr(at, ir.find("\n}\n", at) - at);
  const size_t phi = region.find("phi <4 x float>");
  ASSERT_NE(phi, std::string::npos) << region;
  // ... through the whole `k` loop: the __local tile loads are outside the frame arrays' scopes
  // (`!noalias` of all of them), so the accumulators are stored to the frame after the loop,
  // not at every trip.
  const std::string kLoop = region.substr(phi, region.find("\n\n", phi) - phi); // one block
  EXPECT_EQ(kLoop.find("store <4 x float>"), std::string::npos) << kLoop;
  EXPECT_NE(ir.find("manycl.frame"), std::string::npos); // the arrays' alias scopes
  // The loops over the arrays are unrolled before the region builder (unrollSmallLoops), so the
  // arrays become SSA values: `bpm` lives within one trip of the k loop and has no context
  // array any more (before: `acc` 32 bytes and `bpm` 8 bytes per item); the frame is eight
  // 16-byte `float4` arrays, the two accumulators' demoted phis (heads of the tile and k loops)
  // and the values that reach them across the barriers.
  EXPECT_EQ(p->kernel("acc_tiles")->info().frame_size, 128u);
}

// Inlining walks the call sites it brings in (a worklist, linear in the code inlined): a deep
// chain of helpers each called several times is inlined whole, and recursion, direct or
// through other functions, is a build failure with a log line, never a hang.
TEST(ProgramKernelsInline, DeepHelperChainsAndRecursion) {
  std::string src;
  src += "uint h0(uint x) { return x * 3u + 1u; }\n";
  for (int i = 1; i <= 12; ++i) // h_i calls h_{i-1} twice: 4096 calls of h0 once inlined
    src += "uint h" + std::to_string(i) + "(uint x) { return h" + std::to_string(i - 1) +
           "(x) ^ h" + std::to_string(i - 1) + "(x + " + std::to_string(i) + "u); }\n";
  src += "kernel void deep(global uint *out) { out[get_global_id(0)] = "
         "h12((uint)get_global_id(0)); }\n";
  auto p = buildLoad(src);
  ASSERT_TRUE(p);
  std::function<uint32_t(int, uint32_t)> h = [&](int i, uint32_t x) -> uint32_t {
    return i == 0 ? x * 3u + 1u : h(i - 1, x) ^ h(i - 1, x + uint32_t(i));
  };
  NDRange r;
  r.global[0] = 8;
  r.local[0] = 4;
  std::vector<uint32_t> out(8);
  ASSERT_TRUE(runND(*p, "deep", {ArgValue::pointer(out.data())}, r, ExecMode::LWI, 1));
  for (uint32_t i = 0; i < 8; ++i)
    EXPECT_EQ(out[i], h(12, i)) << i;

  for (const char *rec : {R"(
uint f(uint x) { return x == 0 ? 0 : f(x - 1) + 1; }
kernel void k(global uint *out) { out[0] = f(out[0]); })",
                          R"(
uint g(uint x);
uint f(uint x) { return x == 0 ? 0 : g(x - 1) + 1; }
uint g(uint x) { return x == 0 ? 0 : f(x - 1) + 2; }
kernel void k(global uint *out) { out[0] = f(out[0]); })"}) {
    BuildResult b = build(rec, "", dev());
    EXPECT_EQ(b.status.code, ErrorCode::BuildFailure);
    EXPECT_NE(b.log.find("recursion"), std::string::npos) << b.log;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ProgramKernels,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4},
                                         ModeParam{ExecMode::SPMD, 16}),
                         modeName);

} // namespace
