// Memory commands: read/write/copy, their _rect forms, fill, map/unmap, migrate, each checked
// against an expectation computed on the host.
#include "rt_common.h"

#include <numeric>
#include <random>

using namespace rt_test;

namespace {

using TransferTest = RuntimeTest;

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto &b : v)
    b = static_cast<unsigned char>(rng());
  return v;
}

TEST_F(TransferTest, ReadWriteCopy) {
  const size_t n = 10000;
  auto a = random_bytes(n, 1), b = random_bytes(n, 2);
  cl_mem x = make_buffer(n), y = make_buffer(n);
  CL_OK(clEnqueueWriteBuffer(queue, x, CL_TRUE, 0, n, a.data(), 0, nullptr, nullptr));
  CL_OK(clEnqueueWriteBuffer(queue, y, CL_FALSE, 0, n, b.data(), 0, nullptr, nullptr));
  // Partial write at an odd offset.
  auto part = random_bytes(77, 3);
  CL_OK(clEnqueueWriteBuffer(queue, x, CL_FALSE, 1001, part.size(), part.data(), 0, nullptr,
                             nullptr));
  std::copy(part.begin(), part.end(), a.begin() + 1001);
  // Copy a window of x into y.
  cl_event copied;
  CL_OK(clEnqueueCopyBuffer(queue, x, y, 333, 5555, 2222, 0, nullptr, &copied));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_COPY_BUFFER),
            event_info<cl_command_type>(copied, CL_EVENT_COMMAND_TYPE));
  // `b` is the source of a non-blocking write: the application must not touch it before the
  // write completes, so the expected contents of y are a copy.
  auto expected_y = b;
  std::copy(a.begin() + 333, a.begin() + 333 + 2222, expected_y.begin() + 5555);
  std::vector<unsigned char> got(n);
  CL_OK(clEnqueueReadBuffer(queue, y, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(expected_y, got);
  std::vector<unsigned char> window(500);
  cl_event read;
  CL_OK(clEnqueueReadBuffer(queue, x, CL_FALSE, 900, 500, window.data(), 0, nullptr, &read));
  CL_OK(clWaitForEvents(1, &read));
  EXPECT_TRUE(std::equal(window.begin(), window.end(), a.begin() + 900));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_READ_BUFFER),
            event_info<cl_command_type>(read, CL_EVENT_COMMAND_TYPE));
  // Non-overlapping copy inside one buffer is allowed.
  CL_OK(clEnqueueCopyBuffer(queue, x, x, 0, 5000, 1000, 0, nullptr, nullptr));
  std::copy(a.begin(), a.begin() + 1000, a.begin() + 5000);
  CL_OK(clEnqueueReadBuffer(queue, x, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(a, got);
  clReleaseEvent(copied);
  clReleaseEvent(read);
  clReleaseMemObject(x);
  clReleaseMemObject(y);
}

TEST_F(TransferTest, ReadWriteCopyErrors) {
  const size_t n = 256;
  cl_mem x = make_buffer(n), y = make_buffer(n);
  std::vector<unsigned char> host(n);
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBuffer(queue, x, CL_TRUE, 1, n, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBuffer(queue, x, CL_TRUE, n, 1, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBuffer(queue, x, CL_TRUE, 0, n, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBuffer(queue, x, CL_TRUE, 0, 0, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueWriteBuffer(queue, x, CL_TRUE, 8, n, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueWriteBuffer(queue, x, CL_TRUE, 0, n, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueReadBuffer(queue, wrong<cl_mem>(queue), CL_TRUE, 0, 1,
                                                       host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clEnqueueWriteBuffer(queue, wrong<cl_mem>(queue), CL_TRUE, 0, 1,
                                                        host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_COMMAND_QUEUE, clEnqueueReadBuffer(wrong<cl_command_queue>(x), x, CL_TRUE, 0,
                                                          1, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueCopyBuffer(queue, x, y, 1, 0, n, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueCopyBuffer(queue, x, y, 0, 1, n, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueCopyBuffer(queue, x, y, 0, 0, 0, 0, nullptr, nullptr));
  EXPECT_EQ(CL_MEM_COPY_OVERLAP, clEnqueueCopyBuffer(queue, x, x, 0, 10, 20, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT,
            clEnqueueCopyBuffer(queue, x, wrong<cl_mem>(queue), 0, 0, 1, 0, nullptr, nullptr));
  // A sub-buffer overlapping its parent's source region.
  const cl_uint align = device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  cl_mem big = make_buffer(4 * align);
  cl_buffer_region r{align, 2 * align};
  cl_int err;
  cl_mem sub = clCreateSubBuffer(big, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(CL_MEM_COPY_OVERLAP,
            clEnqueueCopyBuffer(queue, big, sub, 0, 0, 2 * align, 0, nullptr, nullptr));
  CL_OK(clEnqueueCopyBuffer(queue, big, sub, 3 * align, 0, align, 0, nullptr, nullptr));
  // Buffers of another context.
  cl_context other = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, n, nullptr, &err);
  EXPECT_EQ(CL_INVALID_CONTEXT,
            clEnqueueReadBuffer(queue, foreign, CL_TRUE, 0, 1, host.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_CONTEXT,
            clEnqueueCopyBuffer(queue, x, foreign, 0, 0, 1, 0, nullptr, nullptr));
  CL_OK(clFinish(queue));
  for (cl_mem m : {foreign, sub, big, x, y})
    clReleaseMemObject(m);
  clReleaseContext(other);
}

// Host model of a rect copy, byte by byte.
void host_rect(unsigned char *dst, const size_t *dorg, size_t drow, size_t dslice,
               const unsigned char *src, const size_t *sorg, size_t srow, size_t sslice,
               const size_t *region) {
  for (size_t z = 0; z < region[2]; ++z)
    for (size_t y = 0; y < region[1]; ++y)
      for (size_t x = 0; x < region[0]; ++x)
        dst[(dorg[2] + z) * dslice + (dorg[1] + y) * drow + dorg[0] + x] =
            src[(sorg[2] + z) * sslice + (sorg[1] + y) * srow + sorg[0] + x];
}

TEST_F(TransferTest, RectCommands) {
  // Buffer viewed as 3-D: row pitch 40, slice pitch 40*12, 5 slices.
  const size_t brow = 40, bslice = 40 * 12, bsize = bslice * 5;
  const size_t hrow = 64, hslice = 64 * 16, hsize = hslice * 6;
  auto buf_model = random_bytes(bsize, 7);
  cl_mem b = make_buffer(bsize, CL_MEM_COPY_HOST_PTR, buf_model.data());
  auto host = random_bytes(hsize, 8);

  // Write a host box into the buffer.
  size_t borg[3] = {3, 2, 1}, horg[3] = {5, 4, 2}, region[3] = {17, 9, 3};
  cl_event ev;
  CL_OK(clEnqueueWriteBufferRect(queue, b, CL_TRUE, borg, horg, region, brow, bslice, hrow, hslice,
                                 host.data(), 0, nullptr, &ev));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_WRITE_BUFFER_RECT),
            event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  clReleaseEvent(ev);
  host_rect(buf_model.data(), borg, brow, bslice, host.data(), horg, hrow, hslice, region);
  std::vector<unsigned char> got(bsize);
  CL_OK(clEnqueueReadBuffer(queue, b, CL_TRUE, 0, bsize, got.data(), 0, nullptr, nullptr));
  ASSERT_EQ(buf_model, got);

  // Read a different box back into a host image.
  size_t borg2[3] = {0, 5, 2}, horg2[3] = {10, 0, 1}, region2[3] = {40, 7, 3};
  auto host_model = host;
  CL_OK(clEnqueueReadBufferRect(queue, b, CL_TRUE, borg2, horg2, region2, brow, bslice, hrow,
                                hslice, host.data(), 0, nullptr, nullptr));
  host_rect(host_model.data(), horg2, hrow, hslice, buf_model.data(), borg2, brow, bslice, region2);
  EXPECT_EQ(host_model, host);

  // Zero pitches mean tightly packed (row = region[0], slice = region[1] * row).
  size_t zero[3] = {0, 0, 0}, r3[3] = {8, 4, 2};
  std::vector<unsigned char> packed(8 * 4 * 2);
  CL_OK(clEnqueueReadBufferRect(queue, b, CL_TRUE, zero, zero, r3, 0, 0, 0, 0, packed.data(), 0,
                                nullptr, nullptr));
  std::vector<unsigned char> packed_model(packed.size());
  host_rect(packed_model.data(), zero, 8, 32, buf_model.data(), zero, 8, 32, r3);
  EXPECT_EQ(packed_model, packed);

  // Copy between two buffers with different pitches.
  const size_t drow = 50, dslice = 50 * 10, dsize = dslice * 4;
  auto dst_model = random_bytes(dsize, 9);
  cl_mem d = make_buffer(dsize, CL_MEM_COPY_HOST_PTR, dst_model.data());
  size_t sorg[3] = {1, 1, 1}, dorg[3] = {7, 2, 0}, cr[3] = {30, 8, 4};
  CL_OK(clEnqueueCopyBufferRect(queue, b, d, sorg, dorg, cr, brow, bslice, drow, dslice, 0, nullptr,
                                &ev));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_COPY_BUFFER_RECT),
            event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  clReleaseEvent(ev);
  host_rect(dst_model.data(), dorg, drow, dslice, buf_model.data(), sorg, brow, bslice, cr);
  std::vector<unsigned char> dgot(dsize);
  CL_OK(clEnqueueReadBuffer(queue, d, CL_TRUE, 0, dsize, dgot.data(), 0, nullptr, nullptr));
  EXPECT_EQ(dst_model, dgot);

  // Copy inside one buffer, non-overlapping boxes.
  size_t s1[3] = {0, 0, 0}, d1[3] = {20, 0, 0}, r1[3] = {10, 12, 5};
  CL_OK(clEnqueueCopyBufferRect(queue, b, b, s1, d1, r1, brow, bslice, brow, bslice, 0, nullptr,
                                nullptr));
  host_rect(buf_model.data(), d1, brow, bslice, buf_model.data(), s1, brow, bslice, r1);
  CL_OK(clEnqueueReadBuffer(queue, b, CL_TRUE, 0, bsize, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(buf_model, got);

  // Errors.
  size_t too_far[3] = {0, 0, 5};
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBufferRect(queue, b, CL_TRUE, too_far, zero, r3, brow, bslice, 0, 0,
                                    packed.data(), 0, nullptr, nullptr));
  size_t empty[3] = {8, 0, 1};
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueReadBufferRect(queue, b, CL_TRUE, zero, zero, empty, 0, 0, 0,
                                                      0, packed.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueReadBufferRect(queue, b, CL_TRUE, zero, zero, r3, 4 /* < region[0] */, 0, 0, 0,
                                    packed.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueWriteBufferRect(queue, b, CL_TRUE, zero, zero, r3, brow,
                                                       brow * 2 /* < 4 rows */, 0, 0, packed.data(),
                                                       0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueWriteBufferRect(queue, b, CL_TRUE, zero, zero, r3, brow, brow * 4 + 1, 0, 0,
                                     packed.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueWriteBufferRect(queue, b, CL_TRUE, zero, zero, r3, 0, 0, 0,
                                                       0, nullptr, 0, nullptr, nullptr));
  size_t overlap_dst[3] = {5, 0, 0};
  EXPECT_EQ(CL_MEM_COPY_OVERLAP,
            clEnqueueCopyBufferRect(queue, b, b, s1, overlap_dst, r1, brow, bslice, brow, bslice, 0,
                                    nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueCopyBufferRect(queue, b, d, s1, dorg, cr, brow, bslice, drow,
                                                      dslice + 1, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT,
            clEnqueueCopyBufferRect(queue, b, wrong<cl_mem>(queue), s1, dorg, cr, brow, bslice,
                                    drow, dslice, 0, nullptr, nullptr));
  clReleaseMemObject(b);
  clReleaseMemObject(d);
}

TEST_F(TransferTest, FillEveryPatternSize) {
  const size_t n = 1024;
  cl_mem m = make_buffer(n);
  for (size_t ps = 1; ps <= 128; ps *= 2) {
    SCOPED_TRACE(ps);
    // The source of a non-blocking write stays untouched until the write completes.
    const std::vector<unsigned char> initial(n, 0xee);
    std::vector<unsigned char> model = initial;
    CL_OK(clEnqueueWriteBuffer(queue, m, CL_FALSE, 0, n, initial.data(), 0, nullptr, nullptr));
    auto pat = random_bytes(ps, static_cast<unsigned>(ps));
    size_t offset = 2 * ps, size = 3 * ps + (ps <= 32 ? 128 : 0);
    size -= size % ps;
    cl_event ev;
    CL_OK(clEnqueueFillBuffer(queue, m, pat.data(), ps, offset, size, 0, nullptr, &ev));
    EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_FILL_BUFFER),
              event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
    clReleaseEvent(ev);
    for (size_t i = 0; i < size; ++i)
      model[offset + i] = pat[i % ps];
    std::vector<unsigned char> got(n);
    CL_OK(clEnqueueReadBuffer(queue, m, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
    EXPECT_EQ(model, got);
  }
  unsigned char pat[256] = {};
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueFillBuffer(queue, m, pat, 3, 0, 12, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueFillBuffer(queue, m, pat, 256, 0, 256, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueFillBuffer(queue, m, pat, 0, 0, 16, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueFillBuffer(queue, m, nullptr, 4, 0, 16, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueFillBuffer(queue, m, pat, 4, 2, 16, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueFillBuffer(queue, m, pat, 4, 0, 18, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueFillBuffer(queue, m, pat, 4, n - 8, 16, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT,
            clEnqueueFillBuffer(queue, wrong<cl_mem>(queue), pat, 4, 0, 16, 0, nullptr, nullptr));
  clReleaseMemObject(m);
}

TEST_F(TransferTest, MapUnmap) {
  const size_t n = 4096;
  auto data = random_bytes(n, 11);
  cl_mem m = make_buffer(n, CL_MEM_COPY_HOST_PTR, data.data());
  cl_int err;
  cl_event ev;
  auto *p = static_cast<unsigned char *>(clEnqueueMapBuffer(
      queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 100, 1000, 0, nullptr, &ev, &err));
  ASSERT_EQ(CL_SUCCESS, err);
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_MAP_BUFFER),
            event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  clReleaseEvent(ev);
  EXPECT_TRUE(std::equal(p, p + 1000, data.begin() + 100));
  EXPECT_EQ(1u, mem_info<cl_uint>(m, CL_MEM_MAP_COUNT));
  for (size_t i = 0; i < 1000; ++i)
    p[i] = static_cast<unsigned char>(i);
  for (size_t i = 0; i < 1000; ++i)
    data[100 + i] = static_cast<unsigned char>(i);
  CL_OK(clEnqueueUnmapMemObject(queue, m, p, 0, nullptr, &ev));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_UNMAP_MEM_OBJECT),
            event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  CL_OK(clWaitForEvents(1, &ev));
  clReleaseEvent(ev);
  EXPECT_EQ(0u, mem_info<cl_uint>(m, CL_MEM_MAP_COUNT));
  std::vector<unsigned char> got(n);
  CL_OK(clEnqueueReadBuffer(queue, m, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(data, got);

  // Two mappings at once; write-invalidate.
  auto *a = static_cast<unsigned char *>(
      clEnqueueMapBuffer(queue, m, CL_TRUE, CL_MAP_READ, 0, 16, 0, nullptr, nullptr, &err));
  ASSERT_EQ(CL_SUCCESS, err);
  auto *w = static_cast<unsigned char *>(clEnqueueMapBuffer(
      queue, m, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 2048, 64, 0, nullptr, nullptr, &err));
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(2u, mem_info<cl_uint>(m, CL_MEM_MAP_COUNT));
  std::memset(w, 0x5a, 64);
  std::memset(data.data() + 2048, 0x5a, 64);
  CL_OK(clEnqueueUnmapMemObject(queue, m, w, 0, nullptr, nullptr));
  CL_OK(clEnqueueUnmapMemObject(queue, m, a, 0, nullptr, nullptr));
  CL_OK(clEnqueueReadBuffer(queue, m, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(data, got);

  // Errors.
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueUnmapMemObject(queue, m, got.data(), 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueUnmapMemObject(queue, m, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(nullptr, clEnqueueMapBuffer(queue, m, CL_TRUE, CL_MAP_READ, n - 4, 8, 0, nullptr,
                                        nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr,
            clEnqueueMapBuffer(queue, m, CL_TRUE, CL_MAP_READ, 0, 0, 0, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr,
            clEnqueueMapBuffer(queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE_INVALIDATE_REGION, 0,
                               8, 0, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clEnqueueMapBuffer(queue, m, CL_TRUE, cl_map_flags(1) << 10, 0, 8, 0, nullptr,
                                        nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clEnqueueMapBuffer(queue, wrong<cl_mem>(queue), CL_TRUE, CL_MAP_READ, 0, 8, 0,
                                        nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, err);
  cl_mem wo = make_buffer(64, CL_MEM_HOST_WRITE_ONLY);
  EXPECT_EQ(nullptr,
            clEnqueueMapBuffer(queue, wo, CL_TRUE, CL_MAP_READ, 0, 8, 0, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  cl_mem ro = make_buffer(64, CL_MEM_HOST_READ_ONLY);
  EXPECT_EQ(nullptr,
            clEnqueueMapBuffer(queue, ro, CL_TRUE, CL_MAP_WRITE, 0, 8, 0, nullptr, nullptr, &err));
  EXPECT_EQ(CL_INVALID_OPERATION, err);
  clReleaseMemObject(ro);
  clReleaseMemObject(wo);
  clReleaseMemObject(m);
}

struct Increment {
  unsigned char *data;
  size_t n;
};
void CL_CALLBACK increment_all(void *p) {
  auto *a = static_cast<Increment *>(p);
  for (size_t i = 0; i < a->n; ++i)
    a->data[i]++;
}

TEST_F(TransferTest, MapUseHostPtrSynchronises) {
  const size_t n = 512;
  std::vector<unsigned char> host(n);
  std::iota(host.begin(), host.end(), 0);
  cl_mem m = make_buffer(n, CL_MEM_USE_HOST_PTR, host.data());
  // The device changes the buffer; mapping makes the change visible in the host memory.
  Increment args{nullptr, n};
  const void *loc[] = {&args.data};
  CL_OK(clEnqueueNativeKernel(queue, increment_all, &args, sizeof(args), 1, &m, loc, 0, nullptr,
                              nullptr));
  cl_int err;
  auto *p = static_cast<unsigned char *>(clEnqueueMapBuffer(
      queue, m, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, n, 0, nullptr, nullptr, &err));
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(host.data(), p) << "a USE_HOST_PTR mapping is the application's memory";
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<unsigned char>(i + 1), host[i]) << i;
  // Host writes through the mapping reach the device at unmap.
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<unsigned char>(3 * i);
  CL_OK(clEnqueueUnmapMemObject(queue, m, p, 0, nullptr, nullptr));
  CL_OK(clEnqueueNativeKernel(queue, increment_all, &args, sizeof(args), 1, &m, loc, 0, nullptr,
                              nullptr));
  std::vector<unsigned char> got(n);
  CL_OK(clEnqueueReadBuffer(queue, m, CL_TRUE, 0, n, got.data(), 0, nullptr, nullptr));
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(static_cast<unsigned char>(3 * i + 1), got[i]) << i;
  // A partial mapping returns host_ptr + offset.
  p = static_cast<unsigned char *>(
      clEnqueueMapBuffer(queue, m, CL_TRUE, CL_MAP_READ, 128, 64, 0, nullptr, nullptr, &err));
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(host.data() + 128, p);
  EXPECT_EQ(static_cast<unsigned char>(3 * 128 + 1), p[0]);
  CL_OK(clEnqueueUnmapMemObject(queue, m, p, 0, nullptr, nullptr));
  CL_OK(clFinish(queue));
  clReleaseMemObject(m);
}

TEST_F(TransferTest, Migrate) {
  cl_mem a = make_buffer(64), b = make_buffer(64);
  cl_mem both[] = {a, b};
  cl_event ev;
  CL_OK(clEnqueueMigrateMemObjects(queue, 2, both, 0, 0, nullptr, &ev));
  CL_OK(clWaitForEvents(1, &ev));
  EXPECT_EQ(static_cast<cl_command_type>(CL_COMMAND_MIGRATE_MEM_OBJECTS),
            event_info<cl_command_type>(ev, CL_EVENT_COMMAND_TYPE));
  clReleaseEvent(ev);
  CL_OK(clEnqueueMigrateMemObjects(queue, 1, &a, CL_MIGRATE_MEM_OBJECT_HOST, 0, nullptr, nullptr));
  CL_OK(clEnqueueMigrateMemObjects(queue, 1, &a, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0,
                                   nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueMigrateMemObjects(queue, 0, both, 0, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE,
            clEnqueueMigrateMemObjects(queue, 1, nullptr, 0, 0, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clEnqueueMigrateMemObjects(queue, 1, &a, 0x100, 0, nullptr, nullptr));
  cl_mem bad[] = {a, wrong<cl_mem>(queue)};
  EXPECT_EQ(CL_INVALID_MEM_OBJECT,
            clEnqueueMigrateMemObjects(queue, 2, bad, 0, 0, nullptr, nullptr));
  // Migration keeps the content.
  int v = 99, r = 0;
  CL_OK(clEnqueueWriteBuffer(queue, a, CL_FALSE, 0, sizeof(v), &v, 0, nullptr, nullptr));
  CL_OK(clEnqueueMigrateMemObjects(queue, 1, &a, CL_MIGRATE_MEM_OBJECT_HOST, 0, nullptr, nullptr));
  CL_OK(clEnqueueReadBuffer(queue, a, CL_TRUE, 0, sizeof(r), &r, 0, nullptr, nullptr));
  EXPECT_EQ(99, r);
  clReleaseMemObject(a);
  clReleaseMemObject(b);
}

} // namespace
