// api::Guarded, the wrapper at the C ABI, on stand-in entry points of each shape: no exception
// gets out, std::bad_alloc is CL_OUT_OF_HOST_MEMORY and any other CL_OUT_OF_RESOURCES, and
// under MANYCL_LOG=api a failed call logs its name, error and reason.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "manycl/runtime/api_guard.h"

namespace {

using manycl::api::guarded;
namespace log = manycl::log;

int g_throw = 0; // 0: do not throw, 1: std::bad_alloc, 2: std::runtime_error, 3: an int

void maybe_throw() {
  if (g_throw == 1)
    throw std::bad_alloc();
  if (g_throw == 2)
    throw std::runtime_error("broken invariant");
  if (g_throw == 3)
    throw 42;
}

cl_int CL_API_CALL get_code(cl_int code) {
  maybe_throw();
  if (code != CL_SUCCESS)
    log::set_api_detail("asked to fail");
  return code;
}

struct _cl_thing {
  int value;
};
_cl_thing g_thing{1};

_cl_thing *CL_API_CALL make_thing(int fail, cl_int *errcode_ret) {
  maybe_throw();
  if (fail) {
    if (log::enabled(log::kApi))
      log::set_api_detail("no thing today");
    if (errcode_ret)
      *errcode_ret = CL_INVALID_VALUE;
    return nullptr;
  }
  // Like some entry points, does not write CL_SUCCESS: the guard must not read garbage.
  return &g_thing;
}

void *CL_API_CALL lookup(const char *name) {
  maybe_throw();
  return name ? &g_thing : nullptr;
}

class Guard : public ::testing::Test {
protected:
  void SetUp() override {
    g_throw = 0;
    log::set_channels(0);
  }
  void TearDown() override {
    g_throw = 0;
    log::set_channels(0);
  }
};

TEST_F(Guard, PassesResultsThrough) {
  EXPECT_EQ((guarded<"get_code", &get_code>(CL_SUCCESS)), CL_SUCCESS);
  EXPECT_EQ((guarded<"get_code", &get_code>(CL_INVALID_VALUE)), CL_INVALID_VALUE);
  cl_int err = 123;
  EXPECT_EQ((guarded<"make_thing", &make_thing>(1, &err)), nullptr);
  EXPECT_EQ(err, CL_INVALID_VALUE);
  EXPECT_EQ((guarded<"make_thing", &make_thing>(0, nullptr)), &g_thing);
  EXPECT_EQ((guarded<"lookup", &lookup>("x")), &g_thing);
}

TEST_F(Guard, MapsExceptionsToErrorCodes) {
  testing::internal::CaptureStderr();
  g_throw = 1;
  EXPECT_EQ((guarded<"get_code", &get_code>(CL_SUCCESS)), CL_OUT_OF_HOST_MEMORY);
  g_throw = 2;
  EXPECT_EQ((guarded<"get_code", &get_code>(CL_SUCCESS)), CL_OUT_OF_RESOURCES);
  g_throw = 3;
  EXPECT_EQ((guarded<"get_code", &get_code>(CL_SUCCESS)), CL_OUT_OF_RESOURCES);

  cl_int err = CL_SUCCESS;
  g_throw = 1;
  EXPECT_EQ((guarded<"make_thing", &make_thing>(0, &err)), nullptr);
  EXPECT_EQ(err, CL_OUT_OF_HOST_MEMORY);
  g_throw = 2;
  EXPECT_EQ((guarded<"make_thing", &make_thing>(0, &err)), nullptr);
  EXPECT_EQ(err, CL_OUT_OF_RESOURCES);
  EXPECT_EQ((guarded<"make_thing", &make_thing>(0, nullptr)), nullptr); // NULL errcode_ret
  EXPECT_EQ((guarded<"lookup", &lookup>("x")), nullptr);
  testing::internal::GetCapturedStderr();
}

TEST_F(Guard, LogsExceptionsUnderTheApiChannel) {
  log::set_channels(log::kApi);
  testing::internal::CaptureStderr();
  g_throw = 1;
  guarded<"get_code", &get_code>(CL_SUCCESS);
  g_throw = 2;
  cl_int err;
  guarded<"make_thing", &make_thing>(0, &err);
  std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("ManyCL: get_code: CL_OUT_OF_HOST_MEMORY: internal exception caught at the API "
                     "boundary: std::bad_alloc\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ManyCL: make_thing: CL_OUT_OF_RESOURCES: internal exception caught at the API "
                     "boundary: broken invariant\n"),
            std::string::npos)
      << out;
}

TEST_F(Guard, LogsFailedCallsOnlyWhenAsked) {
  testing::internal::CaptureStderr();
  guarded<"get_code", &get_code>(CL_INVALID_VALUE);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  log::clear_api_detail();

  log::set_channels(log::kApi);
  testing::internal::CaptureStderr();
  guarded<"get_code", &get_code>(CL_INVALID_VALUE);
  guarded<"get_code", &get_code>(CL_SUCCESS);
  guarded<"make_thing", &make_thing>(1, nullptr); // seen although the caller passed NULL
  cl_int garbage = 77;
  EXPECT_EQ((guarded<"make_thing", &make_thing>(0, &garbage)), &g_thing);
  EXPECT_EQ(garbage, CL_SUCCESS);
  guarded<"lookup", &lookup>(nullptr); // NULL is an answer there, not an error
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "ManyCL: get_code: CL_INVALID_VALUE: asked to fail\n"
            "ManyCL: make_thing: CL_INVALID_VALUE: no thing today\n");
}

} // namespace
