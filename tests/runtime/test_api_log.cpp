// MANYCL_LOG=api: every failed OpenCL call logs one "ManyCL: <function>: <error>[: <why>]"
// line on stderr. The switch is read once per process, so each case runs api_log_probe.cpp
// in a child process through the ICD loader, as an application would.
#include <gtest/gtest.h>

#include <string>

#include "child_process.h"

namespace {

using rt_test::ChildRun;

ChildRun run_probe(const std::string &env) {
  return rt_test::run_child("env -u MANYCL_LOG -u MANYCL_DEVICE_LOG " + env + " " + API_LOG_PROBE);
}

// The logged line for `function`, or "" (the first one when it failed more than once).
std::string line_for(const ChildRun &r, const std::string &function, size_t nth = 0) {
  for (const auto &line : r.manycl_err)
    if (line.rfind("ManyCL: " + function + ": ", 0) == 0 && nth-- == 0)
      return line;
  return "";
}

TEST(ApiLog, QuietWithoutTheSwitch) {
  ChildRun r = run_probe("");
  EXPECT_NE(r.out.find("clCreateBuffer=-61\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.manycl_err.empty()) << r.err;
}

TEST(ApiLog, EveryFailedCallLogsFunctionErrorAndReason) {
  ChildRun r = run_probe("MANYCL_LOG=api");
  // The calls fail exactly as without the log.
  EXPECT_NE(r.out.find("clCreateBuffer=-61\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clCreateBuffer(ok)=0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clCreateSubBuffer=-13\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clBuildProgram=0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("clCreateKernel=-46\n"), std::string::npos) << r.out;

  EXPECT_EQ(line_for(r, "clCreateBuffer").rfind(
                "ManyCL: clCreateBuffer: CL_INVALID_BUFFER_SIZE: size is 0 or larger than "
                "CL_DEVICE_MAX_MEM_ALLOC_SIZE (size 0, maximum ",
                0),
            0u)
      << r.err;
  // errcode_ret was NULL: the failure is logged all the same.
  EXPECT_EQ(line_for(r, "clCreateBuffer", 1),
            "ManyCL: clCreateBuffer: CL_INVALID_VALUE: more than one of CL_MEM_READ_WRITE, "
            "CL_MEM_WRITE_ONLY, CL_MEM_READ_ONLY")
      << r.err;
  EXPECT_EQ(line_for(r, "clCreateSubBuffer"),
            "ManyCL: clCreateSubBuffer: CL_MISALIGNED_SUB_BUFFER_OFFSET: origin 3 is not a multiple of "
            "128 bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN)")
      << r.err;
  EXPECT_EQ(line_for(r, "clGetContextInfo"), "ManyCL: clGetContextInfo: CL_INVALID_VALUE") << r.err;
  EXPECT_EQ(line_for(r, "clEnqueueUnmapMemObject"),
            "ManyCL: clEnqueueUnmapMemObject: CL_INVALID_VALUE: pointer is not mapped from this memory object")
      << r.err;
  EXPECT_EQ(line_for(r, "clCreateKernel"),
            "ManyCL: clCreateKernel: CL_INVALID_KERNEL_NAME: no kernel named no_such_kernel")
      << r.err;
  EXPECT_NE(r.out.find("clBuildProgram(broken)=-11\n"), std::string::npos) << r.out;
  const std::string build = line_for(r, "clBuildProgram");
  EXPECT_EQ(build.rfind("ManyCL: clBuildProgram: CL_BUILD_PROGRAM_FAILURE: see CL_PROGRAM_BUILD_LOG of ", 0), 0u)
      << r.err;
  EXPECT_NE(build.find("undeclared_name"), std::string::npos) << build;
  EXPECT_EQ(line_for(r, "clCreateFromGLBuffer"),
            "ManyCL: clCreateFromGLBuffer: CL_INVALID_CONTEXT: not supported by ManyCL")
      << r.err;
  // Successful calls say nothing: one line per failed call above, no more.
  EXPECT_EQ(r.manycl_err.size(), 8u) << r.err;
}

TEST(ApiLog, AllAndListsIncludeApi) {
  for (const char *spec : {"MANYCL_LOG=all", "MANYCL_LOG=device,api"}) {
    ChildRun r = run_probe(spec);
    EXPECT_EQ(line_for(r, "clGetContextInfo"), "ManyCL: clGetContextInfo: CL_INVALID_VALUE")
        << spec << "\n"
        << r.err;
  }
}

TEST(ApiLog, UnknownChannelIsNamedOnce) {
  ChildRun r = run_probe("MANYCL_LOG=apii");
  ASSERT_EQ(r.manycl_err.size(), 1u) << r.err;
  EXPECT_EQ(r.manycl_err[0], "ManyCL: MANYCL_LOG: unknown channel 'apii' (known: api, device, all, none)");
}

} // namespace
