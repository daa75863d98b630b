#include "manycl/log.h"

#include <cstdio>
#include <exception>
#include <new>

#include <CL/cl.h>

#include "manycl/env.h"

namespace manycl::log {

namespace detail {

std::atomic<unsigned> g_channels{kUnread};

unsigned read_environment() {
  // Several threads may race here on first use; they all compute the same value.
  unsigned channels = 0;
  if (const char *spec = env::get("MANYCL_LOG")) {
    std::string unknown;
    channels = parse_channels(spec, &unknown);
    if (!unknown.empty())
      line("MANYCL_LOG: unknown channel '" + unknown + "' (known: api, device, all, none)");
  }
  if (env::flag("MANYCL_DEVICE_LOG"))
    channels |= kDevice;
  unsigned expected = kUnread;
  // set_channels() may have run meanwhile: it wins.
  if (!g_channels.compare_exchange_strong(expected, channels, std::memory_order_relaxed))
    return expected;
  return channels;
}

} // namespace detail

void set_channels(unsigned channels) {
  detail::g_channels.store(channels & kAll, std::memory_order_relaxed);
}

unsigned parse_channels(std::string_view spec, std::string *unknown) {
  unsigned channels = 0;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view word = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    while (!word.empty() && word.front() == ' ')
      word.remove_prefix(1);
    while (!word.empty() && word.back() == ' ')
      word.remove_suffix(1);
    if (word == "api")
      channels |= kApi;
    else if (word == "device")
      channels |= kDevice;
    else if (word == "all" || word == "1")
      channels |= kAll;
    else if (word == "none" || word == "0" || word.empty())
      continue;
    else if (unknown && unknown->empty())
      *unknown = std::string(word);
  }
  return channels;
}

const char *error_name(int code) {
  switch (code) {
#define NAME(c)                                                                                    \
  case c:                                                                                          \
    return #c;
    NAME(CL_SUCCESS)
    NAME(CL_DEVICE_NOT_FOUND)
    NAME(CL_DEVICE_NOT_AVAILABLE)
    NAME(CL_COMPILER_NOT_AVAILABLE)
    NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    NAME(CL_OUT_OF_RESOURCES)
    NAME(CL_OUT_OF_HOST_MEMORY)
    NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
    NAME(CL_MEM_COPY_OVERLAP)
    NAME(CL_IMAGE_FORMAT_MISMATCH)
    NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    NAME(CL_BUILD_PROGRAM_FAILURE)
    NAME(CL_MAP_FAILURE)
    NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    NAME(CL_COMPILE_PROGRAM_FAILURE)
    NAME(CL_LINKER_NOT_AVAILABLE)
    NAME(CL_LINK_PROGRAM_FAILURE)
    NAME(CL_DEVICE_PARTITION_FAILED)
    NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    NAME(CL_INVALID_VALUE)
    NAME(CL_INVALID_DEVICE_TYPE)
    NAME(CL_INVALID_PLATFORM)
    NAME(CL_INVALID_DEVICE)
    NAME(CL_INVALID_CONTEXT)
    NAME(CL_INVALID_QUEUE_PROPERTIES)
    NAME(CL_INVALID_COMMAND_QUEUE)
    NAME(CL_INVALID_HOST_PTR)
    NAME(CL_INVALID_MEM_OBJECT)
    NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    NAME(CL_INVALID_IMAGE_SIZE)
    NAME(CL_INVALID_SAMPLER)
    NAME(CL_INVALID_BINARY)
    NAME(CL_INVALID_BUILD_OPTIONS)
    NAME(CL_INVALID_PROGRAM)
    NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    NAME(CL_INVALID_KERNEL_NAME)
    NAME(CL_INVALID_KERNEL_DEFINITION)
    NAME(CL_INVALID_KERNEL)
    NAME(CL_INVALID_ARG_INDEX)
    NAME(CL_INVALID_ARG_VALUE)
    NAME(CL_INVALID_ARG_SIZE)
    NAME(CL_INVALID_KERNEL_ARGS)
    NAME(CL_INVALID_WORK_DIMENSION)
    NAME(CL_INVALID_WORK_GROUP_SIZE)
    NAME(CL_INVALID_WORK_ITEM_SIZE)
    NAME(CL_INVALID_GLOBAL_OFFSET)
    NAME(CL_INVALID_EVENT_WAIT_LIST)
    NAME(CL_INVALID_EVENT)
    NAME(CL_INVALID_OPERATION)
    NAME(CL_INVALID_GL_OBJECT)
    NAME(CL_INVALID_BUFFER_SIZE)
    NAME(CL_INVALID_MIP_LEVEL)
    NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    NAME(CL_INVALID_PROPERTY)
    NAME(CL_INVALID_IMAGE_DESCRIPTOR)
    NAME(CL_INVALID_COMPILER_OPTIONS)
    NAME(CL_INVALID_LINKER_OPTIONS)
    NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
    NAME(CL_INVALID_PIPE_SIZE)
    NAME(CL_INVALID_DEVICE_QUEUE)
    NAME(CL_INVALID_SPEC_ID)
    NAME(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
#undef NAME
  case -1001: // cl_khr_icd
    return "CL_PLATFORM_NOT_FOUND_KHR";
  default:
    return nullptr;
  }
}

std::string describe_error(int code) {
  if (const char *name = error_name(code))
    return name;
  return "error " + std::to_string(code);
}

void line(std::string_view text) noexcept {
  try {
    std::string out;
    out.reserve(text.size() + 9);
    out.append("ManyCL: ").append(text).push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stderr);
  } catch (...) {
    // Out of memory for the line itself: print it in pieces rather than not at all.
    std::fprintf(stderr, "ManyCL: %.*s\n", static_cast<int>(text.size()), text.data());
  }
}

namespace {
thread_local std::string t_api_detail;
}

void set_api_detail(std::string_view message) noexcept {
  // The innermost reason is the most specific one: keep the first detail of a call.
  try {
    if (t_api_detail.empty())
      t_api_detail.assign(message);
  } catch (...) {
  }
}

void clear_api_detail() noexcept { t_api_detail.clear(); }

void api_error(std::string_view function, int code) noexcept {
  try {
    std::string text(function);
    text.append(": ").append(describe_error(code));
    if (!t_api_detail.empty())
      text.append(": ").append(t_api_detail);
    t_api_detail.clear();
    line(text);
  } catch (...) {
    t_api_detail.clear();
  }
}

int api_exception(std::string_view function) noexcept {
  static std::atomic<bool> logged_one{false};
  int code = CL_OUT_OF_RESOURCES;
  const char *what = "unknown exception";
  try {
    throw;
  } catch (const std::bad_alloc &e) {
    code = CL_OUT_OF_HOST_MEMORY;
    what = e.what();
  } catch (const std::exception &e) {
    what = e.what();
  } catch (...) {
  }
  clear_api_detail();
  if (!logged_one.exchange(true, std::memory_order_relaxed) || enabled(kApi)) {
    // Fixed-size formatting: after std::bad_alloc, building a std::string may throw again.
    char text[512];
    std::snprintf(text, sizeof(text), "%.*s: %s: internal exception caught at the API boundary: %s",
                  static_cast<int>(function.size()), function.data(), error_name(code), what);
    line(text);
  }
  return code;
}

} // namespace manycl::log
