#include "manycl/runtime/memory.h"

#include <cstring>

#include "manycl/runtime/info.h"

namespace manycl::rt {

// Flags, sizes and host pointers are checked by the entry points (runtime/api/memory.cpp).

Result<Memory *> Memory::create_buffer(Context *context, cl_mem_flags flags, size_t size,
                                       void *host_ptr) {
  device::Device &owner = context->memory_owner();
  // CL_MEM_COPY_HOST_PTR / CL_MEM_USE_HOST_PTR: the host's bytes are copied over the block
  // below, so it needs no clearing first.
  auto offset = owner.ddr().allocate(size, host_ptr ? device::Ddr::Contents::Overwritten
                                                    : device::Ddr::Contents::Zero);
  if (!offset)
    return make_error(offset.error().message, CL_MEM_OBJECT_ALLOCATION_FAILURE);
  auto *mem = new Memory();
  mem->context_ = Ref<Context>(context);
  mem->flags_ = (flags & kAccessFlags) ? flags : (flags | CL_MEM_READ_WRITE);
  mem->size_ = size;
  mem->owner_ = &owner;
  mem->ddr_offset_ = offset.value();
  mem->owns_ddr_ = true;
  mem->data_ = owner.ddr().at(offset.value());
  if (flags & CL_MEM_USE_HOST_PTR)
    mem->host_ptr_ = host_ptr;
  if (host_ptr)
    std::memcpy(mem->data_, host_ptr, size);
  return mem;
}

Memory *Memory::create_sub_buffer(Memory *parent, cl_mem_flags flags, size_t origin, size_t size) {
  cl_mem_flags parent_access = parent->flags_ & kAccessFlags;
  cl_mem_flags access = flags & kAccessFlags;
  cl_mem_flags parent_host = parent->flags_ & kHostAccessFlags;
  cl_mem_flags host = flags & kHostAccessFlags;
  auto *mem = new Memory();
  mem->context_ = parent->context_;
  mem->flags_ = (access ? access : parent_access) | (host ? host : parent_host) |
                (parent->flags_ & kHostPtrFlags);
  mem->size_ = size;
  mem->parent_ = Ref<Memory>(parent);
  mem->origin_ = origin;
  mem->owner_ = parent->owner_;
  mem->data_ = parent->data_ + origin;
  if (parent->host_ptr_)
    mem->host_ptr_ = static_cast<std::byte *>(parent->host_ptr_) + origin;
  return mem;
}

Memory::Memory() : anchor_(std::make_shared<Anchor>()) {
  anchor_->memory = this;
}

Memory::~Memory() {
  {
    std::lock_guard lock(anchor_->mutex);
    anchor_->memory = nullptr;
  }
  // Callbacks run in reverse order of registration, before the storage is reused.
  for (auto it = destructor_callbacks_.rbegin(); it != destructor_callbacks_.rend(); ++it)
    it->first(handle(), it->second);
  if (owns_ddr_)
    owner_->ddr().free(ddr_offset_);
}

Ref<Memory> WeakMemory::lock() const {
  if (!anchor_)
    return {};
  std::lock_guard lock(anchor_->mutex);
  Memory *memory = anchor_->memory;
  if (!memory || !memory->try_retain())
    return {};
  return Ref<Memory>::adopt(memory);
}

void *Memory::map_pointer(size_t offset) const {
  if (host_ptr_)
    return static_cast<std::byte *>(host_ptr_) + offset;
  return data_ + offset;
}

void Memory::record_map(void *pointer, size_t offset, size_t size, cl_map_flags flags) {
  std::lock_guard lock(mutex_);
  mappings_.emplace(pointer, Mapping{offset, size, flags});
}

Result<void> Memory::take_map(void *pointer, size_t &offset, size_t &size, cl_map_flags &flags) {
  std::lock_guard lock(mutex_);
  auto it = mappings_.find(pointer);
  if (it == mappings_.end())
    return make_error("pointer is not mapped from this memory object", CL_INVALID_VALUE);
  offset = it->second.offset;
  size = it->second.size;
  flags = it->second.flags;
  mappings_.erase(it);
  return {};
}

void Memory::sync_to_host(size_t offset, size_t size) {
  if (host_ptr_ && size)
    std::memmove(static_cast<std::byte *>(host_ptr_) + offset, data_ + offset, size);
}

void Memory::sync_from_host(size_t offset, size_t size) {
  if (host_ptr_ && size)
    std::memmove(data_ + offset, static_cast<std::byte *>(host_ptr_) + offset, size);
}

void Memory::add_destructor_callback(void(CL_CALLBACK *fn)(cl_mem, void *), void *user_data) {
  std::lock_guard lock(mutex_);
  destructor_callbacks_.emplace_back(fn, user_data);
}

cl_int Memory::info(cl_mem_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_MEM_TYPE:
    return out.scalar<cl_mem_object_type>(CL_MEM_OBJECT_BUFFER);
  case CL_MEM_FLAGS:
    return out.scalar<cl_mem_flags>(flags_);
  case CL_MEM_SIZE:
    return out.scalar<size_t>(size_);
  case CL_MEM_HOST_PTR:
    return out.scalar<void *>(host_ptr_);
  case CL_MEM_MAP_COUNT: {
    std::lock_guard lock(mutex_);
    return out.scalar<cl_uint>(static_cast<cl_uint>(mappings_.size()));
  }
  case CL_MEM_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_MEM_CONTEXT:
    return out.scalar<cl_context>(context_->handle());
  case CL_MEM_ASSOCIATED_MEMOBJECT:
    return out.scalar<cl_mem>(parent_ ? parent_->handle() : nullptr);
  case CL_MEM_OFFSET:
    return out.scalar<size_t>(origin_);
  case CL_MEM_USES_SVM_POINTER:
    return out.scalar<cl_bool>(CL_FALSE);
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
