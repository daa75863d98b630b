// Shared helpers of the runtime suite. Everything goes through the ICD loader: the tests
// see ManyCL exactly as an application does.
#pragma once

#include <CL/cl.h>
#include <CL/cl_ext.h>
#include <CL/cl_ext_manycl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace rt_test {

#define CL_OK(expr) ASSERT_EQ(CL_SUCCESS, (expr))
#define CL_EXPECT_OK(expr) EXPECT_EQ(CL_SUCCESS, (expr))

// The platform named "ManyCL" (or MANYCL_TEST_PLATFORM, to check a reading of the
// specification against another implementation such as PoCL), or nullptr.
inline cl_platform_id manycl_platform() {
  const char *override_name = std::getenv("MANYCL_TEST_PLATFORM");
  const std::string wanted = override_name && *override_name ? override_name : "ManyCL";
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0)
    return nullptr;
  std::vector<cl_platform_id> ids(n);
  clGetPlatformIDs(n, ids.data(), nullptr);
  for (cl_platform_id p : ids) {
    char name[128] = {};
    if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof(name), name, nullptr) == CL_SUCCESS &&
        std::string(name) == wanted)
      return p;
  }
  return nullptr;
}

inline std::vector<cl_device_id> manycl_devices(cl_platform_id platform) {
  cl_uint n = 0;
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
  std::vector<cl_device_id> devices(n);
  if (n)
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr);
  return devices;
}

inline std::string platform_string(cl_platform_id p, cl_platform_info param) {
  size_t size = 0;
  if (clGetPlatformInfo(p, param, 0, nullptr, &size) != CL_SUCCESS)
    return "<error>";
  std::string s(size, '\0');
  clGetPlatformInfo(p, param, size, s.data(), nullptr);
  if (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

inline std::string device_string(cl_device_id d, cl_device_info param) {
  size_t size = 0;
  if (clGetDeviceInfo(d, param, 0, nullptr, &size) != CL_SUCCESS)
    return "<error>";
  std::string s(size, '\0');
  clGetDeviceInfo(d, param, size, s.data(), nullptr);
  if (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

template <class T> T device_info(cl_device_id d, cl_device_info param) {
  T value{};
  EXPECT_EQ(CL_SUCCESS, clGetDeviceInfo(d, param, sizeof(T), &value, nullptr)) << "param 0x" << std::hex << param;
  return value;
}

template <class T> std::vector<T> device_array(cl_device_id d, cl_device_info param) {
  size_t size = 0;
  EXPECT_EQ(CL_SUCCESS, clGetDeviceInfo(d, param, 0, nullptr, &size));
  std::vector<T> v(size / sizeof(T));
  if (size)
    EXPECT_EQ(CL_SUCCESS, clGetDeviceInfo(d, param, size, v.data(), nullptr));
  return v;
}

template <class T> T event_info(cl_event e, cl_event_info param) {
  T value{};
  EXPECT_EQ(CL_SUCCESS, clGetEventInfo(e, param, sizeof(T), &value, nullptr));
  return value;
}

inline cl_int event_status(cl_event e) { return event_info<cl_int>(e, CL_EVENT_COMMAND_EXECUTION_STATUS); }

template <class T> T mem_info(cl_mem m, cl_mem_info param) {
  T value{};
  EXPECT_EQ(CL_SUCCESS, clGetMemObjectInfo(m, param, sizeof(T), &value, nullptr));
  return value;
}

inline cl_uint ref_count_mem(cl_mem m) { return mem_info<cl_uint>(m, CL_MEM_REFERENCE_COUNT); }

// The device configuration the vendor extension reports (JSON text).
inline std::string device_config_json(cl_platform_id platform, cl_device_id device) {
  auto fn = reinterpret_cast<clGetDeviceConfigMCL_fn>(
      clGetExtensionFunctionAddressForPlatform(platform, "clGetDeviceConfigMCL"));
  if (!fn)
    return "";
  size_t size = 0;
  if (fn(device, 0, nullptr, &size) != CL_SUCCESS)
    return "";
  std::string s(size, '\0');
  fn(device, size, s.data(), nullptr);
  if (!s.empty() && s.back() == '\0')
    s.pop_back();
  return s;
}

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Polls `pred` for up to `ms` milliseconds.
template <class Pred> bool eventually(Pred pred, int ms = 5000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (pred())
      return true;
    sleep_ms(1);
  }
  return pred();
}

// Platform, first device, a context and an in-order queue on it.
class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    platform = manycl_platform();
    ASSERT_NE(nullptr, platform) << "platform ManyCL not found (OCL_ICD_VENDORS?)";
    auto devices = manycl_devices(platform);
    ASSERT_FALSE(devices.empty());
    device = devices[0];
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform), 0};
    context = clCreateContext(props, 1, &device, nullptr, nullptr, &err);
    ASSERT_EQ(CL_SUCCESS, err);
    queue = clCreateCommandQueue(context, device, 0, &err);
    ASSERT_EQ(CL_SUCCESS, err);
  }
  void TearDown() override {
    if (queue) {
      EXPECT_EQ(CL_SUCCESS, clFinish(queue));
      EXPECT_EQ(CL_SUCCESS, clReleaseCommandQueue(queue));
    }
    if (context)
      EXPECT_EQ(CL_SUCCESS, clReleaseContext(context));
  }

  cl_mem make_buffer(size_t size, cl_mem_flags flags = CL_MEM_READ_WRITE, void *host = nullptr) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context, flags, size, host, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    return m;
  }
  cl_command_queue make_queue(cl_command_queue_properties props, cl_device_id dev = nullptr) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(context, dev ? dev : device, props, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    return q;
  }
  cl_event user_event() {
    cl_int err = CL_SUCCESS;
    cl_event e = clCreateUserEvent(context, &err);
    EXPECT_EQ(CL_SUCCESS, err);
    return e;
  }

  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
};

// A handle of another type, for the wrong-type checks.
template <class To, class From> To wrong(From handle) { return reinterpret_cast<To>(handle); }

} // namespace rt_test
