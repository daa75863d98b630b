// Shapes of real OpenCL programs (issue 15: hashcat, CLBlast, clpeak) that the kernel compiler
// once handled badly, each checked against the host in LWI and SPMD with 4 and 16 PEs.
#include "helpers.h"

#include <cstdint>

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

INSTANTIATE_TEST_SUITE_P(Modes, ProgramKernels,
                         testing::Values(ModeParam{ExecMode::LWI, 1}, ModeParam{ExecMode::SPMD, 4},
                                         ModeParam{ExecMode::SPMD, 16}),
                         modeName);

} // namespace
