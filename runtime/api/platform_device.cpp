// Platform and device entry points, sub-devices included.
#include "common.h"

namespace manycl::api {

cl_int CL_API_CALL clGetPlatformIDs(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms) {
  if ((num_entries == 0 && platforms) || (!platforms && !num_platforms))
    return CL_INVALID_VALUE;
  Platform &platform = Platform::get();
  if (platform.root_devices().empty()) {
    // A platform without devices is useless; report none so the loader skips us.
    if (num_platforms)
      *num_platforms = 0;
    return CL_PLATFORM_NOT_FOUND_KHR;
  }
  if (platforms)
    platforms[0] = platform.handle();
  if (num_platforms)
    *num_platforms = 1;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clIcdGetPlatformIDsKHR(cl_uint num_entries, cl_platform_id *platforms, cl_uint *num_platforms) {
  return manycl::api::clGetPlatformIDs(num_entries, platforms, num_platforms);
}

cl_int CL_API_CALL clGetPlatformInfo(cl_platform_id platform, cl_platform_info param_name, size_t size,
                                     void *value, size_t *size_ret) {
  // NULL selects the (only) platform, an implementation-defined behaviour we allow.
  Platform *p = platform ? Platform::from(platform) : &Platform::get();
  if (!p)
    return CL_INVALID_PLATFORM;
  return p->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clGetDeviceIDs(cl_platform_id platform, cl_device_type type, cl_uint num_entries,
                                  cl_device_id *devices, cl_uint *num_devices) {
  Platform *p = platform ? Platform::from(platform) : &Platform::get();
  if (!p)
    return CL_INVALID_PLATFORM;
  const cl_device_type known = CL_DEVICE_TYPE_DEFAULT | CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_GPU |
                               CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CUSTOM;
  if (type != CL_DEVICE_TYPE_ALL && (type == 0 || (type & ~known)))
    return CL_INVALID_DEVICE_TYPE;
  if ((num_entries == 0 && devices) || (!devices && !num_devices))
    return CL_INVALID_VALUE;
  std::vector<Device *> matching;
  if (type & (CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_DEFAULT))
    matching = p->root_devices();
  if ((type & CL_DEVICE_TYPE_DEFAULT) && type != CL_DEVICE_TYPE_ALL && !(type & CL_DEVICE_TYPE_ACCELERATOR) &&
      matching.size() > 1)
    matching.resize(1);
  if (matching.empty())
    return CL_DEVICE_NOT_FOUND;
  if (devices)
    for (cl_uint i = 0; i < num_entries && i < matching.size(); ++i)
      devices[i] = matching[i]->handle();
  if (num_devices)
    *num_devices = static_cast<cl_uint>(matching.size());
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetDeviceInfo(cl_device_id device, cl_device_info param_name, size_t size, void *value,
                                   size_t *size_ret) {
  Device *d = Device::from(device);
  if (!d)
    return CL_INVALID_DEVICE;
  return d->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clCreateSubDevices(cl_device_id in_device, const cl_device_partition_property *properties,
                                      cl_uint num_devices, cl_device_id *out_devices, cl_uint *num_devices_ret) {
  Device *d = Device::from(in_device);
  if (!d)
    return CL_INVALID_DEVICE;
  if (!properties)
    return CL_INVALID_VALUE;
  auto created = d->partition(properties);
  if (!created)
    return error(created.error());
  auto &subs = created.value();
  if (out_devices && num_devices < subs.size()) {
    for (Device *s : subs)
      s->release_api();
    return CL_INVALID_VALUE;
  }
  if (num_devices_ret)
    *num_devices_ret = static_cast<cl_uint>(subs.size());
  for (size_t i = 0; i < subs.size(); ++i) {
    if (out_devices)
      out_devices[i] = subs[i]->handle();
    else
      subs[i]->release_api(); // only the count was asked for
  }
  return CL_SUCCESS;
}

cl_int CL_API_CALL clRetainDevice(cl_device_id device) {
  Device *d = Device::from(device);
  if (!d)
    return CL_INVALID_DEVICE;
  d->retain_device();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseDevice(cl_device_id device) {
  Device *d = Device::from(device);
  if (!d || !d->release_device())
    return CL_INVALID_DEVICE;
  return CL_SUCCESS;
}

// cl_ext_device_fission: the same partition with the EXT property names.
cl_int CL_API_CALL clCreateSubDevicesEXT(cl_device_id in_device, const cl_device_partition_property_ext *properties,
                                         cl_uint num_entries, cl_device_id *out_devices, cl_uint *num_devices) {
  (void)in_device, (void)properties, (void)num_entries, (void)out_devices, (void)num_devices;
  return CL_INVALID_OPERATION; // cl_ext_device_fission is not reported
}
cl_int CL_API_CALL clRetainDeviceEXT(cl_device_id device) {
  return Device::from(device) ? CL_INVALID_OPERATION : CL_INVALID_DEVICE;
}
cl_int CL_API_CALL clReleaseDeviceEXT(cl_device_id device) {
  return Device::from(device) ? CL_INVALID_OPERATION : CL_INVALID_DEVICE;
}

cl_int CL_API_CALL clGetDeviceAndHostTimer(cl_device_id device, cl_ulong *device_timestamp,
                                           cl_ulong *host_timestamp) {
  Device *d = Device::from(device);
  if (!d)
    return CL_INVALID_DEVICE;
  if (!device_timestamp || !host_timestamp)
    return CL_INVALID_VALUE;
  // The device's profiling clock is the host's monotonic clock.
  *device_timestamp = *host_timestamp = rt::host_time_ns();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetHostTimer(cl_device_id device, cl_ulong *host_timestamp) {
  if (!Device::from(device))
    return CL_INVALID_DEVICE;
  if (!host_timestamp)
    return CL_INVALID_VALUE;
  *host_timestamp = rt::host_time_ns();
  return CL_SUCCESS;
}

} // namespace manycl::api
