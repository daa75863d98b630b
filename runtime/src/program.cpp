#include "manycl/runtime/program.h"

#include <algorithm>

#include "manycl/runtime/info.h"

namespace manycl::rt {

Program::Program(Context *context, std::vector<Device *> devices, std::string source)
    : context_(context), devices_(std::move(devices)), source_(std::move(source)) {
  for (Device *d : devices_)
    d->retain();
}

Program::~Program() {
  for (Device *d : devices_)
    d->release();
}

bool Program::has_device(const Device *d) const {
  return std::find(devices_.begin(), devices_.end(), d) != devices_.end();
}

void Program::record_build(cl_build_status status, std::string options, std::string log) {
  std::lock_guard lock(mutex_);
  status_ = status;
  options_ = std::move(options);
  log_ = std::move(log);
}

cl_int Program::info(cl_program_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_PROGRAM_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_PROGRAM_CONTEXT:
    return out.scalar<cl_context>(context_->handle());
  case CL_PROGRAM_NUM_DEVICES:
    return out.scalar<cl_uint>(static_cast<cl_uint>(devices_.size()));
  case CL_PROGRAM_DEVICES: {
    std::vector<cl_device_id> handles;
    for (Device *d : devices_)
      handles.push_back(d->handle());
    return out.array(handles);
  }
  case CL_PROGRAM_SOURCE:
    return out.string(source_);
  case CL_PROGRAM_BINARY_SIZES: {
    std::vector<size_t> sizes(devices_.size(), 0);
    return out.array(sizes);
  }
  case CL_PROGRAM_BINARIES: {
    // An array of pointers the application owns; with no binary (size 0) nothing is written.
    size_t needed = devices_.size() * sizeof(unsigned char *);
    if (value && size < needed)
      return CL_INVALID_VALUE;
    if (size_ret)
      *size_ret = needed;
    return CL_SUCCESS;
  }
  case CL_PROGRAM_NUM_KERNELS:
  case CL_PROGRAM_KERNEL_NAMES:
    return CL_INVALID_PROGRAM_EXECUTABLE;
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Program::build_info(Device *device, cl_program_build_info param, size_t size, void *value,
                           size_t *size_ret) {
  (void)device;
  InfoWriter out(size, value, size_ret);
  std::lock_guard lock(mutex_);
  switch (param) {
  case CL_PROGRAM_BUILD_STATUS:
    return out.scalar<cl_build_status>(status_);
  case CL_PROGRAM_BUILD_OPTIONS:
    return out.string(options_);
  case CL_PROGRAM_BUILD_LOG:
    return out.string(log_);
  case CL_PROGRAM_BINARY_TYPE:
    return out.scalar<cl_program_binary_type>(CL_PROGRAM_BINARY_TYPE_NONE);
  case CL_PROGRAM_BUILD_GLOBAL_VARIABLE_TOTAL_SIZE:
    return out.scalar<size_t>(0);
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
