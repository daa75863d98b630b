// The base of every OpenCL object: the ICD header the loaders read (dispatch pointer, then
// the cl_khr_icd 2.0 dispatch data), a per-type tag checked before any handle is cast, and
// two reference counts: the API count (clRetain*/clRelease*, reported by
// CL_*_REFERENCE_COUNT) and the lifetime count, which also counts the internal references
// held by queues, commands and child objects. An object dies when its lifetime count drops to
// zero; its API count dropping to zero only means the application is done with it.
//
// API objects have no virtual functions, so that the ICD header stays at offset 0.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include <CL/cl_icd.h>

namespace manycl::rt {

enum class Kind : uint32_t {
  Platform = 1,
  Device,
  Context,
  Queue,
  Mem,
  Program,
  Kernel,
  Event,
  Sampler,
};

inline constexpr uint32_t kLiveMagic = 0x4d434c21; // "MCL!"
inline constexpr uint32_t kDeadMagic = 0xdeadbeef;

struct IcdHeader {
  const cl_icd_dispatch *dispatch;
  void *dispatch_data;
  uint32_t magic;
  Kind kind;
};

// The dispatch table (icd/) and the loader's dispatch data (cl_khr_icd 2.0).
const cl_icd_dispatch *icd_dispatch_table();
void *platform_dispatch_data();

} // namespace manycl::rt

struct _cl_platform_id : manycl::rt::IcdHeader {};
struct _cl_device_id : manycl::rt::IcdHeader {};
struct _cl_context : manycl::rt::IcdHeader {};
struct _cl_command_queue : manycl::rt::IcdHeader {};
struct _cl_mem : manycl::rt::IcdHeader {};
struct _cl_program : manycl::rt::IcdHeader {};
struct _cl_kernel : manycl::rt::IcdHeader {};
struct _cl_event : manycl::rt::IcdHeader {};
struct _cl_sampler : manycl::rt::IcdHeader {};

namespace manycl::rt {

template <class Derived, class Handle, Kind K> class Object : public Handle {
public:
  using HandleType = Handle *;
  static constexpr Kind kKind = K;

  Object() {
    this->dispatch = icd_dispatch_table();
    this->dispatch_data = platform_dispatch_data();
    this->magic = kLiveMagic;
    this->kind = K;
  }
  ~Object() { this->magic = kDeadMagic; }
  Object(const Object &) = delete;
  Object &operator=(const Object &) = delete;

  // The object behind a handle, or nullptr when the handle is NULL, not ours, of another
  // type or already destroyed.
  static Derived *from(const Handle *handle) {
    if (!handle || handle->dispatch != icd_dispatch_table() || handle->magic != kLiveMagic ||
        handle->kind != K)
      return nullptr;
    return static_cast<Derived *>(const_cast<Handle *>(handle));
  }
  Handle *handle() { return static_cast<Handle *>(this); }

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete static_cast<Derived *>(this);
  }
  // Retains unless the object is already dying (its lifetime count reached zero).
  bool try_retain() {
    uint32_t current = refs_.load(std::memory_order_relaxed);
    do {
      if (current == 0)
        return false;
    } while (!refs_.compare_exchange_weak(current, current + 1, std::memory_order_acq_rel));
    return true;
  }
  void retain_api() {
    api_refs_.fetch_add(1, std::memory_order_relaxed);
    retain();
  }
  // Returns false when the application holds no reference any more (the handle is invalid).
  bool release_api() {
    uint32_t current = api_refs_.load(std::memory_order_relaxed);
    do {
      if (current == 0)
        return false;
    } while (!api_refs_.compare_exchange_weak(current, current - 1, std::memory_order_acq_rel));
    release();
    return true;
  }
  uint32_t api_ref_count() const { return api_refs_.load(std::memory_order_relaxed); }

private:
  // A new object starts with one API reference (the one returned to the application).
  std::atomic<uint32_t> api_refs_{1};
  std::atomic<uint32_t> refs_{1};
};

// An owning internal reference.
template <class T> class Ref {
public:
  Ref() = default;
  Ref(T *object) : object_(object) {
    if (object_)
      object_->retain();
  }
  Ref(const Ref &other) : Ref(other.object_) {}
  Ref(Ref &&other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  Ref &operator=(Ref other) {
    std::swap(object_, other.object_);
    return *this;
  }
  ~Ref() {
    if (object_)
      object_->release();
  }
  // Takes over a reference the caller already holds.
  static Ref adopt(T *object) {
    Ref r;
    r.object_ = object;
    return r;
  }
  T *get() const { return object_; }
  T *operator->() const { return object_; }
  T &operator*() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }
  bool operator==(const Ref &other) const { return object_ == other.object_; }

private:
  T *object_ = nullptr;
};

} // namespace manycl::rt
