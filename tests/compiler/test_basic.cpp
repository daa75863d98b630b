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
  for (int i = 0; i < n; ++i) { a[i] = i; b[i] = 2 * i; }
  NDRange r;
  r.global[0] = n;
  r.local[0] = 100;
  float s = 0.5f;
  for (ExecMode m : {ExecMode::LWI, ExecMode::SPMD}) {
    std::fill(c.begin(), c.end(), -1);
    ASSERT_TRUE(runND(*p, "add", {ArgValue::pointer(a.data()), ArgValue::pointer(b.data()), ArgValue::pointer(c.data()), ArgValue::of(s)}, r, m));
    for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i] * s) << i;
  }
}
