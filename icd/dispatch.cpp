// The dispatch table handed to the ICD loaders, and the name -> entry point map behind
// clGetExtensionFunctionAddress[ForPlatform] and cl_khr_icd 2.0's
// clIcdGetFunctionAddressForPlatformKHR. Every slot is filled: implemented entry points,
// generic rejecters for unsupported features, and Windows-only slots with a function that
// answers CL_INVALID_OPERATION. Every function handed out goes through api::Guarded
// (manycl/runtime/api_guard.h): no exception crosses the C ABI, and MANYCL_LOG=api logs
// failed calls.
#include "dispatch.h"

#include <cstring>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "manycl/runtime/api.h"
#include "manycl/runtime/api_guard.h"
#include "manycl/runtime/platform.h"
#include "vendor_extensions.h"

namespace manycl::icd {

namespace {

// An unsupported entry point: returns `Error`, or NULL with *errcode_ret = Error when the
// function returns an object (its last parameter is then errcode_ret).
template <class Fn, cl_int Error> struct Reject;
template <class R, class... Args, cl_int Error> struct Reject<R(CL_API_CALL *)(Args...), Error> {
  static R CL_API_CALL call(Args... args) {
    if (log::enabled(log::kApi))
      log::set_api_detail("not supported by ManyCL");
    if constexpr (std::is_same_v<R, cl_int>) {
      ((void)args, ...);
      return Error;
    } else {
      if constexpr (sizeof...(Args) > 0) {
        using Last = std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>;
        if constexpr (std::is_same_v<Last, cl_int *>) {
          Last errcode_ret = std::get<sizeof...(Args) - 1>(std::tuple<Args...>(args...));
          if (errcode_ret)
            *errcode_ret = Error;
        }
      }
      ((void)args, ...);
      if constexpr (!std::is_void_v<R>)
        return R{};
    }
  }
};

// Direct3D / DX9 sharing exist only on Windows; the slot is typed void* here. Loaders on
// this platform never call it; if something does, it gets an error, not a crash.
cl_int CL_API_CALL windows_only_entry_point() { return CL_INVALID_OPERATION; }

cl_icd_dispatch make_table() {
  cl_icd_dispatch table;
  std::memset(&table, 0, sizeof(table));
  size_t filled = 0;
#define X(name) table.name = api::guarded<#name, &api::name>, ++filled;
#define U(name, error) table.name = api::guarded<#name, &Reject<cl_api_##name, error>::call>, ++filled;
#define V(name) table.name = reinterpret_cast<void *>(&windows_only_entry_point), ++filled;
#include "manycl/runtime/dispatch_slots.def"
#undef X
#undef U
#undef V
  (void)filled;
  return table;
}

constexpr size_t count_slots() {
  size_t n = 0;
#define X(name) ++n;
#define U(name, error) ++n;
#define V(name) ++n;
#include "manycl/runtime/dispatch_slots.def"
#undef X
#undef U
#undef V
  return n;
}
static_assert(count_slots() * sizeof(void *) == sizeof(cl_icd_dispatch),
              "dispatch_slots.def does not cover every slot of cl_icd_dispatch");

const std::unordered_map<std::string_view, void *> &core_entry_points() {
  static const auto *map = [] {
    auto *m = new std::unordered_map<std::string_view, void *>();
#define X(name) (*m)[#name] = reinterpret_cast<void *>(api::guarded<#name, &api::name>);
#define U(name, error)                                                                             \
  (*m)[#name] = reinterpret_cast<void *>(api::guarded<#name, &Reject<cl_api_##name, error>::call>);
#define V(name)
#include "manycl/runtime/dispatch_slots.def"
#undef X
#undef U
#undef V
    return m;
  }();
  return *map;
}

} // namespace

const cl_icd_dispatch &dispatch_table() {
  static const cl_icd_dispatch table = make_table();
  return table;
}

void *extension_function(std::string_view name) {
#define GUARDED(fn)                                                                                \
  if (name == #fn)                                                                                 \
    return reinterpret_cast<void *>(api::guarded<#fn, &api::fn>);
  GUARDED(clIcdGetPlatformIDsKHR)
  GUARDED(clIcdSetPlatformDispatchDataKHR)
  GUARDED(clIcdGetFunctionAddressForPlatformKHR)
#undef GUARDED
  return vendor_extension_function(name);
}

void *any_function(std::string_view name) {
  auto &core = core_entry_points();
  if (auto it = core.find(name); it != core.end())
    return it->second;
  return extension_function(name);
}

} // namespace manycl::icd

const cl_icd_dispatch *manycl::rt::icd_dispatch_table() { return &manycl::icd::dispatch_table(); }

namespace manycl::api {

void *CL_API_CALL clGetExtensionFunctionAddress(const char *name) {
  return name ? icd::extension_function(name) : nullptr;
}

void *CL_API_CALL clGetExtensionFunctionAddressForPlatform(cl_platform_id platform, const char *name) {
  if (!rt::Platform::from(platform) || !name)
    return nullptr;
  return icd::extension_function(name);
}

void *CL_API_CALL clIcdGetFunctionAddressForPlatformKHR(cl_platform_id platform, const char *name) {
  if (!rt::Platform::from(platform) || !name)
    return nullptr;
  return icd::any_function(name);
}

cl_int CL_API_CALL clIcdSetPlatformDispatchDataKHR(cl_platform_id platform, void *dispatch_data) {
  rt::Platform *p = rt::Platform::from(platform);
  if (!p)
    return CL_INVALID_PLATFORM;
  p->set_dispatch_data(dispatch_data);
  return CL_SUCCESS;
}

} // namespace manycl::api
