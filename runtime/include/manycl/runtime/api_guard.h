// The wrapper every ICD entry point is reached through (icd/dispatch.cpp instantiates it for
// each slot of dispatch_slots.def, and for the extension functions). It is the C ABI edge:
//  - no C++ exception leaves it: std::bad_alloc becomes CL_OUT_OF_HOST_MEMORY, anything else
//    CL_OUT_OF_RESOURCES, both in the function's own shape (the returned cl_int, or NULL with
//    *errcode_ret set) and logged;
//  - under MANYCL_LOG=api, a call that fails logs one line: the function, the error's name
//    and the reason the API layer recorded (manycl::log::set_api_detail), if any.
// With the log off, the added cost on the success path is one relaxed atomic load.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>

#include <CL/cl.h>

#include "manycl/log.h"

namespace manycl::api {

// A string usable as a template argument: the entry point's name, for the log.
template <size_t N> struct EntryName {
  char text[N];
  constexpr EntryName(const char (&name)[N]) {
    for (size_t i = 0; i < N; ++i)
      text[i] = name[i];
  }
  constexpr const char *c_str() const { return text; }
};

template <EntryName Name, auto Fn, class Sig = decltype(Fn)> struct Guarded;

template <EntryName Name, auto Fn, class R, class... Args>
struct Guarded<Name, Fn, R(CL_API_CALL *)(Args...)> {
  static constexpr size_t kArity = sizeof...(Args);

  static constexpr bool returns_code() { return std::is_same_v<R, cl_int>; }
  static constexpr bool has_errcode_ret() {
    if constexpr (kArity == 0 || returns_code())
      return false;
    else
      return std::is_same_v<std::tuple_element_t<kArity - 1, std::tuple<Args...>>, cl_int *>;
  }

  static R CL_API_CALL call(Args... args) noexcept {
    if constexpr (returns_code()) {
      try {
        cl_int code = Fn(args...);
        if (log::enabled(log::kApi)) [[unlikely]]
          report(code);
        return code;
      } catch (...) {
        return static_cast<cl_int>(log::api_exception(Name.c_str()));
      }
    } else if constexpr (has_errcode_ret()) {
      auto arguments = std::forward_as_tuple(args...);
      cl_int *&errcode_ret = std::get<kArity - 1>(arguments);
      cl_int *const caller_errcode_ret = errcode_ret;
      const bool logging = log::enabled(log::kApi);
      // Seeing the code needs somewhere to write it even when the caller passed NULL.
      cl_int local = CL_SUCCESS;
      if (logging) [[unlikely]] {
        if (!errcode_ret)
          errcode_ret = &local;
        *errcode_ret = CL_SUCCESS;
      }
      try {
        R result = std::apply(Fn, arguments);
        if (logging) [[unlikely]]
          report(*errcode_ret);
        return result;
      } catch (...) {
        cl_int code = static_cast<cl_int>(log::api_exception(Name.c_str()));
        if (caller_errcode_ret)
          *caller_errcode_ret = code;
        return R{};
      }
    } else {
      // void, or a pointer without errcode_ret (clGetExtensionFunctionAddress*): NULL is an
      // ordinary answer there, only an exception is worth a line.
      try {
        return Fn(args...);
      } catch (...) {
        log::api_exception(Name.c_str());
        if constexpr (!std::is_void_v<R>)
          return R{};
      }
    }
  }

private:
  static void report(cl_int code) {
    if (code != CL_SUCCESS)
      log::api_error(Name.c_str(), code);
    else
      log::clear_api_detail();
  }
};

// The guarded form of a function: &guarded<"clFoo", &api::clFoo>.
template <EntryName Name, auto Fn> inline constexpr auto guarded = &Guarded<Name, Fn>::call;

} // namespace manycl::api
