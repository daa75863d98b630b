#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <CL/cl.h>

#include "manycl/result.h"
#include "manycl/runtime/device.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

using ContextNotify = void(CL_CALLBACK *)(const char *, const void *, size_t, void *);

class Context : public Object<Context, _cl_context, Kind::Context> {
public:
  // `properties` and `devices` are valid for clCreateContext (the entry points check them).
  static Context *create(const cl_context_properties *properties, std::vector<Device *> devices,
                         ContextNotify notify, void *user_data);
  ~Context();

  const std::vector<Device *> &devices() const { return devices_; }
  bool has_device(const Device *device) const;
  // The DDR that holds this context's buffers: the first device's.
  device::Device &memory_owner() const { return devices_.front()->hardware(); }
  // The largest buffer any device of the context accepts.
  uint64_t max_alloc() const;

  // Reports an error to the application's notification callback, if any.
  void notify(const std::string &message) const;

  cl_int info(cl_context_info param, size_t size, void *value, size_t *size_ret);
  void add_destructor_callback(void(CL_CALLBACK *fn)(cl_context, void *), void *user_data);

private:
  Context() = default;
  std::vector<Device *> devices_;
  std::vector<cl_context_properties> properties_;
  ContextNotify notify_ = nullptr;
  void *notify_data_ = nullptr;
  std::mutex mutex_;
  std::vector<std::pair<void(CL_CALLBACK *)(cl_context, void *), void *>> destructor_callbacks_;
};

} // namespace manycl::rt
