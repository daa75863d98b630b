// Command entry points: buffer transfers, map/unmap, native kernels, markers and barriers.
#include <array>
#include <cstring>

#include "common.h"

namespace manycl::api {

using rt::Ref;

namespace {

// A host<->DDR or DDR<->DDR copy keeps the DDR busy: charge it to the running command.
void account_ddr(uint64_t read, uint64_t written) {
  if (auto *context = device::current_cluster_context())
    context->command().account_host_transfer(read, written);
}

// The checks every enqueue starts with: a valid queue and a valid wait list in its context.
cl_int begin(cl_command_queue queue, cl_uint num_events, const cl_event *wait_list, Queue *&q,
             std::vector<Event *> &waits) {
  q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  return collect_wait_list(q->context(), num_events, wait_list, waits);
}

cl_int check_buffer(Queue *q, cl_mem buffer, Memory *&m) {
  m = Memory::from(buffer);
  if (!m)
    return CL_INVALID_MEM_OBJECT;
  if (m->context() != q->context())
    return CL_INVALID_CONTEXT;
  if (m->origin() % device::Ddr::kAlignment != 0)
    return CL_MISALIGNED_SUB_BUFFER_OFFSET;
  return CL_SUCCESS;
}

// Finishes an enqueue: blocking wait if asked, event to the application or dropped.
cl_int finish(Event *event, cl_bool blocking, cl_event *out) {
  cl_int result = CL_SUCCESS;
  if (blocking)
    result = wait_blocking(event);
  return_event(event, out);
  return result;
}

struct Rect {
  size_t row_pitch, slice_pitch;
};

// Applies the defaults and checks of the *_rect calls for one side (buffer or host).
cl_int resolve_pitches(const size_t *region, size_t &row_pitch, size_t &slice_pitch) {
  if (row_pitch == 0)
    row_pitch = region[0];
  else if (row_pitch < region[0])
    return CL_INVALID_VALUE;
  if (slice_pitch == 0)
    slice_pitch = region[1] * row_pitch;
  else if (slice_pitch < region[1] * row_pitch || slice_pitch % row_pitch != 0)
    return CL_INVALID_VALUE;
  return CL_SUCCESS;
}

// Byte offset of the first and one past the last byte a rect touches.
size_t rect_begin(const size_t *origin, size_t row_pitch, size_t slice_pitch) {
  return origin[2] * slice_pitch + origin[1] * row_pitch + origin[0];
}
size_t rect_end(const size_t *origin, const size_t *region, size_t row_pitch, size_t slice_pitch) {
  return (origin[2] + region[2] - 1) * slice_pitch + (origin[1] + region[1] - 1) * row_pitch + origin[0] +
         region[0];
}

void copy_rect(std::byte *dst, const size_t *dst_origin, size_t dst_row, size_t dst_slice, const std::byte *src,
               const size_t *src_origin, size_t src_row, size_t src_slice, const size_t *region) {
  for (size_t z = 0; z < region[2]; ++z)
    for (size_t y = 0; y < region[1]; ++y)
      std::memmove(dst + (dst_origin[2] + z) * dst_slice + (dst_origin[1] + y) * dst_row + dst_origin[0],
                   src + (src_origin[2] + z) * src_slice + (src_origin[1] + y) * src_row + src_origin[0],
                   region[0]);
}

bool region_valid(const size_t *region) { return region && region[0] && region[1] && region[2]; }

// Whether two rects inside one buffer share a byte (same pitches on both sides).
bool rects_overlap(const size_t *a, const size_t *b, const size_t *region, size_t row, size_t slice) {
  // Compare the boxes in (x, y, z) after unfolding both origins into the same pitch space.
  size_t a_off = rect_begin(a, row, slice), b_off = rect_begin(b, row, slice);
  size_t ax = a_off % row, ay = (a_off / row) % (slice / row), az = a_off / slice;
  size_t bx = b_off % row, by = (b_off / row) % (slice / row), bz = b_off / slice;
  auto overlap = [](size_t p, size_t q, size_t n) { return p < q + n && q < p + n; };
  return overlap(ax, bx, region[0]) && overlap(ay, by, region[1]) && overlap(az, bz, region[2]);
}

} // namespace

namespace {
// clEnqueueReadBuffer and clEnqueueWriteBuffer: the same checks, opposite directions.
cl_int enqueue_host_transfer(cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset, size_t size,
                             void *ptr, cl_uint num_events, const cl_event *wait_list, cl_event *event, bool is_read) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *m;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, buffer, m); e != CL_SUCCESS)
    return e;
  if (!ptr || size == 0 || !m->in_bounds(offset, size))
    return CL_INVALID_VALUE;
  if (is_read ? !m->host_can_read() : !m->host_can_write())
    return CL_INVALID_OPERATION;
  Ref<Memory> keep(m);
  auto *host = static_cast<std::byte *>(ptr);
  Event *ev = q->enqueue(is_read ? CL_COMMAND_READ_BUFFER : CL_COMMAND_WRITE_BUFFER,
                         [keep, offset, size, host, is_read] {
                           if (is_read) {
                             std::memcpy(host, keep->data() + offset, size);
                             account_ddr(size, 0);
                           } else {
                             std::memcpy(keep->data() + offset, host, size);
                             account_ddr(0, size);
                           }
                           return CL_SUCCESS;
                         },
                         waits);
  return finish(ev, blocking, event);
}
} // namespace

cl_int CL_API_CALL clEnqueueReadBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset,
                                       size_t size, void *ptr, cl_uint num_events, const cl_event *wait_list,
                                       cl_event *event) {
  return enqueue_host_transfer(queue, buffer, blocking, offset, size, ptr, num_events, wait_list, event, true);
}

cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking, size_t offset,
                                        size_t size, const void *ptr, cl_uint num_events,
                                        const cl_event *wait_list, cl_event *event) {
  return enqueue_host_transfer(queue, buffer, blocking, offset, size, const_cast<void *>(ptr), num_events, wait_list,
                               event, false);
}

cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue queue, cl_mem src_buffer, cl_mem dst_buffer,
                                       size_t src_offset, size_t dst_offset, size_t size, cl_uint num_events,
                                       const cl_event *wait_list, cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *src, *dst;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, src_buffer, src); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, dst_buffer, dst); e != CL_SUCCESS)
    return e;
  if (size == 0 || !src->in_bounds(src_offset, size) || !dst->in_bounds(dst_offset, size))
    return CL_INVALID_VALUE;
  // Overlap is judged on the bytes themselves, so sub-buffers of one parent count too.
  const std::byte *s = src->data() + src_offset, *d = dst->data() + dst_offset;
  if (s < d + size && d < s + size)
    return CL_MEM_COPY_OVERLAP;
  Ref<Memory> ks(src), kd(dst);
  Event *ev = q->enqueue(CL_COMMAND_COPY_BUFFER, [ks, kd, src_offset, dst_offset, size] {
    std::memcpy(kd->data() + dst_offset, ks->data() + src_offset, size);
    account_ddr(size, size);
    return CL_SUCCESS;
  }, waits);
  return finish(ev, CL_FALSE, event);
}

namespace {
cl_int enqueue_host_rect(cl_command_queue queue, cl_mem buffer, cl_bool blocking, const size_t *buffer_origin,
                         const size_t *host_origin, const size_t *region, size_t buffer_row, size_t buffer_slice,
                         size_t host_row, size_t host_slice, void *ptr, cl_uint num_events,
                         const cl_event *wait_list, cl_event *event, bool is_read) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *m;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, buffer, m); e != CL_SUCCESS)
    return e;
  if (!ptr || !buffer_origin || !host_origin || !region_valid(region))
    return CL_INVALID_VALUE;
  if (resolve_pitches(region, buffer_row, buffer_slice) != CL_SUCCESS ||
      resolve_pitches(region, host_row, host_slice) != CL_SUCCESS)
    return CL_INVALID_VALUE;
  if (rect_end(buffer_origin, region, buffer_row, buffer_slice) > m->size())
    return CL_INVALID_VALUE;
  if (is_read ? !m->host_can_read() : !m->host_can_write())
    return CL_INVALID_OPERATION;
  std::array<size_t, 3> bo{buffer_origin[0], buffer_origin[1], buffer_origin[2]};
  std::array<size_t, 3> ho{host_origin[0], host_origin[1], host_origin[2]};
  std::array<size_t, 3> rg{region[0], region[1], region[2]};
  Ref<Memory> keep(m);
  auto *host = static_cast<std::byte *>(ptr);
  Event *ev = q->enqueue(is_read ? CL_COMMAND_READ_BUFFER_RECT : CL_COMMAND_WRITE_BUFFER_RECT,
                         [=] {
                           if (is_read)
                             copy_rect(host, ho.data(), host_row, host_slice, keep->data(), bo.data(), buffer_row,
                                       buffer_slice, rg.data());
                           else
                             copy_rect(keep->data(), bo.data(), buffer_row, buffer_slice, host, ho.data(), host_row,
                                       host_slice, rg.data());
                           return CL_SUCCESS;
                         },
                         waits);
  return finish(ev, blocking, event);
}
} // namespace

cl_int CL_API_CALL clEnqueueReadBufferRect(cl_command_queue queue, cl_mem buffer, cl_bool blocking,
                                           const size_t *buffer_origin, const size_t *host_origin,
                                           const size_t *region, size_t buffer_row_pitch,
                                           size_t buffer_slice_pitch, size_t host_row_pitch,
                                           size_t host_slice_pitch, void *ptr, cl_uint num_events,
                                           const cl_event *wait_list, cl_event *event) {
  return enqueue_host_rect(queue, buffer, blocking, buffer_origin, host_origin, region, buffer_row_pitch,
                           buffer_slice_pitch, host_row_pitch, host_slice_pitch, ptr, num_events, wait_list, event,
                           true);
}

cl_int CL_API_CALL clEnqueueWriteBufferRect(cl_command_queue queue, cl_mem buffer, cl_bool blocking,
                                            const size_t *buffer_origin, const size_t *host_origin,
                                            const size_t *region, size_t buffer_row_pitch,
                                            size_t buffer_slice_pitch, size_t host_row_pitch,
                                            size_t host_slice_pitch, const void *ptr, cl_uint num_events,
                                            const cl_event *wait_list, cl_event *event) {
  return enqueue_host_rect(queue, buffer, blocking, buffer_origin, host_origin, region, buffer_row_pitch,
                           buffer_slice_pitch, host_row_pitch, host_slice_pitch, const_cast<void *>(ptr),
                           num_events, wait_list, event, false);
}

cl_int CL_API_CALL clEnqueueCopyBufferRect(cl_command_queue queue, cl_mem src_buffer, cl_mem dst_buffer,
                                           const size_t *src_origin, const size_t *dst_origin,
                                           const size_t *region, size_t src_row, size_t src_slice, size_t dst_row,
                                           size_t dst_slice, cl_uint num_events, const cl_event *wait_list,
                                           cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *src, *dst;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, src_buffer, src); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, dst_buffer, dst); e != CL_SUCCESS)
    return e;
  if (!src_origin || !dst_origin || !region_valid(region))
    return CL_INVALID_VALUE;
  if (resolve_pitches(region, src_row, src_slice) != CL_SUCCESS ||
      resolve_pitches(region, dst_row, dst_slice) != CL_SUCCESS)
    return CL_INVALID_VALUE;
  if (rect_end(src_origin, region, src_row, src_slice) > src->size() ||
      rect_end(dst_origin, region, dst_row, dst_slice) > dst->size())
    return CL_INVALID_VALUE;
  if (src == dst) {
    if (src_row != dst_row || src_slice != dst_slice)
      return CL_INVALID_VALUE;
    if (rects_overlap(src_origin, dst_origin, region, src_row, src_slice))
      return CL_MEM_COPY_OVERLAP;
  }
  std::array<size_t, 3> so{src_origin[0], src_origin[1], src_origin[2]};
  std::array<size_t, 3> d_o{dst_origin[0], dst_origin[1], dst_origin[2]};
  std::array<size_t, 3> rg{region[0], region[1], region[2]};
  Ref<Memory> ks(src), kd(dst);
  Event *ev = q->enqueue(CL_COMMAND_COPY_BUFFER_RECT,
                         [=] {
                           copy_rect(kd->data(), d_o.data(), dst_row, dst_slice, ks->data(), so.data(), src_row,
                                     src_slice, rg.data());
                           return CL_SUCCESS;
                         },
                         waits);
  return finish(ev, CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue queue, cl_mem buffer, const void *pattern,
                                       size_t pattern_size, size_t offset, size_t size, cl_uint num_events,
                                       const cl_event *wait_list, cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *m;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, buffer, m); e != CL_SUCCESS)
    return e;
  bool power_of_two = pattern_size && (pattern_size & (pattern_size - 1)) == 0;
  if (!pattern || !power_of_two || pattern_size > 128 || offset % pattern_size || size % pattern_size ||
      size == 0 || !m->in_bounds(offset, size))
    return CL_INVALID_VALUE;
  std::vector<std::byte> bytes(static_cast<const std::byte *>(pattern),
                               static_cast<const std::byte *>(pattern) + pattern_size);
  Ref<Memory> keep(m);
  Event *ev = q->enqueue(CL_COMMAND_FILL_BUFFER, [keep, bytes = std::move(bytes), offset, size] {
    std::byte *dst = keep->data() + offset;
    for (size_t done = 0; done < size; done += bytes.size())
      std::memcpy(dst + done, bytes.data(), bytes.size());
    account_ddr(0, size);
    return CL_SUCCESS;
  }, waits);
  return finish(ev, CL_FALSE, event);
}

void *CL_API_CALL clEnqueueMapBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking, cl_map_flags flags,
                                     size_t offset, size_t size, cl_uint num_events, const cl_event *wait_list,
                                     cl_event *event, cl_int *errcode_ret) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *m;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return fail<void>(errcode_ret, e);
  if (cl_int e = check_buffer(q, buffer, m); e != CL_SUCCESS)
    return fail<void>(errcode_ret, e);
  const cl_map_flags known = CL_MAP_READ | CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION;
  if ((flags & ~known) || ((flags & CL_MAP_WRITE_INVALIDATE_REGION) && (flags & (CL_MAP_READ | CL_MAP_WRITE))))
    return fail<void>(errcode_ret, CL_INVALID_VALUE);
  if (size == 0 || !m->in_bounds(offset, size))
    return fail<void>(errcode_ret, CL_INVALID_VALUE);
  if (((flags & CL_MAP_READ) && !m->host_can_read()) ||
      ((flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION)) && !m->host_can_write()))
    return fail<void>(errcode_ret, CL_INVALID_OPERATION);
  void *pointer = m->map_pointer(offset);
  m->record_map(pointer, offset, size, flags);
  Ref<Memory> keep(m);
  bool fetch = !(flags & CL_MAP_WRITE_INVALIDATE_REGION);
  Event *ev = q->enqueue(CL_COMMAND_MAP_BUFFER, [keep, offset, size, fetch] {
    if (fetch)
      keep->sync_to_host(offset, size);
    return CL_SUCCESS;
  }, waits);
  cl_int result = finish(ev, blocking, event);
  set_error(errcode_ret, result);
  return result == CL_SUCCESS ? pointer : nullptr;
}

cl_int CL_API_CALL clEnqueueUnmapMemObject(cl_command_queue queue, cl_mem memobj, void *mapped_ptr,
                                           cl_uint num_events, const cl_event *wait_list, cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  Memory *m;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (cl_int e = check_buffer(q, memobj, m); e != CL_SUCCESS)
    return e;
  size_t offset, size;
  cl_map_flags flags;
  if (!mapped_ptr)
    return error(CL_INVALID_VALUE, "mapped_ptr is NULL");
  if (auto taken = m->take_map(mapped_ptr, offset, size, flags); !taken)
    return error(taken.error());
  Ref<Memory> keep(m);
  bool write_back = flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION);
  Event *ev = q->enqueue(CL_COMMAND_UNMAP_MEM_OBJECT, [keep, offset, size, write_back] {
    if (write_back)
      keep->sync_from_host(offset, size);
    return CL_SUCCESS;
  }, waits);
  return finish(ev, CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueMigrateMemObjects(cl_command_queue queue, cl_uint num_mem_objects,
                                              const cl_mem *mem_objects, cl_mem_migration_flags flags,
                                              cl_uint num_events, const cl_event *wait_list, cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (num_mem_objects == 0 || !mem_objects)
    return CL_INVALID_VALUE;
  if (flags & ~(CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED))
    return CL_INVALID_VALUE;
  for (cl_uint i = 0; i < num_mem_objects; ++i) {
    Memory *m;
    if (cl_int e = check_buffer(q, mem_objects[i], m); e != CL_SUCCESS)
      return e;
  }
  // All clusters of a device share its DDR: nothing moves, but the command orders like any other.
  Event *ev = q->enqueue(CL_COMMAND_MIGRATE_MEM_OBJECTS, Event::Action(), waits);
  return finish(ev, CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueNativeKernel(cl_command_queue queue, void(CL_CALLBACK *user_func)(void *), void *args,
                                         size_t cb_args, cl_uint num_mem_objects, const cl_mem *mem_list,
                                         const void **args_mem_loc, cl_uint num_events, const cl_event *wait_list,
                                         cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  if (!user_func || (!args && (cb_args > 0 || num_mem_objects > 0)) || (args && cb_args == 0) ||
      (num_mem_objects > 0 && (!mem_list || !args_mem_loc)) || (num_mem_objects == 0 && (mem_list || args_mem_loc)))
    return CL_INVALID_VALUE;
  std::vector<std::byte> copy(cb_args);
  if (cb_args)
    std::memcpy(copy.data(), args, cb_args);
  std::vector<std::pair<size_t, Ref<Memory>>> patches;
  for (cl_uint i = 0; i < num_mem_objects; ++i) {
    Memory *m;
    if (cl_int e = check_buffer(q, mem_list[i], m); e != CL_SUCCESS)
      return e;
    auto *loc = static_cast<const std::byte *>(static_cast<const void *>(args_mem_loc[i]));
    auto *base = static_cast<const std::byte *>(args);
    if (loc < base || loc + sizeof(void *) > base + cb_args)
      return CL_INVALID_VALUE;
    patches.emplace_back(static_cast<size_t>(loc - base), Ref<Memory>(m));
  }
  Event *ev = q->enqueue(CL_COMMAND_NATIVE_KERNEL,
                         [user_func, copy = std::move(copy), patches = std::move(patches)]() mutable {
                           // The memory objects' device addresses are patched into the argument copy.
                           for (auto &[offset, mem] : patches) {
                             void *address = mem->data();
                             std::memcpy(copy.data() + offset, &address, sizeof(address));
                           }
                           user_func(copy.empty() ? nullptr : copy.data());
                           return CL_SUCCESS;
                         },
                         waits);
  return finish(ev, CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueMarkerWithWaitList(cl_command_queue queue, cl_uint num_events, const cl_event *wait_list,
                                               cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  return finish(q->enqueue_marker(CL_COMMAND_MARKER, waits), CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueBarrierWithWaitList(cl_command_queue queue, cl_uint num_events,
                                                const cl_event *wait_list, cl_event *event) {
  Queue *q;
  std::vector<Event *> waits;
  if (cl_int e = begin(queue, num_events, wait_list, q, waits); e != CL_SUCCESS)
    return e;
  return finish(q->enqueue_barrier(CL_COMMAND_BARRIER, waits), CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueMarker(cl_command_queue queue, cl_event *event) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  if (!event)
    return CL_INVALID_VALUE;
  return finish(q->enqueue_marker(CL_COMMAND_MARKER, {}), CL_FALSE, event);
}

cl_int CL_API_CALL clEnqueueBarrier(cl_command_queue queue) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  return finish(q->enqueue_barrier(CL_COMMAND_BARRIER, {}), CL_FALSE, nullptr);
}

cl_int CL_API_CALL clEnqueueWaitForEvents(cl_command_queue queue, cl_uint num_events, const cl_event *event_list) {
  Queue *q = Queue::from(queue);
  if (!q)
    return CL_INVALID_COMMAND_QUEUE;
  if (num_events == 0 || !event_list)
    return CL_INVALID_VALUE;
  std::vector<Event *> waits;
  for (cl_uint i = 0; i < num_events; ++i) {
    Event *e = Event::from(event_list[i]);
    if (!e)
      return CL_INVALID_EVENT;
    if (e->context() != q->context())
      return CL_INVALID_CONTEXT;
    waits.push_back(e);
  }
  return finish(q->enqueue_barrier(CL_COMMAND_BARRIER, waits), CL_FALSE, nullptr);
}

} // namespace manycl::api
