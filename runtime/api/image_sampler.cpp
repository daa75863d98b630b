// Images and samplers: ManyCL devices report CL_DEVICE_IMAGE_SUPPORT = CL_FALSE, so these
// entry points validate what they can and return the errors the specification names for a
// context without image support. No image or sampler object can exist.
#include "common.h"

namespace manycl::api {

namespace {
cl_mem no_image(cl_context context, cl_int *errcode_ret) {
  return fail<_cl_mem>(errcode_ret, Context::from(context) ? CL_INVALID_OPERATION : CL_INVALID_CONTEXT);
}
cl_int no_image_command(cl_command_queue queue) {
  return Queue::from(queue) ? CL_INVALID_MEM_OBJECT : CL_INVALID_COMMAND_QUEUE;
}
} // namespace

cl_mem CL_API_CALL clCreateImage2D(cl_context context, cl_mem_flags, const cl_image_format *, size_t, size_t, size_t,
                                   void *, cl_int *errcode_ret) {
  return no_image(context, errcode_ret);
}
cl_mem CL_API_CALL clCreateImage3D(cl_context context, cl_mem_flags, const cl_image_format *, size_t, size_t, size_t,
                                   size_t, size_t, void *, cl_int *errcode_ret) {
  return no_image(context, errcode_ret);
}
cl_mem CL_API_CALL clCreateImage(cl_context context, cl_mem_flags, const cl_image_format *, const cl_image_desc *,
                                 void *, cl_int *errcode_ret) {
  return no_image(context, errcode_ret);
}
cl_mem CL_API_CALL clCreateImageWithProperties(cl_context context, const cl_mem_properties *, cl_mem_flags,
                                               const cl_image_format *, const cl_image_desc *, void *,
                                               cl_int *errcode_ret) {
  return no_image(context, errcode_ret);
}

cl_int CL_API_CALL clGetSupportedImageFormats(cl_context context, cl_mem_flags flags, cl_mem_object_type image_type,
                                              cl_uint num_entries, cl_image_format *image_formats,
                                              cl_uint *num_image_formats) {
  if (!Context::from(context))
    return CL_INVALID_CONTEXT;
  if (check_mem_flags(flags) != CL_SUCCESS && !(flags & CL_MEM_KERNEL_READ_AND_WRITE))
    return CL_INVALID_VALUE;
  switch (image_type) {
  case CL_MEM_OBJECT_IMAGE1D:
  case CL_MEM_OBJECT_IMAGE1D_BUFFER:
  case CL_MEM_OBJECT_IMAGE1D_ARRAY:
  case CL_MEM_OBJECT_IMAGE2D:
  case CL_MEM_OBJECT_IMAGE2D_ARRAY:
  case CL_MEM_OBJECT_IMAGE3D:
    break;
  default:
    return CL_INVALID_VALUE;
  }
  if (num_entries == 0 && image_formats)
    return CL_INVALID_VALUE;
  if (num_image_formats)
    *num_image_formats = 0;
  return CL_SUCCESS;
}

cl_int CL_API_CALL clGetImageInfo(cl_mem, cl_image_info, size_t, void *, size_t *) { return CL_INVALID_MEM_OBJECT; }

cl_int CL_API_CALL clEnqueueReadImage(cl_command_queue queue, cl_mem, cl_bool, const size_t *, const size_t *, size_t,
                                      size_t, void *, cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
cl_int CL_API_CALL clEnqueueWriteImage(cl_command_queue queue, cl_mem, cl_bool, const size_t *, const size_t *,
                                       size_t, size_t, const void *, cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
cl_int CL_API_CALL clEnqueueCopyImage(cl_command_queue queue, cl_mem, cl_mem, const size_t *, const size_t *,
                                      const size_t *, cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
cl_int CL_API_CALL clEnqueueCopyImageToBuffer(cl_command_queue queue, cl_mem, cl_mem, const size_t *, const size_t *,
                                              size_t, cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
cl_int CL_API_CALL clEnqueueCopyBufferToImage(cl_command_queue queue, cl_mem, cl_mem, size_t, const size_t *,
                                              const size_t *, cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
cl_int CL_API_CALL clEnqueueFillImage(cl_command_queue queue, cl_mem, const void *, const size_t *, const size_t *,
                                      cl_uint, const cl_event *, cl_event *) {
  return no_image_command(queue);
}
void *CL_API_CALL clEnqueueMapImage(cl_command_queue queue, cl_mem, cl_bool, cl_map_flags, const size_t *,
                                    const size_t *, size_t *, size_t *, cl_uint, const cl_event *, cl_event *,
                                    cl_int *errcode_ret) {
  return fail<void>(errcode_ret, no_image_command(queue));
}

cl_sampler CL_API_CALL clCreateSampler(cl_context context, cl_bool, cl_addressing_mode, cl_filter_mode,
                                       cl_int *errcode_ret) {
  return fail<_cl_sampler>(errcode_ret, Context::from(context) ? CL_INVALID_OPERATION : CL_INVALID_CONTEXT);
}
cl_sampler CL_API_CALL clCreateSamplerWithProperties(cl_context context, const cl_sampler_properties *,
                                                     cl_int *errcode_ret) {
  return fail<_cl_sampler>(errcode_ret, Context::from(context) ? CL_INVALID_OPERATION : CL_INVALID_CONTEXT);
}
cl_int CL_API_CALL clRetainSampler(cl_sampler) { return CL_INVALID_SAMPLER; }
cl_int CL_API_CALL clReleaseSampler(cl_sampler) { return CL_INVALID_SAMPLER; }
cl_int CL_API_CALL clGetSamplerInfo(cl_sampler, cl_sampler_info, size_t, void *, size_t *) {
  return CL_INVALID_SAMPLER;
}

} // namespace manycl::api
