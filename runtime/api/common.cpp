#include "common.h"

namespace manycl::api {

cl_int collect_wait_list(Context *context, cl_uint count, const cl_event *list, std::vector<Event *> &out) {
  if ((count == 0) != (list == nullptr))
    return CL_INVALID_EVENT_WAIT_LIST;
  out.reserve(count);
  for (cl_uint i = 0; i < count; ++i) {
    Event *event = Event::from(list[i]);
    if (!event)
      return CL_INVALID_EVENT_WAIT_LIST;
    if (context && event->context() != context)
      return CL_INVALID_CONTEXT;
    out.push_back(event);
  }
  return CL_SUCCESS;
}

void return_event(Event *event, cl_event *out) {
  if (out)
    *out = event->handle();
  else
    event->release_api();
}

cl_int wait_blocking(Event *event) {
  cl_int status = event->wait();
  return status < 0 ? CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST : CL_SUCCESS;
}

} // namespace manycl::api
