// Helpers shared by the entry points: handle checks, error returns, wait lists.
// The entry points validate their arguments (handles, NULL pointers, flags, sizes against the
// specification's rules) before calling into the object model, which trusts its callers.
// Where an error has more to say than its code, the entry point records why with error() or
// fail(); api::Guarded (manycl/runtime/api_guard.h) logs it under MANYCL_LOG=api.
#pragma once

#include <string_view>
#include <vector>

#include <CL/cl.h>

#include "manycl/log.h"
#include "manycl/result.h"
#include "manycl/runtime/api.h"
#include "manycl/runtime/context.h"
#include "manycl/runtime/device.h"
#include "manycl/runtime/event.h"
#include "manycl/runtime/memory.h"
#include "manycl/runtime/platform.h"
#include "manycl/runtime/queue.h"

namespace manycl::api {

using rt::Context;
using rt::Device;
using rt::Event;
using rt::Memory;
using rt::Platform;
using rt::Queue;

inline void set_error(cl_int *errcode_ret, cl_int code) {
  if (errcode_ret)
    *errcode_ret = code;
}

// Records why the current call fails (for MANYCL_LOG=api) and returns `code`.
inline cl_int error(cl_int code, std::string_view why) {
  if (log::enabled(log::kApi)) [[unlikely]]
    log::set_api_detail(why);
  return code;
}
// An object-model error: its code, and its message as the reason.
inline cl_int error(const Error &e) { return error(static_cast<cl_int>(e.code), e.message); }

// Returns nullptr and sets *errcode_ret, for the object-returning entry points.
template <class T> T *fail(cl_int *errcode_ret, cl_int code) {
  set_error(errcode_ret, code);
  return nullptr;
}
template <class T> T *fail(cl_int *errcode_ret, cl_int code, std::string_view why) {
  return fail<T>(errcode_ret, error(code, why));
}
template <class T> T *fail(cl_int *errcode_ret, const Error &e) { return fail<T>(errcode_ret, error(e)); }

// The flag combination rules of clCreateBuffer / clCreateSubBuffer (CL_INVALID_VALUE, with why).
cl_int check_mem_flags(cl_mem_flags flags);

// Validates an event wait list against a context (CL_INVALID_EVENT_WAIT_LIST,
// CL_INVALID_CONTEXT) and collects the events.
cl_int collect_wait_list(Context *context, cl_uint count, const cl_event *list, std::vector<Event *> &out);

// Hands the command's event to the application or drops the application's reference.
void return_event(Event *event, cl_event *out);

// Waits for a blocking command; maps a failed command to the specified error.
cl_int wait_blocking(Event *event);

} // namespace manycl::api
