// RDMA transfers: data lands where host-computed expectations say, multicast reaches exactly
// the listed clusters, and any range outside the SPM or DDR is rejected with nothing
// written.
#include <string>
#include <vector>

#include "device_test_util.h"

using namespace manycl::device;
using namespace manycl::device::test;

namespace {

class Rdma : public DeviceTest {};

// Runs `body` on cluster 0 of a command over all four clusters; the others do nothing.
template <class F> manycl::Result<void> on_cluster0(std::shared_ptr<CommandRecorder> rec, F body) {
  auto result = rec->run([&](ClusterContext &ctx) {
    if (ctx.group_index() == 0)
      body(ctx);
  });
  rec->end();
  return result;
}

} // namespace

TEST_F(Rdma, LinearRoundTripDdrToSpmToDdr) {
  const uint64_t size = 3000;
  uint64_t in = ddr_block(size, 3);
  uint64_t out = ddr_block(size, 99);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    auto h1 = ctx.dma({DmaEndpoint::ddr(in), DmaEndpoint::spm(0, 512), DmaShape::linear(size)});
    ASSERT_TRUE(h1.ok()) << h1.error().message;
    ASSERT_TRUE(ctx.dma_wait(h1.value()).ok());
    auto h2 = ctx.dma({DmaEndpoint::spm(0, 512), DmaEndpoint::ddr(out), DmaShape::linear(size)});
    ASSERT_TRUE(h2.ok());
    EXPECT_EQ(h2.value(), h1.value() + 1);
    ASSERT_TRUE(ctx.dma_wait(h2.value()).ok());
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(std::memcmp(spm(0) + 512, ddr(in), size), 0);
  EXPECT_EQ(std::memcmp(ddr(out), ddr(in), size), 0);
  EXPECT_EQ(rec->stats().ddr_bytes_read, size);
  EXPECT_EQ(rec->stats().ddr_bytes_written, size);
  EXPECT_EQ(rec->stats().spm_high_water, 512 + size);
}

TEST_F(Rdma, TwoDimensionalGatherOfATileWithHalo) {
  // A 20 × 10 byte image in DDR; gather rows 2..6, columns 3..10 into SPM rows of stride 12.
  const uint64_t width = 20, height = 10, tile_w = 8, tile_h = 5, x0 = 3, y0 = 2;
  uint64_t image = ddr_block(width * height, 5);
  std::memset(spm(0), 0xEE, 4096);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    auto h = ctx.dma({DmaEndpoint::ddr(y0 * width + x0, DdrWindow{image, width * height}),
                      DmaEndpoint::spm(0, 64), DmaShape::strided_2d(tile_w, tile_h, width, 12)});
    ASSERT_TRUE(h.ok()) << h.error().message;
    ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
  });
  ASSERT_TRUE(r.ok());
  for (uint64_t y = 0; y < tile_h; ++y)
    for (uint64_t x = 0; x < 12; ++x) {
      uint8_t expected = x < tile_w ? ddr(image)[(y0 + y) * width + x0 + x] : 0xEE;
      ASSERT_EQ(spm(0)[64 + y * 12 + x], expected) << "y " << y << " x " << x;
    }
  EXPECT_EQ(spm(0)[63], 0xEE);
  EXPECT_EQ(spm(0)[64 + tile_h * 12], 0xEE);
}

TEST_F(Rdma, ThreeDimensionalScatterIntoChannelSlices) {
  // SPM holds 3 planes × 4 rows × 5 bytes packed; scatter into DDR rows of 16, planes of 80.
  const uint64_t planes = 3, rows = 4, row = 5;
  uint64_t out = ddr_block(planes * 80, 0);
  std::memset(ddr(out), 0, planes * 80);
  for (uint64_t i = 0; i < planes * rows * row; ++i)
    spm(0)[1000 + i] = static_cast<uint8_t>(i + 1);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    DmaShape shape{row, rows, planes, row, row * rows, 16, 80};
    auto h = ctx.dma({DmaEndpoint::spm(0, 1000), DmaEndpoint::ddr(out), shape});
    ASSERT_TRUE(h.ok()) << h.error().message;
    ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
  });
  ASSERT_TRUE(r.ok());
  for (uint64_t p = 0; p < planes; ++p)
    for (uint64_t y = 0; y < rows; ++y)
      for (uint64_t x = 0; x < 16; ++x) {
        uint8_t expected = x < row ? static_cast<uint8_t>(1 + p * rows * row + y * row + x) : 0;
        ASSERT_EQ(ddr(out)[p * 80 + y * 16 + x], expected);
      }
  EXPECT_EQ(rec->stats().ddr_bytes_written, planes * rows * row);
}

TEST_F(Rdma, ElementRowsChangeTheLayoutByteForByte) {
  // NCHW -> NHWC: one element per row (the network inputs' layout change), for element sizes
  // with a fixed-size path and for ones without; a multicast delivers every copy.
  const uint64_t channels = 3, pixels = 150;
  for (uint64_t element : {1, 2, 3, 4, 6, 8, 12, 16}) {
    SCOPED_TRACE("element " + std::to_string(element));
    const uint64_t bytes = channels * pixels * element;
    uint64_t image = ddr_block(bytes, static_cast<unsigned>(element));
    for (unsigned c = 0; c < 4; ++c)
      std::memset(spm(c), 0xEE, bytes + 64);
    auto rec = begin();
    auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
      DmaShape shape{element, pixels, channels, element, pixels * element, channels * element,
                     element};
      DmaRequest req{DmaEndpoint::ddr(image), DmaEndpoint::spm(0, 16), shape};
      req.multicast = {0, 2};
      auto h = ctx.dma(req);
      ASSERT_TRUE(h.ok()) << h.error().message;
      ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
    });
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (unsigned c : {0u, 2u}) {
      for (uint64_t ch = 0; ch < channels; ++ch)
        for (uint64_t px = 0; px < pixels; ++px)
          for (uint64_t b = 0; b < element; ++b)
            ASSERT_EQ(spm(c)[16 + (px * channels + ch) * element + b],
                      ddr(image)[(ch * pixels + px) * element + b])
                << "cluster " << c << " channel " << ch << " pixel " << px;
      EXPECT_EQ(spm(c)[15], 0xEE);
      EXPECT_EQ(spm(c)[16 + bytes], 0xEE);
    }
    EXPECT_EQ(spm(1)[16], 0xEE);
    rec.reset();
    device->ddr().free(image);
  }
}

TEST_F(Rdma, OverlappingElementRowsMoveInOrderAsMemmoveWould) {
  // SPM to the same SPM, rows of one element that overlap each other and their own
  // destination: each row is read whole before it is written, rows in order, as a memmove
  // per row moves them.
  for (uint64_t element : {4, 8, 5}) {
    SCOPED_TRACE("element " + std::to_string(element));
    const uint64_t rows = 64, stride = element - 1, shift = 2;
    std::vector<uint8_t> expected(4096);
    for (size_t i = 0; i < expected.size(); ++i)
      expected[i] = static_cast<uint8_t>(i * 13 + element);
    std::memcpy(spm(1), expected.data(), expected.size());
    for (uint64_t row = 0; row < rows; ++row)
      std::memmove(&expected[256 + row * stride + shift], &expected[256 + row * stride], element);
    auto rec = begin();
    auto r = rec->run([&](ClusterContext &ctx) {
      if (ctx.group_index() != 1)
        return;
      auto h = ctx.dma({DmaEndpoint::spm(1, 256), DmaEndpoint::spm(1, 256 + shift),
                        DmaShape::strided_2d(element, rows, stride, stride)});
      ASSERT_TRUE(h.ok()) << h.error().message;
      ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
    });
    rec->end();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(std::memcmp(spm(1), expected.data(), expected.size()), 0);
  }
}

TEST_F(Rdma, SpmToSpmOfAnotherCluster) {
  for (int i = 0; i < 256; ++i)
    spm(0)[i] = static_cast<uint8_t>(255 - i);
  std::memset(spm(2) + 4096, 0, 512);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    auto h = ctx.dma({DmaEndpoint::spm(0, 0), DmaEndpoint::spm(2, 4096), DmaShape::linear(256)});
    ASSERT_TRUE(h.ok()) << h.error().message;
    ASSERT_TRUE(ctx.dma_wait_all().ok());
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::memcmp(spm(2) + 4096, spm(0), 256), 0);
  EXPECT_EQ(spm(2)[4096 + 256], 0);
  EXPECT_EQ(rec->stats().ddr_bytes_read + rec->stats().ddr_bytes_written, 0u);
  EXPECT_EQ(rec->stats().noc_bytes, 256u);
  EXPECT_EQ(rec->stats().clusters[2].spm_high_water, 4096u + 256);
}

TEST_F(Rdma, MulticastDeliversOneReadToTheListedClustersOnly) {
  const uint64_t size = 2048;
  uint64_t weights = ddr_block(size, 11);
  for (unsigned c = 0; c < 4; ++c)
    std::memset(spm(c) + 8192, 0x5A, size);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    DmaRequest req{DmaEndpoint::ddr(weights), DmaEndpoint::spm(0, 8192), DmaShape::linear(size)};
    req.multicast = {0, 2, 3};
    auto h = ctx.dma(req);
    ASSERT_TRUE(h.ok()) << h.error().message;
    ASSERT_TRUE(ctx.dma_wait(h.value()).ok());
  });
  ASSERT_TRUE(r.ok());
  for (unsigned c : {0u, 2u, 3u})
    EXPECT_EQ(std::memcmp(spm(c) + 8192, ddr(weights), size), 0) << "cluster " << c;
  EXPECT_EQ(spm(1)[8192], 0x5A);
  EXPECT_EQ(spm(1)[8192 + size - 1], 0x5A);
  const CommandStats &s = rec->stats();
  EXPECT_EQ(s.ddr_bytes_read, size);
  EXPECT_EQ(s.noc_bytes, 3 * size);
  EXPECT_EQ(s.multicast_saved_bytes, 2 * size);
}

TEST_F(Rdma, SpmMulticastDeliversTheSourceToTheListedClustersOnly) {
  for (int i = 0; i < 1024; ++i)
    spm(1)[i] = static_cast<uint8_t>(i * 13 + 5);
  for (unsigned c = 0; c < 4; ++c)
    std::memset(spm(c) + 4096, 0x5A, 1024);
  auto rec = begin();
  auto r = rec->run([&](ClusterContext &ctx) {
    if (ctx.group_index() != 1)
      return;
    // Rows of 64 bytes at a 128-byte stride on the source, packed on the destinations.
    DmaRequest req{DmaEndpoint::spm(1, 0), DmaEndpoint::spm(0, 4096),
                   DmaShape::strided_2d(64, 8, 128, 64)};
    req.multicast = {0, 3};
    auto h = ctx.dma(req);
    ASSERT_TRUE(h.ok()) << h.error().message;
    ASSERT_TRUE(ctx.dma_wait_all().ok());
  });
  rec->end();
  ASSERT_TRUE(r.ok());
  for (unsigned c : {0u, 3u})
    for (int row = 0; row < 8; ++row)
      EXPECT_EQ(std::memcmp(spm(c) + 4096 + row * 64, spm(1) + row * 128, 64), 0)
          << "cluster " << c << " row " << row;
  EXPECT_EQ(spm(2)[4096], 0x5A);
  EXPECT_EQ(spm(0)[4096 + 512], 0x5A); // past the 8 rows
  const CommandStats &s = rec->stats();
  EXPECT_EQ(s.ddr_bytes_read + s.ddr_bytes_written, 0u);
  EXPECT_EQ(s.noc_bytes, 2 * 512u);
}

// Every rejected transfer: error returned, command failed, SPMs and DDR unchanged.
TEST_F(Rdma, OutOfRangeTransfersAreRejectedAndWriteNothing) {
  const uint64_t spm_size = device->config().spm_bytes;
  uint64_t block = ddr_block(1000, 7);
  uint64_t other = ddr_block(1000, 8); // the next block: an overrun would reach it
  for (unsigned c = 0; c < 4; ++c)
    for (uint64_t i = 0; i < spm_size; ++i)
      spm(c)[i] = static_cast<uint8_t>(i * 13 + c);
  std::vector<std::vector<uint8_t>> spm_before;
  for (unsigned c = 0; c < 4; ++c)
    spm_before.emplace_back(spm(c), spm(c) + spm_size);
  std::vector<uint8_t> block_before(ddr(block), ddr(block) + 1000);
  std::vector<uint8_t> other_before(ddr(other), ddr(other) + 1000);

  std::vector<std::pair<const char *, DmaRequest>> bad = {
      {"SPM destination past the end",
       {DmaEndpoint::ddr(block), DmaEndpoint::spm(0, spm_size - 10), DmaShape::linear(20)}},
      {"SPM offset beyond the SPM",
       {DmaEndpoint::ddr(block), DmaEndpoint::spm(0, spm_size + 1), DmaShape::linear(0)}},
      {"strided SPM destination whose last row overruns",
       {DmaEndpoint::ddr(block), DmaEndpoint::spm(1, 0),
        DmaShape::strided_2d(10, 3, 10, spm_size / 2)}},
      {"DDR source past its window",
       {DmaEndpoint::ddr(900, DdrWindow{block, 1000}), DmaEndpoint::spm(0, 0),
        DmaShape::linear(200)}},
      {"DDR destination past its window (into the next block)",
       {DmaEndpoint::spm(0, 0), DmaEndpoint::ddr(990, DdrWindow{block, 1000}),
        DmaShape::linear(100)}},
      {"DDR window larger than the allocation, range in free DDR",
       {DmaEndpoint::spm(0, 0), DmaEndpoint::ddr(0, DdrWindow{other + 1024, 1 << 20}),
        DmaShape::linear(64)}},
      {"DDR beyond the device",
       {DmaEndpoint::ddr(device->ddr().capacity() - 8), DmaEndpoint::spm(0, 0),
        DmaShape::linear(64)}},
      {"SPM of a cluster outside the command",
       {DmaEndpoint::spm(0, 0), DmaEndpoint::spm(7, 0), DmaShape::linear(8)}},
      {"shape overflowing 64 bits",
       {DmaEndpoint::ddr(block), DmaEndpoint::spm(0, 0),
        DmaShape{1, 1ull << 40, 1ull << 40, 0, 0, 0, 0}}},
      {"DDR to DDR", {DmaEndpoint::ddr(block), DmaEndpoint::ddr(other), DmaShape::linear(8)}},
  };
  DmaRequest multicast_bad{DmaEndpoint::ddr(block), DmaEndpoint::spm(0, 0), DmaShape::linear(8)};
  multicast_bad.multicast = {0, 4};
  bad.push_back({"multicast to a cluster outside the command", multicast_bad});
  DmaRequest multicast_twice = multicast_bad;
  multicast_twice.multicast = {1, 1};
  bad.push_back({"multicast listing a cluster twice", multicast_twice});
  DmaRequest multicast_past = multicast_bad;
  multicast_past.multicast = {0, 1, 2};
  multicast_past.dst.offset = spm_size - 4;
  bad.push_back({"multicast past the SPM end (no cluster written)", multicast_past});

  for (auto &[what, request] : bad) {
    auto rec = begin();
    std::string message;
    auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
      auto h = ctx.dma(request);
      ASSERT_FALSE(h.ok()) << what;
      message = h.error().message;
      // The command is failed: later transfers are refused too.
      auto later = ctx.dma({DmaEndpoint::ddr(block), DmaEndpoint::spm(0, 0), DmaShape::linear(8)});
      EXPECT_FALSE(later.ok());
    });
    EXPECT_FALSE(r.ok()) << what;
    EXPECT_FALSE(rec->stats().ok) << what;
    EXPECT_FALSE(message.empty()) << what;
    for (unsigned c = 0; c < 4; ++c)
      ASSERT_EQ(std::memcmp(spm(c), spm_before[c].data(), spm_size), 0) << what << " c" << c;
    ASSERT_EQ(std::memcmp(ddr(block), block_before.data(), 1000), 0) << what;
    ASSERT_EQ(std::memcmp(ddr(other), other_before.data(), 1000), 0) << what;
  }
}

TEST_F(Rdma, WaitOnUnknownHandleIsAnError) {
  auto rec = begin({0});
  auto r = rec->run([&](ClusterContext &ctx) {
    EXPECT_FALSE(ctx.dma_wait(0).ok());
    EXPECT_FALSE(ctx.dma_wait(5).ok());
    EXPECT_TRUE(ctx.dma_wait_all().ok()); // nothing outstanding
  });
  EXPECT_TRUE(r.ok());
  rec->end();
}

TEST_F(Rdma, RejectionWithoutFailingTheCommandWhenAsked) {
  uint64_t block = ddr_block(64);
  auto rec = begin({0});
  auto r = rec->run([&](ClusterContext &ctx) {
    DmaRequest req{DmaEndpoint::ddr(0, DdrWindow{block, 64}), DmaEndpoint::spm(0, 0),
                   DmaShape::linear(65)};
    req.fail_command_on_error = false;
    auto h = ctx.dma(req);
    ASSERT_FALSE(h.ok());
    EXPECT_NE(h.error().message.find("window"), std::string::npos);
    // The command goes on.
    req.shape = DmaShape::linear(64);
    EXPECT_TRUE(ctx.dma(req).ok());
  });
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(rec->end().ok);
}

// Transfers from an immutable source of contiguous bytes are deferred copies: the SPM range
// reads as the source (deferred_view) without a host copy, pieces of adjacent source bytes
// merge, and every other access sees exactly the bytes an eager copy would have left.
TEST_F(Rdma, DeferredCopiesReadAsTheirSourceAndMaterializeExactly) {
  const uint64_t size = 4096;
  const uint64_t params = ddr_block(2 * size, 21);
  const uint64_t out = ddr_block(2 * size, 0);
  for (unsigned c = 0; c < 4; ++c)
    std::memset(spm(c), 0x77, 64 << 10);
  auto rec = begin();
  auto r = on_cluster0(rec, [&](ClusterContext &ctx) {
    // Two pieces of one block, the second first, multicast to clusters 0 and 1.
    for (uint64_t piece : {1u, 0u}) {
      DmaRequest req{DmaEndpoint::ddr(params + piece * size / 2),
                     DmaEndpoint::spm(0, 8192 + piece * size / 2), DmaShape::linear(size / 2)};
      req.multicast = {0, 1};
      req.immutable_source = true;
      ASSERT_TRUE(ctx.dma(req).ok());
    }
    ASSERT_TRUE(ctx.dma_wait_all().ok());
    ClusterContext &c1 = rec->context(1);
    // Nothing was copied; the whole block reads as its source, from either cluster.
    EXPECT_EQ(spm(0)[8192], 0x77);
    EXPECT_EQ(spm(1)[8192 + size - 1], 0x77);
    EXPECT_TRUE(ctx.has_deferred());
    EXPECT_EQ(ctx.deferred_view(8192, size), reinterpret_cast<const std::byte *>(ddr(params)));
    EXPECT_EQ(c1.deferred_view(8192 + 100, 50),
              reinterpret_cast<const std::byte *>(ddr(params)) + 100);
    // An eager transfer overwriting the middle of cluster 1's copy: the rest stays deferred
    // and reads as before.
    ASSERT_TRUE(
        ctx.dma({DmaEndpoint::ddr(out), DmaEndpoint::spm(1, 8192 + 1000), DmaShape::linear(500)})
            .ok());
    EXPECT_EQ(c1.deferred_view(8192, 1000), reinterpret_cast<const std::byte *>(ddr(params)));
    EXPECT_EQ(c1.deferred_view(8192 + 1500, size - 1500),
              reinterpret_cast<const std::byte *>(ddr(params)) + 1500);
    // A store of cluster 0's block, a strided gather into cluster 1 and a view across the
    // overwritten bytes all need the SPM bytes: materialized, then no longer deferred.
    ASSERT_TRUE(
        ctx.dma({DmaEndpoint::spm(0, 8192), DmaEndpoint::ddr(out + size), DmaShape::linear(size)})
            .ok());
    ASSERT_TRUE(ctx.dma({DmaEndpoint::ddr(out), DmaEndpoint::spm(1, 8192 + 2000),
                         DmaShape::strided_2d(16, 4, 16, 64)})
                    .ok());
    EXPECT_EQ(c1.deferred_view(8192, size), nullptr);
    ASSERT_TRUE(ctx.dma_wait_all().ok());
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  // What an eager copy leaves: cluster 0 holds the block (materialized for the store, which
  // wrote the same bytes to DDR); cluster 1 holds the block with the two eager writes on top.
  EXPECT_EQ(std::memcmp(spm(0) + 8192, ddr(params), size), 0);
  EXPECT_EQ(std::memcmp(ddr(out + size), ddr(params), size), 0);
  std::vector<uint8_t> want(ddr(params), ddr(params) + size);
  std::memcpy(want.data() + 1000, ddr(out), 500);
  for (unsigned row = 0; row < 4; ++row)
    std::memcpy(want.data() + 2000 + row * 64, ddr(out) + row * 16, 16);
  EXPECT_EQ(std::memcmp(spm(1) + 8192, want.data(), size), 0);
  EXPECT_EQ(spm(2)[8192], 0x77); // not a destination
  const CommandStats &s = rec->stats();
  EXPECT_EQ(s.noc_bytes, 2 * size + 500 + size + 64); // modeled as eager transfers
  EXPECT_EQ(s.multicast_saved_bytes, size);
}
