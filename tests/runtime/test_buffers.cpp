// Buffers: every flag combination, invalid combinations, host access rules, sub-buffers,
// reference counts and destructor callbacks.
#include "rt_common.h"

#include <mutex>
#include <numeric>

using namespace rt_test;

namespace {

using BufferTest = RuntimeTest;

std::vector<unsigned char> pattern(size_t n, unsigned seed = 1) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<unsigned char>((i * 131 + seed * 17 + (i >> 8)) & 0xff);
  return v;
}

// Reads a buffer's content whatever its host access flags: through a device-side copy.
std::vector<unsigned char> contents(cl_context context, cl_command_queue q, cl_mem m, size_t size) {
  cl_int err;
  cl_mem tmp = clCreateBuffer(context, CL_MEM_READ_WRITE, size, nullptr, &err);
  EXPECT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(CL_SUCCESS, clEnqueueCopyBuffer(q, m, tmp, 0, 0, size, 0, nullptr, nullptr));
  std::vector<unsigned char> out(size);
  EXPECT_EQ(CL_SUCCESS, clEnqueueReadBuffer(q, tmp, CL_TRUE, 0, size, out.data(), 0, nullptr, nullptr));
  clReleaseMemObject(tmp);
  return out;
}

TEST_F(BufferTest, EveryValidFlagCombination) {
  const cl_mem_flags access[] = {0, CL_MEM_READ_WRITE, CL_MEM_WRITE_ONLY, CL_MEM_READ_ONLY};
  const cl_mem_flags host_access[] = {0, CL_MEM_HOST_WRITE_ONLY, CL_MEM_HOST_READ_ONLY, CL_MEM_HOST_NO_ACCESS};
  const cl_mem_flags host_ptr[] = {0, CL_MEM_USE_HOST_PTR, CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR,
                                   CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR};
  const size_t size = 4096 + 3;
  int combos = 0;
  for (cl_mem_flags a : access)
    for (cl_mem_flags h : host_access)
      for (cl_mem_flags p : host_ptr) {
        cl_mem_flags flags = a | h | p;
        SCOPED_TRACE(testing::Message() << "flags 0x" << std::hex << flags);
        auto data = pattern(size, static_cast<unsigned>(flags));
        bool with_ptr = p & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
        cl_int err;
        cl_mem m = clCreateBuffer(context, flags, size, with_ptr ? data.data() : nullptr, &err);
        ASSERT_EQ(CL_SUCCESS, err);
        ++combos;
        cl_mem_flags reported = mem_info<cl_mem_flags>(m, CL_MEM_FLAGS);
        EXPECT_EQ(flags, reported & flags) << "reported 0x" << std::hex << reported;
        EXPECT_EQ(size, mem_info<size_t>(m, CL_MEM_SIZE));
        EXPECT_EQ(static_cast<cl_mem_object_type>(CL_MEM_OBJECT_BUFFER), mem_info<cl_mem_object_type>(m, CL_MEM_TYPE));
        EXPECT_EQ(context, mem_info<cl_context>(m, CL_MEM_CONTEXT));
        EXPECT_EQ(0u, mem_info<cl_uint>(m, CL_MEM_MAP_COUNT));
        EXPECT_EQ(1u, ref_count_mem(m));
        EXPECT_EQ(nullptr, mem_info<cl_mem>(m, CL_MEM_ASSOCIATED_MEMOBJECT));
        EXPECT_EQ(0u, mem_info<size_t>(m, CL_MEM_OFFSET));
        void *hp = mem_info<void *>(m, CL_MEM_HOST_PTR);
        if (p & CL_MEM_USE_HOST_PTR)
          EXPECT_EQ(static_cast<void *>(data.data()), hp);
        else
          EXPECT_EQ(nullptr, hp);
        if (with_ptr)
          EXPECT_EQ(data, contents(context, queue, m, size));
        // Host access flags are enforced by the host-side commands.
        std::vector<unsigned char> tmp(16);
        cl_int rd = clEnqueueReadBuffer(queue, m, CL_TRUE, 0, 16, tmp.data(), 0, nullptr, nullptr);
        cl_int wr = clEnqueueWriteBuffer(queue, m, CL_TRUE, 0, 16, tmp.data(), 0, nullptr, nullptr);
        bool can_read = !(h & (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS));
        bool can_write = !(h & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS));
        EXPECT_EQ(can_read ? CL_SUCCESS : CL_INVALID_OPERATION, rd);
        EXPECT_EQ(can_write ? CL_SUCCESS : CL_INVALID_OPERATION, wr);
        CL_OK(clFinish(queue));
        CL_OK(clReleaseMemObject(m));
      }
  EXPECT_EQ(4 * 4 * 5, combos);
}

TEST_F(BufferTest, InvalidFlagCombinations) {
  char host[64];
  struct Case {
    cl_mem_flags flags;
    void *ptr;
    cl_int error;
  } cases[] = {
      {CL_MEM_READ_WRITE | CL_MEM_READ_ONLY, nullptr, CL_INVALID_VALUE},
      {CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY, nullptr, CL_INVALID_VALUE},
      {CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, nullptr, CL_INVALID_VALUE},
      {CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR, host, CL_INVALID_VALUE},
      {CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR, host, CL_INVALID_VALUE},
      {CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY, nullptr, CL_INVALID_VALUE},
      {CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS, nullptr, CL_INVALID_VALUE},
      {CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS, nullptr, CL_INVALID_VALUE},
      {cl_mem_flags(1) << 40, nullptr, CL_INVALID_VALUE},
      {CL_MEM_USE_HOST_PTR, nullptr, CL_INVALID_HOST_PTR},
      {CL_MEM_COPY_HOST_PTR, nullptr, CL_INVALID_HOST_PTR},
      {CL_MEM_READ_WRITE, host, CL_INVALID_HOST_PTR},
      {CL_MEM_ALLOC_HOST_PTR, host, CL_INVALID_HOST_PTR},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(testing::Message() << "flags 0x" << std::hex << c.flags);
    cl_int err = CL_SUCCESS;
    EXPECT_EQ(nullptr, clCreateBuffer(context, c.flags, sizeof(host), c.ptr, &err));
    EXPECT_EQ(c.error, err);
  }
  cl_int err;
  EXPECT_EQ(nullptr, clCreateBuffer(context, CL_MEM_READ_WRITE, 0, nullptr, &err));
  EXPECT_EQ(CL_INVALID_BUFFER_SIZE, err);
  cl_ulong max_alloc = device_info<cl_ulong>(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  EXPECT_EQ(nullptr, clCreateBuffer(context, CL_MEM_READ_WRITE, max_alloc + 1, nullptr, &err));
  EXPECT_EQ(CL_INVALID_BUFFER_SIZE, err);
  EXPECT_EQ(nullptr, clCreateBuffer(wrong<cl_context>(queue), CL_MEM_READ_WRITE, 16, nullptr, &err));
  EXPECT_EQ(CL_INVALID_CONTEXT, err);
  // errcode_ret may be NULL.
  EXPECT_EQ(nullptr, clCreateBuffer(context, CL_MEM_READ_WRITE, 0, nullptr, nullptr));
}

TEST_F(BufferTest, MemInfoErrors) {
  cl_mem m = make_buffer(64);
  size_t size;
  EXPECT_EQ(CL_INVALID_VALUE, clGetMemObjectInfo(m, CL_MEM_SIZE, 1, &size, nullptr));
  EXPECT_EQ(CL_INVALID_VALUE, clGetMemObjectInfo(m, 0x7fff, sizeof(size), &size, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clGetMemObjectInfo(wrong<cl_mem>(queue), CL_MEM_SIZE, sizeof(size), &size, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clRetainMemObject(wrong<cl_mem>(queue)));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clReleaseMemObject(wrong<cl_mem>(queue)));
  CL_OK(clRetainMemObject(m));
  EXPECT_EQ(2u, ref_count_mem(m));
  CL_OK(clReleaseMemObject(m));
  EXPECT_EQ(1u, ref_count_mem(m));
  CL_OK(clReleaseMemObject(m));
}

TEST_F(BufferTest, SubBuffers) {
  const cl_uint align = device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  ASSERT_GT(align, 1u);
  const size_t size = 8 * align;
  auto data = pattern(size);
  cl_mem parent = make_buffer(size, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, data.data());
  cl_int err;
  cl_buffer_region region{2 * align, 3 * align};
  cl_mem sub = clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(parent, mem_info<cl_mem>(sub, CL_MEM_ASSOCIATED_MEMOBJECT));
  EXPECT_EQ(region.origin, mem_info<size_t>(sub, CL_MEM_OFFSET));
  EXPECT_EQ(region.size, mem_info<size_t>(sub, CL_MEM_SIZE));
  EXPECT_TRUE(mem_info<cl_mem_flags>(sub, CL_MEM_FLAGS) & CL_MEM_READ_WRITE); // inherited
  std::vector<unsigned char> got(region.size);
  CL_OK(clEnqueueReadBuffer(queue, sub, CL_TRUE, 0, region.size, got.data(), 0, nullptr, nullptr));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + region.origin));
  // Writes through the sub-buffer land in the parent.
  std::vector<unsigned char> ones(align, 0x11);
  CL_OK(clEnqueueWriteBuffer(queue, sub, CL_TRUE, align, align, ones.data(), 0, nullptr, nullptr));
  std::vector<unsigned char> whole(size);
  CL_OK(clEnqueueReadBuffer(queue, parent, CL_TRUE, 0, size, whole.data(), 0, nullptr, nullptr));
  std::copy(ones.begin(), ones.end(), data.begin() + region.origin + align);
  EXPECT_EQ(data, whole);

  // Errors.
  cl_buffer_region misaligned{align / 2, align};
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &misaligned, &err));
  EXPECT_EQ(CL_MISALIGNED_SUB_BUFFER_OFFSET, err);
  cl_buffer_region outside{6 * align, 3 * align};
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &outside, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  cl_buffer_region past_end{size, 1};
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &past_end, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  cl_buffer_region empty{0, 0};
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &empty, &err));
  EXPECT_EQ(CL_INVALID_BUFFER_SIZE, err);
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, nullptr, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, 0, 0x7fff, &region, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, CL_MEM_USE_HOST_PTR, CL_BUFFER_CREATE_TYPE_REGION, &region, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  EXPECT_EQ(nullptr, clCreateSubBuffer(parent, CL_MEM_READ_WRITE | CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &region, &err));
  EXPECT_EQ(CL_INVALID_VALUE, err);
  cl_buffer_region in_sub{0, align};
  EXPECT_EQ(nullptr, clCreateSubBuffer(sub, 0, CL_BUFFER_CREATE_TYPE_REGION, &in_sub, &err));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, err);
  EXPECT_EQ(nullptr, clCreateSubBuffer(wrong<cl_mem>(queue), 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, err);

  // Access flags may narrow the parent's, never widen them (CL_MEM_HOST_NO_ACCESS narrows any
  // host access: test_conformance_regressions.cpp).
  cl_mem ro = make_buffer(size, CL_MEM_READ_ONLY | CL_MEM_HOST_WRITE_ONLY);
  cl_buffer_region r0{0, align};
  for (cl_mem_flags f : {cl_mem_flags(CL_MEM_READ_WRITE), cl_mem_flags(CL_MEM_WRITE_ONLY),
                         cl_mem_flags(CL_MEM_HOST_READ_ONLY)}) {
    EXPECT_EQ(nullptr, clCreateSubBuffer(ro, f, CL_BUFFER_CREATE_TYPE_REGION, &r0, &err)) << f;
    EXPECT_EQ(CL_INVALID_VALUE, err) << f;
  }
  cl_mem ro_sub = clCreateSubBuffer(ro, CL_MEM_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r0, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  cl_mem_flags inherited = mem_info<cl_mem_flags>(ro_sub, CL_MEM_FLAGS);
  EXPECT_TRUE(inherited & CL_MEM_HOST_WRITE_ONLY);
  char byte;
  EXPECT_EQ(CL_INVALID_OPERATION, clEnqueueReadBuffer(queue, ro_sub, CL_TRUE, 0, 1, &byte, 0, nullptr, nullptr));
  cl_mem rw = make_buffer(size);
  cl_mem narrowed = clCreateSubBuffer(rw, CL_MEM_READ_ONLY | CL_MEM_HOST_READ_ONLY, CL_BUFFER_CREATE_TYPE_REGION, &r0, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(CL_INVALID_OPERATION, clEnqueueWriteBuffer(queue, narrowed, CL_TRUE, 0, 1, &byte, 0, nullptr, nullptr));

  for (cl_mem m : {narrowed, rw, ro_sub, ro, sub, parent})
    CL_OK(clReleaseMemObject(m));
}

TEST_F(BufferTest, SubBufferOfUseHostPtr) {
  const cl_uint align = device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  std::vector<unsigned char> host = pattern(4 * align);
  cl_mem parent = make_buffer(host.size(), CL_MEM_USE_HOST_PTR, host.data());
  cl_buffer_region r{align, align};
  cl_int err;
  cl_mem sub = clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  EXPECT_EQ(static_cast<void *>(host.data() + align), mem_info<void *>(sub, CL_MEM_HOST_PTR));
  EXPECT_TRUE(mem_info<cl_mem_flags>(sub, CL_MEM_FLAGS) & CL_MEM_USE_HOST_PTR);
  clReleaseMemObject(sub);
  clReleaseMemObject(parent);
}

// Destructor callbacks.
struct DtorLog {
  std::mutex mutex;
  std::vector<int> calls;
};
struct DtorTag {
  DtorLog *log;
  int id;
};
void CL_CALLBACK on_mem_destroyed(cl_mem, void *data) {
  auto *t = static_cast<DtorTag *>(data);
  std::lock_guard lock(t->log->mutex);
  t->log->calls.push_back(t->id);
}
size_t log_size(DtorLog &log) {
  std::lock_guard lock(log.mutex);
  return log.calls.size();
}

TEST_F(BufferTest, DestructorCallbacksRunInReverseOrder) {
  DtorLog log;
  DtorTag a{&log, 1}, b{&log, 2}, c{&log, 3};
  cl_mem m = make_buffer(64);
  CL_OK(clSetMemObjectDestructorCallback(m, on_mem_destroyed, &a));
  CL_OK(clSetMemObjectDestructorCallback(m, on_mem_destroyed, &b));
  CL_OK(clSetMemObjectDestructorCallback(m, on_mem_destroyed, &c));
  EXPECT_EQ(CL_INVALID_VALUE, clSetMemObjectDestructorCallback(m, nullptr, nullptr));
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clSetMemObjectDestructorCallback(wrong<cl_mem>(queue), on_mem_destroyed, &a));
  CL_OK(clRetainMemObject(m));
  CL_OK(clReleaseMemObject(m));
  EXPECT_EQ(0u, log_size(log));
  CL_OK(clReleaseMemObject(m));
  std::vector<int> want = {3, 2, 1};
  EXPECT_EQ(want, log.calls);
}

TEST_F(BufferTest, DestructorCallbackWaitsForPendingCommands) {
  DtorLog log;
  DtorTag tag{&log, 7};
  cl_mem m = make_buffer(64);
  CL_OK(clSetMemObjectDestructorCallback(m, on_mem_destroyed, &tag));
  cl_event gate = user_event();
  int pattern4 = 0x01020304;
  cl_event fill;
  CL_OK(clEnqueueFillBuffer(queue, m, &pattern4, sizeof(pattern4), 0, 64, 1, &gate, &fill));
  CL_OK(clReleaseMemObject(m));
  sleep_ms(10);
  EXPECT_EQ(0u, log_size(log)) << "memory still used by a pending command";
  CL_OK(clSetUserEventStatus(gate, CL_COMPLETE));
  CL_OK(clWaitForEvents(1, &fill));
  CL_OK(clFinish(queue));
  EXPECT_TRUE(eventually([&] { return log_size(log) == 1; }));
  clReleaseEvent(fill);
  clReleaseEvent(gate);
}

TEST_F(BufferTest, SubBufferKeepsParentAlive) {
  const cl_uint align = device_info<cl_uint>(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
  DtorLog log;
  DtorTag parent_tag{&log, 1}, sub_tag{&log, 2};
  std::vector<unsigned char> data = pattern(2 * align);
  cl_mem parent = make_buffer(data.size(), CL_MEM_COPY_HOST_PTR, data.data());
  cl_buffer_region r{align, align};
  cl_int err;
  cl_mem sub = clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
  ASSERT_EQ(CL_SUCCESS, err);
  CL_OK(clSetMemObjectDestructorCallback(parent, on_mem_destroyed, &parent_tag));
  CL_OK(clSetMemObjectDestructorCallback(sub, on_mem_destroyed, &sub_tag));
  CL_OK(clReleaseMemObject(parent));
  EXPECT_EQ(0u, log_size(log));
  // The application's handle to the parent is gone even though the object lives on.
  EXPECT_EQ(CL_INVALID_MEM_OBJECT, clReleaseMemObject(parent));
  std::vector<unsigned char> got(align);
  CL_OK(clEnqueueReadBuffer(queue, sub, CL_TRUE, 0, align, got.data(), 0, nullptr, nullptr));
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin() + align));
  CL_OK(clReleaseMemObject(sub));
  std::vector<int> want = {2, 1};
  EXPECT_EQ(want, log.calls);
}

} // namespace
