// Diagnostics on stderr, one "ManyCL: ..." line each, chosen with MANYCL_LOG:
//   api     every OpenCL call that fails logs its name, the error's name and, where the
//           runtime knows it, why: "ManyCL: clCreateBuffer: CL_INVALID_BUFFER_SIZE: ..."
//   device  the device-side log (mcl_log from native functions and kernels)
//   all     everything; a comma list ("api,device") selects several; "none" or "0" nothing
// MANYCL_DEVICE_LOG=1 is kept as a synonym of MANYCL_LOG=device.
// When a channel is off its check is one relaxed atomic load: the API path pays nothing else.
#pragma once

#include <atomic>
#include <string>
#include <string_view>

namespace manycl::log {

enum Channel : unsigned {
  kApi = 1u << 0,
  kDevice = 1u << 1,
  kAll = kApi | kDevice,
};

namespace detail {
inline constexpr unsigned kUnread = 1u << 31;
extern std::atomic<unsigned> g_channels;
unsigned read_environment();
} // namespace detail

inline bool enabled(Channel channel) {
  unsigned channels = detail::g_channels.load(std::memory_order_relaxed);
  if (channels & detail::kUnread) [[unlikely]]
    channels = detail::read_environment();
  return (channels & channel) != 0;
}

// Overrides MANYCL_LOG (tests, and programs that want the log without the environment).
void set_channels(unsigned channels);

// Parses a MANYCL_LOG value; `unknown` receives the first word that names no channel.
unsigned parse_channels(std::string_view spec, std::string *unknown = nullptr);

// "CL_INVALID_VALUE" for -30; nullptr for a code that names no OpenCL error.
const char *error_name(int code);
// error_name(code), or "error <code>" for a code without a name.
std::string describe_error(int code);

// Writes "ManyCL: <text>\n" to stderr in one call, so that lines from threads do not mix.
void line(std::string_view text) noexcept;

// Why the current API call is failing, kept per thread until the entry point returns; the
// API layer sets it where it knows more than the error code. Only call when kApi is enabled.
void set_api_detail(std::string_view message) noexcept;
// Drops a detail that the call did not end up reporting (it succeeded after all).
void clear_api_detail() noexcept;
// Logs "ManyCL: <function>: <error name>[: <detail>]" and clears the detail.
void api_error(std::string_view function, int code) noexcept;

// Call inside a catch block at the C ABI: maps the exception being handled to the entry
// point's error (std::bad_alloc: CL_OUT_OF_HOST_MEMORY, anything else: CL_OUT_OF_RESOURCES)
// and logs it. The first one of a process is logged whatever MANYCL_LOG says (it is a
// runtime bug or memory exhaustion, never an ordinary error); the others under kApi.
int api_exception(std::string_view function) noexcept;

} // namespace manycl::log
