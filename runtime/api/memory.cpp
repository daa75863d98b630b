// Memory-object entry points (buffers; image creation lives with the other image calls).
#include "common.h"

namespace manycl::api {

cl_mem CL_API_CALL clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void *host_ptr,
                                  cl_int *errcode_ret) {
  Context *c = Context::from(context);
  if (!c)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_CONTEXT);
  auto mem = Memory::create_buffer(c, flags, size, host_ptr);
  if (!mem)
    return fail<_cl_mem>(errcode_ret, mem.error().code);
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
  if (!parent || parent->parent())
    return fail<_cl_mem>(errcode_ret, CL_INVALID_MEM_OBJECT);
  if (type != CL_BUFFER_CREATE_TYPE_REGION || !info)
    return fail<_cl_mem>(errcode_ret, CL_INVALID_VALUE);
  auto *region = static_cast<const cl_buffer_region *>(info);
  auto mem = Memory::create_sub_buffer(parent, flags, region->origin, region->size);
  if (!mem)
    return fail<_cl_mem>(errcode_ret, mem.error().code);
  set_error(errcode_ret, CL_SUCCESS);
  return mem.value()->handle();
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
