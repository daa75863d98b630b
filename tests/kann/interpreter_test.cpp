// The record interpreter on a simulated device, without OpenCL: a hand-written program
// with multicast, per-cluster loads, a barrier, a convolution and stores on 2 clusters.
#include <gtest/gtest.h>

#include "handmade_program.h"
#include "manycl/device/config.h"
#include "manycl/kbin_runner.h"

namespace {

using namespace kann;

manycl::device::DeviceConfig small_device() {
  auto c = manycl::device::preset("small");
  EXPECT_TRUE(c.ok());
  c.value().ddr_bytes = 64ull << 20;
  return c.value();
}

TEST(Interpreter, HandmadeConvOnTwoClustersMatchesReference) {
  auto m = test::make_handmade();
  auto bytes = format::write_kbin(m.program);
  ASSERT_TRUE(bytes.ok()) << bytes.error().message;
  auto program = format::read_kbin(bytes.value().data(), bytes.value().size(), {2, 256 << 10});
  ASSERT_TRUE(program.ok()) << program.error().message;

  manycl::device::Device device(small_device());
  auto run = manycl::interp::run_kbin(device, program.value(), {test::as_bytes(m.input), {}});
  ASSERT_TRUE(run.ok()) << run.error().message;
  auto out = test::as_floats(run.value().outputs[1]);
  auto ref = m.reference();
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 1e-4) << "element " << i;
  // The weights came from DDR once, delivered to both clusters.
  EXPECT_GT(run.value().stats.multicast_saved_bytes, 0u);
  EXPECT_GT(run.value().stats.cycles(), 0u);
}

TEST(Interpreter, BadDdrReferenceFailsCleanly) {
  auto m = test::make_handmade();
  // Point cluster 1's store past its output buffer: the reader would reject it, and the
  // interpreter (given the unvalidated program) fails the command without touching memory.
  kbin_dma_args d;
  auto &rec = m.program.streams[1][5];
  ASSERT_TRUE(rec.decode(d));
  ASSERT_EQ(d.kind, uint32_t(KBIN_DMA_STORE));
  d.ddr.offset += 4096;
  rec = format::Record::make(KBIN_FN_DMA, d);
  EXPECT_FALSE(format::validate_program(m.program).ok());
  manycl::device::Device device(small_device());
  auto run = manycl::interp::run_kbin(device, m.program, {test::as_bytes(m.input), {}});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message.find("cluster 1"), std::string::npos) << run.error().message;
}

} // namespace
