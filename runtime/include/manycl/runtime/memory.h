// Buffers and sub-buffers. A buffer's storage is a block of its context's device DDR; a
// sub-buffer is a window on its parent's block. CL_MEM_USE_HOST_PTR buffers keep their own
// DDR copy and synchronise with the application's memory when created and when mapped and
// unmapped, as the specification allows for a device with its own memory.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <CL/cl.h>

#include "manycl/result.h"
#include "manycl/runtime/context.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

class Memory : public Object<Memory, _cl_mem, Kind::Mem> {
public:
  // The arguments are valid for clCreateBuffer / clCreateSubBuffer (the entry points check
  // them); only the DDR allocation can fail.
  static Result<Memory *> create_buffer(Context *context, cl_mem_flags flags, size_t size, void *host_ptr);
  static Memory *create_sub_buffer(Memory *parent, cl_mem_flags flags, size_t origin, size_t size);
  static constexpr cl_mem_flags kAccessFlags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
  static constexpr cl_mem_flags kHostAccessFlags =
      CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;
  static constexpr cl_mem_flags kHostPtrFlags = CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;
  ~Memory();

  Context *context() const { return context_.get(); }
  cl_mem_flags flags() const { return flags_; }
  size_t size() const { return size_; }
  Memory *parent() const { return parent_.get(); }
  size_t origin() const { return origin_; }
  std::byte *data() const { return data_; }
  void *host_ptr() const { return host_ptr_; }
  bool host_can_read() const { return !(flags_ & (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS)); }
  bool host_can_write() const { return !(flags_ & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)); }
  bool in_bounds(size_t offset, size_t bytes) const { return offset <= size_ && bytes <= size_ - offset; }

  // Map/unmap bookkeeping. map() returns the pointer the application sees; unmap() copies
  // written USE_HOST_PTR regions back and fails for a pointer that is not mapped.
  void *map_pointer(size_t offset) const;
  void record_map(void *pointer, size_t offset, size_t size, cl_map_flags flags);
  Result<void> take_map(void *pointer, size_t &offset, size_t &size, cl_map_flags &flags);
  void sync_to_host(size_t offset, size_t size);
  void sync_from_host(size_t offset, size_t size);

  void add_destructor_callback(void(CL_CALLBACK *fn)(cl_mem, void *), void *user_data);
  cl_int info(cl_mem_info param, size_t size, void *value, size_t *size_ret);

private:
  friend class WeakMemory;
  // What a WeakMemory points to; cleared when the memory object dies.
  struct Anchor {
    std::mutex mutex;
    Memory *memory = nullptr;
  };

  Memory();

  struct Mapping {
    size_t offset;
    size_t size;
    cl_map_flags flags;
  };

  Ref<Context> context_;
  cl_mem_flags flags_ = 0;
  size_t size_ = 0;
  void *host_ptr_ = nullptr;
  Ref<Memory> parent_;
  size_t origin_ = 0;
  device::Device *owner_ = nullptr;
  uint64_t ddr_offset_ = 0;
  bool owns_ddr_ = false;
  std::byte *data_ = nullptr;

  std::shared_ptr<Anchor> anchor_;
  std::mutex mutex_;
  std::multimap<void *, Mapping> mappings_;
  std::vector<std::pair<void(CL_CALLBACK *)(cl_mem, void *), void *>> destructor_callbacks_;
};

// A reference that does not keep a memory object alive: what a kernel argument holds. The
// specification counts only the application's references and the commands in flight, so a
// buffer set as a kernel argument is still deleted (and its destructor callbacks run) once the
// application releases it.
class WeakMemory {
public:
  WeakMemory() = default;
  explicit WeakMemory(Memory *memory) : anchor_(memory ? memory->anchor_ : nullptr) {}
  // A strong reference, or none when the memory object is gone (or being destroyed).
  Ref<Memory> lock() const;
  explicit operator bool() const { return anchor_ != nullptr; }

private:
  std::shared_ptr<Memory::Anchor> anchor_;
};

} // namespace manycl::rt
