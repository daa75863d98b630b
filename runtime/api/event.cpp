// Event entry points.
#include "common.h"

namespace manycl::api {

cl_int CL_API_CALL clWaitForEvents(cl_uint num_events, const cl_event *event_list) {
  if (num_events == 0 || !event_list)
    return CL_INVALID_VALUE;
  std::vector<Event *> events;
  Context *context = nullptr;
  for (cl_uint i = 0; i < num_events; ++i) {
    Event *e = Event::from(event_list[i]);
    if (!e)
      return CL_INVALID_EVENT;
    if (context && e->context() != context)
      return CL_INVALID_CONTEXT;
    context = e->context();
    events.push_back(e);
  }
  cl_int result = CL_SUCCESS;
  for (Event *e : events)
    if (e->wait() < 0)
      result = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
  return result;
}

cl_int CL_API_CALL clGetEventInfo(cl_event event, cl_event_info param_name, size_t size, void *value,
                                  size_t *size_ret) {
  Event *e = Event::from(event);
  if (!e)
    return CL_INVALID_EVENT;
  return e->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetEventProfilingInfo(cl_event event, cl_profiling_info param_name, size_t size, void *value,
                                           size_t *size_ret) {
  Event *e = Event::from(event);
  if (!e)
    return CL_INVALID_EVENT;
  return e->profiling_info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clRetainEvent(cl_event event) {
  Event *e = Event::from(event);
  if (!e)
    return CL_INVALID_EVENT;
  e->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseEvent(cl_event event) {
  Event *e = Event::from(event);
  if (!e || !e->release_api())
    return CL_INVALID_EVENT;
  return CL_SUCCESS;
}

cl_event CL_API_CALL clCreateUserEvent(cl_context context, cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_event>(errcode_ret, CL_INVALID_CONTEXT);
  auto *event = new Event(c);
  set_error(errcode_ret, CL_SUCCESS);
  return event->handle();
}

cl_int CL_API_CALL clSetUserEventStatus(cl_event event, cl_int execution_status) {
  Event *e = Event::from(event);
  if (!e || !e->is_user_event())
    return CL_INVALID_EVENT;
  if (execution_status != CL_COMPLETE && execution_status >= 0)
    return CL_INVALID_VALUE;
  if (!e->set_user_status(execution_status))
    return CL_INVALID_OPERATION;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clSetEventCallback(cl_event event, cl_int type,
                                      void(CL_CALLBACK *pfn_notify)(cl_event, cl_int, void *), void *user_data) {
  Event *e = Event::from(event);
  if (!e)
    return CL_INVALID_EVENT;
  if (!pfn_notify || (type != CL_SUBMITTED && type != CL_RUNNING && type != CL_COMPLETE))
    return CL_INVALID_VALUE;
  return e->add_callback(type, pfn_notify, user_data);
}

} // namespace manycl::api
