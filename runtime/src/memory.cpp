#include "manycl/runtime/memory.h"

#include <cstring>

#include "manycl/runtime/info.h"

namespace manycl::rt {

namespace {
constexpr cl_mem_flags kAccessFlags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
constexpr cl_mem_flags kHostAccessFlags = CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;
constexpr cl_mem_flags kHostPtrFlags = CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;

int bit_count(cl_mem_flags f) { return __builtin_popcountll(f); }
} // namespace

cl_int validate_mem_flags(cl_mem_flags flags) {
  if (flags & ~(kAccessFlags | kHostAccessFlags | kHostPtrFlags))
    return CL_INVALID_VALUE;
  if (bit_count(flags & kAccessFlags) > 1 || bit_count(flags & kHostAccessFlags) > 1)
    return CL_INVALID_VALUE;
  if ((flags & CL_MEM_USE_HOST_PTR) && (flags & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR)))
    return CL_INVALID_VALUE;
  return CL_SUCCESS;
}

Result<Memory *> Memory::create_buffer(Context *context, cl_mem_flags flags, size_t size, void *host_ptr) {
  if (cl_int e = validate_mem_flags(flags); e != CL_SUCCESS)
    return make_error("invalid flags", e);
  if (size == 0 || size > context->max_alloc())
    return make_error("size is 0 or larger than CL_DEVICE_MAX_MEM_ALLOC_SIZE", CL_INVALID_BUFFER_SIZE);
  bool wants_ptr = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR);
  if (wants_ptr != (host_ptr != nullptr))
    return make_error("host_ptr and USE/COPY_HOST_PTR disagree", CL_INVALID_HOST_PTR);

  device::Device &owner = context->memory_owner();
  auto offset = owner.ddr().allocate(size);
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

Result<Memory *> Memory::create_sub_buffer(Memory *parent, cl_mem_flags flags, size_t origin, size_t size) {
  if (cl_int e = validate_mem_flags(flags); e != CL_SUCCESS)
    return make_error("invalid flags", e);
  if (flags & kHostPtrFlags)
    return make_error("sub-buffers cannot take host pointer flags", CL_INVALID_VALUE);
  cl_mem_flags parent_access = parent->flags_ & kAccessFlags;
  cl_mem_flags access = flags & kAccessFlags;
  if (access) {
    if ((parent_access == CL_MEM_WRITE_ONLY && access != CL_MEM_WRITE_ONLY) ||
        (parent_access == CL_MEM_READ_ONLY && access != CL_MEM_READ_ONLY))
      return make_error("sub-buffer access wider than the parent's", CL_INVALID_VALUE);
  }
  cl_mem_flags parent_host = parent->flags_ & kHostAccessFlags;
  cl_mem_flags host = flags & kHostAccessFlags;
  // Narrowing the host's access is always allowed (CL_MEM_HOST_NO_ACCESS under any parent);
  // widening it, or switching between read-only and write-only, is not.
  if (host && parent_host && host != parent_host && host != CL_MEM_HOST_NO_ACCESS)
    return make_error("sub-buffer host access wider than the parent's", CL_INVALID_VALUE);
  if (size == 0)
    return make_error("sub-buffer size is 0", CL_INVALID_BUFFER_SIZE);
  if (!parent->in_bounds(origin, size))
    return make_error("sub-buffer outside its parent", CL_INVALID_VALUE);
  // The alignment rule: some device of the context must accept the origin.
  if (origin % device::Ddr::kAlignment != 0)
    return make_error("origin not aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN", CL_MISALIGNED_SUB_BUFFER_OFFSET);

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

Memory::Memory() : anchor_(std::make_shared<Anchor>()) { anchor_->memory = this; }

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
