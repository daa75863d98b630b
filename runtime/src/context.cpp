#include "manycl/runtime/context.h"

#include <algorithm>

#include "manycl/runtime/info.h"
#include "manycl/runtime/platform.h"

namespace manycl::rt {

Context *Context::create(const cl_context_properties *properties, std::vector<Device *> devices,
                         ContextNotify notify, void *user_data) {
  std::vector<cl_context_properties> kept;
  if (properties) {
    for (size_t i = 0; properties[i] != 0; i += 2) {
      kept.push_back(properties[i]);
      kept.push_back(properties[i + 1]);
    }
    kept.push_back(0);
  }
  auto *context = new Context();
  context->properties_ = std::move(kept);
  context->notify_ = notify;
  context->notify_data_ = user_data;
  // CL_CONTEXT_DEVICES lists exactly the devices passed, duplicates removed.
  for (Device *device : devices) {
    if (std::find(context->devices_.begin(), context->devices_.end(), device) != context->devices_.end())
      continue;
    device->retain();
    context->devices_.push_back(device);
  }
  return context;
}

Context::~Context() {
  // Destructor callbacks run in reverse order of registration (OpenCL 3.0).
  for (auto it = destructor_callbacks_.rbegin(); it != destructor_callbacks_.rend(); ++it)
    it->first(handle(), it->second);
  for (Device *device : devices_)
    device->release();
}

bool Context::has_device(const Device *device) const {
  return std::find(devices_.begin(), devices_.end(), device) != devices_.end();
}

uint64_t Context::max_alloc() const {
  uint64_t best = 0;
  for (Device *d : devices_)
    best = std::max(best, d->config().max_alloc());
  return best;
}

void Context::notify(const std::string &message) const {
  if (notify_)
    notify_(message.c_str(), nullptr, 0, notify_data_);
}

void Context::add_destructor_callback(void(CL_CALLBACK *fn)(cl_context, void *), void *user_data) {
  std::lock_guard lock(mutex_);
  destructor_callbacks_.emplace_back(fn, user_data);
}

cl_int Context::info(cl_context_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_CONTEXT_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_CONTEXT_NUM_DEVICES:
    return out.scalar<cl_uint>(static_cast<cl_uint>(devices_.size()));
  case CL_CONTEXT_DEVICES: {
    std::vector<cl_device_id> handles;
    for (Device *d : devices_)
      handles.push_back(d->handle());
    return out.array(handles);
  }
  case CL_CONTEXT_PROPERTIES:
    return out.array(properties_);
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
