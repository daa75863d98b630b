#include "call_profile.h"

#include "manycl/native/native.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <time.h>
#include <vector>

namespace manycl::native {

namespace {

// Calls of one kind share a key; the tile size is summed, not keyed, so that the row and
// channel splits of one layer land on one line.
std::string call_key(uint32_t fn, const void *args) {
  char key[160];
  if (fn == MCL_NATIVE_FN_CONV2D || fn == MCL_NATIVE_FN_CONV_TRANSPOSE2D) {
    mcl_conv_args a;
    std::memcpy(&a, args, sizeof a);
    const uint32_t g = std::max<uint32_t>(1, a.groups);
    std::snprintf(key, sizeof key, "%s %s k%ux%u s%u %s%u>%u%s%s", mcl_native_fn_name(fn),
                  mcl_native_dtype_name(a.input.dtype), a.kernel_h, a.kernel_w, a.stride_h,
                  g > 1 ? (g == a.input.c ? "dw " : "grouped ") : "", a.input.c, a.output.c,
                  (a.flags & MCL_CONV_WINOGRAD) ? " winograd" : "",
                  (a.flags & MCL_CONV_RESIDUAL) ? " +residual" : "");
  } else if (fn == MCL_NATIVE_FN_POOL2D) {
    mcl_pool_args a;
    std::memcpy(&a, args, sizeof a);
    const bool requantized =
        a.in_quant.scale != a.out_quant.scale || a.in_quant.zero_point != a.out_quant.zero_point;
    std::snprintf(key, sizeof key, "%s %s %s k%ux%u s%u%s", mcl_native_fn_name(fn),
                  a.kind == MCL_POOL_MAX ? "max" : "avg", mcl_native_dtype_name(a.input.dtype),
                  a.kernel_h, a.kernel_w, a.stride_h,
                  requantized && (a.input.dtype == MCL_DTYPE_U8 || a.input.dtype == MCL_DTYPE_S8)
                      ? " requantized"
                      : "");
  } else if (fn == MCL_NATIVE_FN_COPY || fn == MCL_NATIVE_FN_ACTIVATION) {
    mcl_unary_args a;
    std::memcpy(&a, args, sizeof a);
    std::snprintf(key, sizeof key, "%s %s>%s", mcl_native_fn_name(fn),
                  mcl_native_dtype_name(a.input.dtype), mcl_native_dtype_name(a.output.dtype));
  } else {
    std::snprintf(key, sizeof key, "%s", mcl_native_fn_name(fn));
  }
  return key;
}

uint64_t output_pixels(uint32_t fn, const void *args) {
  if (fn != MCL_NATIVE_FN_CONV2D && fn != MCL_NATIVE_FN_CONV_TRANSPOSE2D)
    return 0;
  mcl_conv_args a;
  std::memcpy(&a, args, sizeof a);
  return (uint64_t)a.output.h * a.output.w;
}

struct Totals {
  uint64_t calls = 0, ns = 0, cpu_ns = 0, macs = 0, pixels = 0;
};

class Profile {
public:
  void add(const std::string &key, uint64_t ns, uint64_t cpu_ns, uint64_t macs, uint64_t pixels) {
    std::lock_guard lock(mutex_);
    Totals &t = totals_[key];
    ++t.calls;
    t.ns += ns;
    t.cpu_ns += cpu_ns;
    t.macs += macs;
    t.pixels += pixels;
  }
  ~Profile() { print(); }

private:
  void print() {
    std::lock_guard lock(mutex_);
    if (totals_.empty())
      return;
    std::vector<std::pair<std::string, Totals>> rows(totals_.begin(), totals_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
    uint64_t all = 0;
    for (const auto &r : rows)
      all += r.second.ns;
    std::fprintf(stderr,
                 "MANYCL_NATIVE_PROFILE: host time of native calls, %.1f ms in all (wall: each "
                 "call's wall time; cpu: the calling thread's CPU time, which is the call's "
                 "whole CPU time with MANYCL_HOST_THREADS=1)\n%8s %8s %6s %8s %8s %8s  %s\n",
                 all / 1e6, "wall ms", "cpu ms", "%", "calls", "px/call", "GFLOP/s", "call");
    for (const auto &[key, t] : rows)
      std::fprintf(stderr, "%8.2f %8.2f %6.1f %8llu %8.0f %8.1f  %s\n", t.ns / 1e6, t.cpu_ns / 1e6,
                   100.0 * (double)t.ns / (double)std::max<uint64_t>(all, 1),
                   (unsigned long long)t.calls, (double)t.pixels / (double)t.calls,
                   t.cpu_ns ? 2.0 * (double)t.macs / (double)t.cpu_ns : 0.0, key.c_str());
  }
  std::mutex mutex_;
  std::map<std::string, Totals> totals_;
};

Profile &profile() {
  static Profile p; // destroyed (and printed) at exit
  return p;
}

} // namespace

bool call_profile_enabled() {
  static const bool enabled = [] {
    const char *v = std::getenv("MANYCL_NATIVE_PROFILE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

uint64_t call_profile_thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void call_profile_record(uint32_t fn, const void *args, uint64_t host_ns, uint64_t cpu_ns,
                         uint64_t macs) {
  profile().add(call_key(fn, args), host_ns, cpu_ns, macs, output_pixels(fn, args));
}

} // namespace manycl::native
