// Context and command-queue entry points.
#include <string>

#include "common.h"

namespace manycl::api {

namespace {

// A bad CL_CONTEXT_PLATFORM is reported before the devices are looked at, the other property
// errors after.
cl_int check_context_properties_platform(const cl_context_properties *properties) {
  if (!properties)
    return CL_SUCCESS;
  for (size_t i = 0; properties[i] != 0; i += 2)
    if (properties[i] == CL_CONTEXT_PLATFORM && !Platform::from(reinterpret_cast<cl_platform_id>(properties[i + 1])))
      return error(CL_INVALID_PLATFORM, "CL_CONTEXT_PLATFORM is not a valid platform");
  return CL_SUCCESS;
}

cl_int check_context_properties(const cl_context_properties *properties) {
  if (!properties)
    return CL_SUCCESS;
  bool seen_platform = false, seen_sync = false;
  for (size_t i = 0; properties[i] != 0; i += 2) {
    cl_context_properties name = properties[i];
    cl_context_properties value = properties[i + 1];
    if (name == CL_CONTEXT_PLATFORM) {
      if (seen_platform)
        return error(CL_INVALID_PROPERTY, "CL_CONTEXT_PLATFORM given twice");
      seen_platform = true;
    } else if (name == CL_CONTEXT_INTEROP_USER_SYNC) {
      if (seen_sync)
        return error(CL_INVALID_PROPERTY, "CL_CONTEXT_INTEROP_USER_SYNC given twice");
      seen_sync = true;
      if (value != CL_TRUE && value != CL_FALSE)
        return error(CL_INVALID_PROPERTY, "CL_CONTEXT_INTEROP_USER_SYNC is neither CL_TRUE nor CL_FALSE");
    } else {
      return error(CL_INVALID_PROPERTY, "unsupported context property " + std::to_string(name));
    }
  }
  return CL_SUCCESS;
}

cl_context make_context(const cl_context_properties *properties, std::vector<Device *> devices,
                        rt::ContextNotify notify, void *user_data, cl_int *errcode_ret) {
  if (cl_int e = check_context_properties(properties); e != CL_SUCCESS)
    return fail<_cl_context>(errcode_ret, e);
  Context *context = Context::create(properties, std::move(devices), notify, user_data);
  set_error(errcode_ret, CL_SUCCESS);
  return context->handle();
}

} // namespace

cl_context CL_API_CALL clCreateContext(const cl_context_properties *properties, cl_uint num_devices,
                                       const cl_device_id *devices, rt::ContextNotify pfn_notify, void *user_data,
                                       cl_int *errcode_ret) {
  if (!devices || num_devices == 0 || (!pfn_notify && user_data))
    return fail<_cl_context>(errcode_ret, CL_INVALID_VALUE);
  if (cl_int e = check_context_properties_platform(properties); e != CL_SUCCESS)
    return fail<_cl_context>(errcode_ret, e);
  std::vector<Device *> list;
  for (cl_uint i = 0; i < num_devices; ++i) {
    Device *d = Device::from(devices[i]);
    if (!d)
      return fail<_cl_context>(errcode_ret, CL_INVALID_DEVICE);
    list.push_back(d);
  }
  return make_context(properties, std::move(list), pfn_notify, user_data, errcode_ret);
}

cl_context CL_API_CALL clCreateContextFromType(const cl_context_properties *properties, cl_device_type device_type,
                                               rt::ContextNotify pfn_notify, void *user_data, cl_int *errcode_ret) {
  if (!pfn_notify && user_data)
    return fail<_cl_context>(errcode_ret, CL_INVALID_VALUE);
  if (cl_int e = check_context_properties_platform(properties); e != CL_SUCCESS)
    return fail<_cl_context>(errcode_ret, e);
  cl_uint count = 0;
  cl_int e = manycl::api::clGetDeviceIDs(Platform::get().handle(), device_type, 0, nullptr, &count);
  if (e != CL_SUCCESS)
    return fail<_cl_context>(errcode_ret, e);
  std::vector<cl_device_id> handles(count);
  manycl::api::clGetDeviceIDs(Platform::get().handle(), device_type, count, handles.data(), nullptr);
  std::vector<Device *> list;
  for (cl_device_id h : handles)
    list.push_back(Device::from(h));
  return make_context(properties, std::move(list), pfn_notify, user_data, errcode_ret);
}

cl_int CL_API_CALL clRetainContext(cl_context context) {
  Context *c = Context::from(context);
  if (!c)
    return CL_INVALID_CONTEXT;
  c->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseContext(cl_context context) {
  Context *c = Context::from(context);
  if (!c || !c->release_api())
    return CL_INVALID_CONTEXT;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetContextInfo(cl_context context, cl_context_info param_name, size_t size, void *value,
                                    size_t *size_ret) {
  Context *c = Context::from(context);
  if (!c)
    return CL_INVALID_CONTEXT;
  return c->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clSetContextDestructorCallback(cl_context context,
                                                  void(CL_CALLBACK *pfn_notify)(cl_context, void *),
                                                  void *user_data) {
  Context *c = Context::from(context);
  if (!c)
    return CL_INVALID_CONTEXT;
  if (!pfn_notify)
    return CL_INVALID_VALUE;
  c->add_destructor_callback(pfn_notify, user_data);
  return CL_SUCCESS;
}

namespace {
cl_command_queue make_queue(cl_context context, cl_device_id device, cl_command_queue_properties properties,
                            std::vector<cl_queue_properties> list, cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_command_queue>(errcode_ret, CL_INVALID_CONTEXT);
  Device *d = Device::from(device);
  if (!d)
    return fail<_cl_command_queue>(errcode_ret, CL_INVALID_DEVICE);
  if (!c->has_device(d))
    return fail<_cl_command_queue>(errcode_ret, CL_INVALID_DEVICE, "the device is not in the context");
  const cl_command_queue_properties supported = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE | CL_QUEUE_PROFILING_ENABLE;
  const cl_command_queue_properties known = supported | CL_QUEUE_ON_DEVICE | CL_QUEUE_ON_DEVICE_DEFAULT;
  if (properties & ~known)
    return fail<_cl_command_queue>(errcode_ret, CL_INVALID_VALUE, "unknown queue properties");
  if (properties & ~supported)
    return fail<_cl_command_queue>(errcode_ret, CL_INVALID_QUEUE_PROPERTIES, "on-device queues are not supported");
  Queue *queue = Queue::create(c, d, properties, std::move(list));
  set_error(errcode_ret, CL_SUCCESS);
  return queue->handle();
}
} // namespace

cl_command_queue CL_API_CALL clCreateCommandQueue(cl_context context, cl_device_id device,
                                                  cl_command_queue_properties properties, cl_int *errcode_ret) {
  return make_queue(context, device, properties, {}, errcode_ret);
}

cl_command_queue CL_API_CALL clCreateCommandQueueWithProperties(cl_context context, cl_device_id device,
                                                                const cl_queue_properties *properties,
                                                                cl_int *errcode_ret) {
  cl_command_queue_properties flags = 0;
  std::vector<cl_queue_properties> list;
  if (properties) {
    for (size_t i = 0; properties[i] != 0; i += 2) {
      if (properties[i] == CL_QUEUE_PROPERTIES)
        flags = static_cast<cl_command_queue_properties>(properties[i + 1]);
      else if (properties[i] == CL_QUEUE_SIZE)
        return fail<_cl_command_queue>(errcode_ret, CL_INVALID_QUEUE_PROPERTIES,
                                       "CL_QUEUE_SIZE applies to on-device queues, which are not supported");
      else
        return fail<_cl_command_queue>(errcode_ret, CL_INVALID_VALUE, "unknown queue property name");
      list.push_back(properties[i]);
      list.push_back(properties[i + 1]);
    }
    list.push_back(0);
  }
  return make_queue(context, device, flags, std::move(list), errcode_ret);
}

cl_int CL_API_CALL clRetainCommandQueue(cl_command_queue queue) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  q->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseCommandQueue(cl_command_queue queue) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  // The last release flushes (commands are already issued) and lets the queue go once its
  // commands are done.
  q->retain();
  if (!q->release_api()) {
    q->release();
    return CL_INVALID_COMMAND_QUEUE;
  }
  if (q->api_ref_count() == 0)
    q->api_released();
  q->release();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetCommandQueueInfo(cl_command_queue queue, cl_command_queue_info param_name, size_t size,
                                         void *value, size_t *size_ret) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  return q->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clSetCommandQueueProperty(cl_command_queue queue, cl_command_queue_properties properties,
                                             cl_bool enable, cl_command_queue_properties *old_properties) {
  (void)properties, (void)enable, (void)old_properties;
  // Deprecated in OpenCL 1.1: properties are fixed at creation.
  return Queue::from(queue) ? CL_INVALID_OPERATION : CL_INVALID_COMMAND_QUEUE;
}

cl_int CL_API_CALL clSetDefaultDeviceCommandQueue(cl_context context, cl_device_id device,
                                                  cl_command_queue command_queue) {
  if (!Context::from(context))
    return CL_INVALID_CONTEXT;
  if (!Device::from(device))
    return CL_INVALID_DEVICE;
  (void)command_queue;
  return CL_INVALID_OPERATION; // no on-device queues
}

cl_int CL_API_CALL clFlush(cl_command_queue queue) {
  // Commands are issued to the device as soon as they are enqueued.
  return Queue::from(queue) ? CL_SUCCESS : CL_INVALID_COMMAND_QUEUE;
}

cl_int CL_API_CALL clFinish(cl_command_queue queue) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  q->finish();
  return CL_SUCCESS;
}

} // namespace manycl::api
