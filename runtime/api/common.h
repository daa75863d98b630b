// Helpers shared by the entry points: handle checks, error returns, wait lists.
#pragma once

#include <vector>

#include <CL/cl.h>

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

// Returns nullptr and sets *errcode_ret, for the object-returning entry points.
template <class T> T *fail(cl_int *errcode_ret, cl_int code) {
  set_error(errcode_ret, code);
  return nullptr;
}

// Validates an event wait list against a context (CL_INVALID_EVENT_WAIT_LIST,
// CL_INVALID_CONTEXT) and collects the events.
cl_int collect_wait_list(Context *context, cl_uint count, const cl_event *list, std::vector<Event *> &out);

// Hands the command's event to the application or drops the application's reference.
void return_event(Event *event, cl_event *out);

// Waits for a blocking command; maps a failed command to the specified error.
cl_int wait_blocking(Event *event);

} // namespace manycl::api
