// Memory-object entry points (buffers; image creation lives with the other image calls).
#include <string>

#include "common.h"
#include "manycl/device/ddr.h"

namespace manycl::api {

namespace {
constexpr cl_mem_flags kAccessFlags = Memory::kAccessFlags;
constexpr cl_mem_flags kHostAccessFlags = Memory::kHostAccessFlags;
constexpr cl_mem_flags kHostPtrFlags = Memory::kHostPtrFlags;

int bit_count(cl_mem_flags f) { return __builtin_popcountll(f); }
} // namespace

cl_int check_mem_flags(cl_mem_flags flags) {
  if (flags & ~(kAccessFlags | kHostAccessFlags | kHostPtrFlags))
    return error(CL_INVALID_VALUE, "unknown bits in flags");
  if (bit_count(flags & kAccessFlags) > 1)
    return error(CL_INVALID_VALUE, "more than one of CL_MEM_READ_WRITE, CL_MEM_WRITE_ONLY, CL_MEM_READ_ONLY");
  if (bit_count(flags & kHostAccessFlags) > 1)
    return error(CL_INVALID_VALUE,
                 "more than one of CL_MEM_HOST_WRITE_ONLY, CL_MEM_HOST_READ_ONLY, CL_MEM_HOST_NO_ACCESS");
  if ((flags & CL_MEM_USE_HOST_PTR) && (flags & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)))
    return error(CL_INVALID_VALUE, "CL_MEM_USE_HOST_PTR with CL_MEM_ALLOC_HOST_PTR or CL_MEM_COPY_HOST_PTR");
  return CL_SUCCESS;
}

cl_mem CL_API_CALL clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void *host_ptr,
                                  cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_CONTEXT);
  if (cl_int e = check_mem_flags(flags); e != CL_SUCCESS)
    return fail<_cl_mem>(errcode_ret, e);
  if (size == 0 || size > c->max_alloc())
    return fail<_cl_mem>(errcode_ret, CL_INVALID_BUFFER_SIZE,
                         "size is 0 or larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE (size " + std::to_string(size) +
                             ", maximum " + std::to_string(c->max_alloc()) + ")");
  bool wants_ptr = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
  if (wants_ptr && !host_ptr)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_HOST_PTR, "host_ptr is NULL with CL_MEM_USE_HOST_PTR or CL_MEM_COPY_HOST_PTR");
  if (!wants_ptr && host_ptr)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_HOST_PTR,
                         "host_ptr is given without CL_MEM_USE_HOST_PTR or CL_MEM_COPY_HOST_PTR");
  auto mem = Memory::create_buffer(c, flags, size, host_ptr);
  if (!mem)
    return fail<_cl_mem>(errcode_ret, mem.error());
  set_error(errcode_ret, CL_SUCCESS);
  return mem.value()->handle();
}

cl_mem CL_API_CALL clCreateBufferWithProperties(cl_context context, const cl_mem_properties *properties,
                                                cl_mem_flags flags, size_t size, void *host_ptr,
                                                cl_int *errcode_ret) {
  if (properties && properties[0] != 0)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_PROPERTY); // no buffer property is supported
  return manycl::api::clCreateBuffer(context, flags, size, host_ptr, errcode_ret);
}

cl_mem CL_API_CALL clCreateSubBuffer(cl_mem buffer, cl_mem_flags flags, cl_buffer_create_type type,
                                     const void *info, cl_int *errcode_ret) {
  Memory *parent = Memory::from(buffer);
  if (!parent)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_MEM_OBJECT);
  if (parent->parent())
    return fail<_cl_mem>(errcode_ret, CL_INVALID_MEM_OBJECT, "buffer is itself a sub-buffer");
  if (type != CL_BUFFER_CREATE_TYPE_REGION)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE, "buffer_create_type is not CL_BUFFER_CREATE_TYPE_REGION");
  if (!info)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE, "buffer_create_info is NULL");
  if (cl_int e = check_mem_flags(flags); e != CL_SUCCESS)
    return fail<_cl_mem>(errcode_ret, e);
  if (flags & kHostPtrFlags)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE, "sub-buffers cannot take host pointer flags");
  cl_mem_flags parent_access = parent->flags() & kAccessFlags;
  cl_mem_flags access = flags & kAccessFlags;
  if (access && ((parent_access == CL_MEM_WRITE_ONLY && access != CL_MEM_WRITE_ONLY) ||
                 (parent_access == CL_MEM_READ_ONLY && access != CL_MEM_READ_ONLY)))
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE, "sub-buffer access wider than the parent's");
  cl_mem_flags parent_host = parent->flags() & kHostAccessFlags;
  cl_mem_flags host = flags & kHostAccessFlags;
  // Narrowing the host's access is always allowed (CL_MEM_HOST_NO_ACCESS under any parent);
  // widening it, or switching between read-only and write-only, is not.
  if (host && parent_host && host != parent_host && host != CL_MEM_HOST_NO_ACCESS)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE, "sub-buffer host access wider than the parent's");
  auto *region = static_cast<const cl_buffer_region *>(info);
  if (region->size == 0)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_BUFFER_SIZE, "sub-buffer size is 0");
  if (!parent->in_bounds(region->origin, region->size))
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE,
                         "sub-buffer [" + std::to_string(region->origin) + ", +" + std::to_string(region->size) +
                             ") outside its parent of " + std::to_string(parent->size()) + " bytes");
  // The alignment rule: some device of the context must accept the origin.
  if (region->origin % device::Ddr::kAlignment != 0)
    return fail<_cl_mem>(errcode_ret, CL_MISALIGNED_SUB_BUFFER_OFFSET,
                         "origin " + std::to_string(region->origin) + " is not a multiple of " +
                             std::to_string(device::Ddr::kAlignment) + " bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN)");
  Memory *mem = Memory::create_sub_buffer(parent, flags, region->origin, region->size);
  set_error(errcode_ret, CL_SUCCESS);
  return mem->handle();
}

cl_int CL_API_CALL clRetainMemObject(cl_mem memobj) {
  Memory *m = Memory::from(memobj);
  if (!m)
    return CL_INVALID_MEM_OBJECT;
  m->retain_api();
  return CL_SUCCESS;
}

cl_int CL_API_CALL clReleaseMemObject(cl_mem memobj) {
  Memory *m = Memory::from(memobj);
  if (!m || !m->release_api())
    return CL_INVALID_MEM_OBJECT;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetMemObjectInfo(cl_mem memobj, cl_mem_info param_name, size_t size, void *value,
                                      size_t *size_ret) {
  Memory *m = Memory::from(memobj);
  if (!m)
    return CL_INVALID_MEM_OBJECT;
  return m->info(param_name, size, value, size_ret);
}

cl_int CL_API_CALL clSetMemObjectDestructorCallback(cl_mem memobj, void(CL_CALLBACK *pfn_notify)(cl_mem, void *),
                                                    void *user_data) {
  Memory *m = Memory::from(memobj);
  if (!m)
    return CL_INVALID_MEM_OBJECT;
  if (!pfn_notify)
    return CL_INVALID_VALUE;
  m->add_destructor_callback(pfn_notify, user_data);
  return CL_SUCCESS;
}

} // namespace manycl::api
