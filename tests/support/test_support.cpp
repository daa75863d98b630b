// The support library on its own: Result, the environment helpers, MANYCL_LOG parsing and
// the error-name table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <CL/cl.h>

#include "manycl/env.h"
#include "manycl/log.h"
#include "manycl/result.h"

namespace {

using namespace manycl;

Result<int> half(int n) {
  if (n % 2)
    return make_error("odd: " + std::to_string(n), CL_INVALID_VALUE);
  return n / 2;
}

TEST(Result, CarriesAValueOrACodeAndAMessage) {
  auto ok = half(8);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 4);
  auto bad = half(3);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, CL_INVALID_VALUE);
  EXPECT_EQ(bad.error().message, "odd: 3");
  Result<void> done;
  EXPECT_TRUE(done.ok());
  Result<void> failed = make_error("no code");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, -1);
}

TEST(Env, FlagsNumbersAndStrings) {
  ::setenv("MANYCL_TEST_ENV", "", 1);
  EXPECT_EQ(env::get("MANYCL_TEST_ENV"), nullptr);
  EXPECT_FALSE(env::flag("MANYCL_TEST_ENV"));
  EXPECT_EQ(env::number("MANYCL_TEST_ENV", 7), 7);
  ::setenv("MANYCL_TEST_ENV", "0", 1);
  EXPECT_FALSE(env::flag("MANYCL_TEST_ENV"));
  EXPECT_EQ(env::number("MANYCL_TEST_ENV", 7), 0);
  ::setenv("MANYCL_TEST_ENV", "12", 1);
  EXPECT_TRUE(env::flag("MANYCL_TEST_ENV"));
  EXPECT_EQ(env::number("MANYCL_TEST_ENV", 7), 12);
  EXPECT_STREQ(env::get("MANYCL_TEST_ENV"), "12");
  ::setenv("MANYCL_TEST_ENV", "12x", 1);
  EXPECT_EQ(env::number("MANYCL_TEST_ENV", 7), 7);
  ::unsetenv("MANYCL_TEST_ENV");
  EXPECT_EQ(env::get("MANYCL_TEST_ENV"), nullptr);
  EXPECT_EQ(env::number("MANYCL_TEST_ENV", -3), -3);
}

TEST(Log, ParsesChannelLists) {
  std::string unknown;
  EXPECT_EQ(log::parse_channels("api", &unknown), log::kApi);
  EXPECT_EQ(log::parse_channels("device", &unknown), log::kDevice);
  EXPECT_EQ(log::parse_channels("all", &unknown), log::kAll);
  EXPECT_EQ(log::parse_channels("api, device", &unknown), log::kAll);
  EXPECT_EQ(log::parse_channels("none", &unknown), 0u);
  EXPECT_EQ(log::parse_channels("0", &unknown), 0u);
  EXPECT_TRUE(unknown.empty());
  EXPECT_EQ(log::parse_channels("api,verbose", &unknown), log::kApi);
  EXPECT_EQ(unknown, "verbose");
}

TEST(Log, NamesEveryOpenCLError) {
  EXPECT_STREQ(log::error_name(CL_SUCCESS), "CL_SUCCESS");
  EXPECT_STREQ(log::error_name(CL_INVALID_BUFFER_SIZE), "CL_INVALID_BUFFER_SIZE");
  EXPECT_STREQ(log::error_name(CL_OUT_OF_HOST_MEMORY), "CL_OUT_OF_HOST_MEMORY");
  EXPECT_STREQ(log::error_name(CL_MAX_SIZE_RESTRICTION_EXCEEDED), "CL_MAX_SIZE_RESTRICTION_EXCEEDED");
  EXPECT_STREQ(log::error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  // Every code between the first and the last named one has a name, but the gap -20..-29.
  for (int code = CL_SUCCESS; code >= CL_MAX_SIZE_RESTRICTION_EXCEEDED; --code) {
    if (code > -20 || code < -29) {
      EXPECT_NE(log::error_name(code), nullptr) << code;
    }
  }
  EXPECT_EQ(log::error_name(-25), nullptr);
  EXPECT_EQ(log::describe_error(-25), "error -25");
}

TEST(Log, ApiErrorLineCarriesTheDetailOnce) {
  log::set_channels(log::kApi);
  testing::internal::CaptureStderr();
  log::set_api_detail("size is 0");
  log::set_api_detail("an outer reason"); // the first reason of a call wins
  log::api_error("clCreateBuffer", CL_INVALID_BUFFER_SIZE);
  log::api_error("clReleaseMemObject", CL_INVALID_MEM_OBJECT); // no stale detail
  std::string err = testing::internal::GetCapturedStderr();
  log::set_channels(0);
  EXPECT_EQ(err, "ManyCL: clCreateBuffer: CL_INVALID_BUFFER_SIZE: size is 0\n"
                 "ManyCL: clReleaseMemObject: CL_INVALID_MEM_OBJECT\n");
}

} // namespace
