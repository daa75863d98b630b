// Host functions the JIT'd kernels may call: the fixed, explicit symbol set
// (libm, memory intrinsics, printf, async copies, barrier), plus the
// native-function (mppa_native) providers.
#include "internal.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>

namespace manycl::compiler::detail {

// ---------------------------------------------------------------- printf
namespace {
typedef char v4c __attribute__((vector_size(4)));
typedef char v8c __attribute__((vector_size(8)));
typedef char v16c __attribute__((vector_size(16)));
typedef short v2s __attribute__((vector_size(4)));
typedef short v4s __attribute__((vector_size(8)));
typedef short v8s __attribute__((vector_size(16)));
typedef short v16s __attribute__((vector_size(32)));
typedef int v2i __attribute__((vector_size(8)));
typedef int v4i __attribute__((vector_size(16)));
typedef int v8i __attribute__((vector_size(32)));
typedef int v16i __attribute__((vector_size(64)));
typedef long v2l __attribute__((vector_size(16)));
typedef long v4l __attribute__((vector_size(32)));
typedef long v8l __attribute__((vector_size(64)));
typedef long v16l __attribute__((vector_size(128)));
typedef float v2f __attribute__((vector_size(8)));
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
typedef double v16d __attribute__((vector_size(128)));

template <class V, int N, class E> void readVec(va_list &ap, E *out) {
  V v = va_arg(ap, V);
  for (int i = 0; i < N; ++i) out[i] = static_cast<E>(v[i]);
}
} // namespace

static void appendf(std::string &out, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out.append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  out.append(big.data(), static_cast<size_t>(n));
}

extern "C" int __manycl_printf(const char *fmt, ...) {
  std::string out;
  va_list ap;
  va_start(ap, fmt);
  const char *p = fmt;
  while (*p) {
    if (*p != '%') { out += *p++; continue; }
    if (p[1] == '%') { out += '%'; p += 2; continue; }
    const char *start = p++;
    std::string flags;
    while (*p && std::strchr("-+ #0", *p)) flags += *p++;
    std::string width, prec;
    while (*p >= '0' && *p <= '9') width += *p++;
    if (*p == '.') { prec += *p++; while (*p >= '0' && *p <= '9') prec += *p++; }
    int vecN = 0;
    if (*p == 'v') {
      ++p;
      while (*p >= '0' && *p <= '9') vecN = vecN * 10 + (*p++ - '0');
    }
    std::string len;
    if (p[0] == 'h' && p[1] == 'h') { len = "hh"; p += 2; }
    else if (p[0] == 'h' && p[1] == 'l') { len = "hl"; p += 2; }
    else if (p[0] == 'h') { len = "h"; p += 1; }
    else if (p[0] == 'l') { len = "l"; p += 1; }
    char conv = *p;
    if (!conv) { out.append(start); break; }
    ++p;
    std::string spec = "%" + flags + width + prec;
    bool isInt = std::strchr("diouxXc", conv) != nullptr;
    bool isFlt = std::strchr("fFeEgGaA", conv) != nullptr;
    if (vecN == 0) {
      if (conv == 's') { appendf(out, (spec + "s").c_str(), va_arg(ap, const char *)); continue; }
      if (conv == 'p') { appendf(out, (spec + "p").c_str(), va_arg(ap, void *)); continue; }
      if (isInt) {
        bool sgn = conv == 'd' || conv == 'i';
        if (len == "l") {
          long v = va_arg(ap, long);
          appendf(out, (spec + "l" + conv).c_str(), v);
        } else {
          int v = va_arg(ap, int);
          if (len == "hh") v = sgn ? (int)(signed char)v : (int)(unsigned char)v;
          else if (len == "h") v = sgn ? (int)(short)v : (int)(unsigned short)v;
          appendf(out, (spec + conv).c_str(), v);
        }
        continue;
      }
      if (isFlt) { appendf(out, (spec + conv).c_str(), va_arg(ap, double)); continue; }
      out.append(start, static_cast<size_t>(p - start));
      continue;
    }
    // vector
    if (vecN != 2 && vecN != 3 && vecN != 4 && vecN != 8 && vecN != 16) {
      out.append(start, static_cast<size_t>(p - start));
      continue;
    }
    int storeN = vecN == 3 ? 4 : vecN;
    if (isFlt) {
      double e[16];
      if (len == "l") {
        switch (storeN) {
        case 2: readVec<v2d, 2>(ap, e); break;
        case 4: readVec<v4d, 4>(ap, e); break;
        case 8: readVec<v8d, 8>(ap, e); break;
        default: readVec<v16d, 16>(ap, e); break;
        }
      } else {
        switch (storeN) {
        case 2: readVec<v2f, 2>(ap, e); break;
        case 4: readVec<v4f, 4>(ap, e); break;
        case 8: readVec<v8f, 8>(ap, e); break;
        default: readVec<v16f, 16>(ap, e); break;
        }
      }
      for (int i = 0; i < vecN; ++i) {
        if (i) out += ',';
        appendf(out, (spec + conv).c_str(), e[i]);
      }
    } else if (isInt) {
      long e[16];
      bool sgn = conv == 'd' || conv == 'i';
      int bits = len == "hh" ? 8 : len == "h" ? 16 : len == "l" ? 64 : 32;
      if (bits == 8) {
        switch (storeN) {
        case 2: { v2s t = va_arg(ap, v2s); char c[4]; std::memcpy(c, &t, 4); for (int i = 0; i < 2; ++i) e[i] = c[i]; break; }
        case 4: readVec<v4c, 4>(ap, e); break;
        case 8: readVec<v8c, 8>(ap, e); break;
        default: readVec<v16c, 16>(ap, e); break;
        }
      } else if (bits == 16) {
        switch (storeN) {
        case 2: readVec<v2s, 2>(ap, e); break;
        case 4: readVec<v4s, 4>(ap, e); break;
        case 8: readVec<v8s, 8>(ap, e); break;
        default: readVec<v16s, 16>(ap, e); break;
        }
      } else if (bits == 32) {
        switch (storeN) {
        case 2: readVec<v2i, 2>(ap, e); break;
        case 4: readVec<v4i, 4>(ap, e); break;
        case 8: readVec<v8i, 8>(ap, e); break;
        default: readVec<v16i, 16>(ap, e); break;
        }
      } else {
        switch (storeN) {
        case 2: readVec<v2l, 2>(ap, e); break;
        case 4: readVec<v4l, 4>(ap, e); break;
        case 8: readVec<v8l, 8>(ap, e); break;
        default: readVec<v16l, 16>(ap, e); break;
        }
      }
      for (int i = 0; i < vecN; ++i) {
        if (i) out += ',';
        long v = e[i];
        if (!sgn) {
          if (bits == 8) v = (unsigned char)v;
          else if (bits == 16) v = (unsigned short)v;
          else if (bits == 32) v = (unsigned int)v;
        } else {
          if (bits == 8) v = (signed char)v;
          else if (bits == 16) v = (short)v;
          else if (bits == 32) v = (int)v;
        }
        appendf(out, (spec + "l" + conv).c_str(), v);
      }
    } else {
      out.append(start, static_cast<size_t>(p - start));
    }
  }
  va_end(ap);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  fwrite(out.data(), 1, out.size(), stdout);
  fflush(stdout);
  return 0;
}

// ---------------------------------------------------------------- async copy
extern "C" void manycl_default_async_copy(void *, void *dst, const void *src, size_t es,
                                          size_t n, size_t ss, size_t ds) {
  if (ss == 1 && ds == 1) {
    std::memmove(dst, src, es * n);
    return;
  }
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  for (size_t i = 0; i < n; ++i) std::memcpy(d + i * ds * es, s + i * ss * es, es);
}

/// Called (once per group, by local linear id 0) from the builtin library.
extern "C" void __manycl_async_copy(WiCtx *ctx, void *dst, const void *src, size_t es,
                                    size_t n, size_t ss, size_t ds) {
  auto hook = reinterpret_cast<AsyncCopyHook>(ctx->slot[SlotAsyncHook]);
  if (!hook) hook = manycl_default_async_copy;
  hook(reinterpret_cast<void *>(ctx->slot[SlotAsyncUser]), dst, src, es, n, ss, ds);
}

// ---------------------------------------------------------------- symbols
static const char *const kLibm[] = {
    // float
    "sinf", "cosf", "tanf", "asinf", "acosf", "atanf", "atan2f", "sinhf", "coshf", "tanhf",
    "asinhf", "acoshf", "atanhf", "expf", "exp2f", "exp10f", "expm1f", "logf", "log2f",
    "log10f", "log1pf", "powf", "cbrtf", "erff", "erfcf", "tgammaf", "lgammaf", "lgammaf_r",
    "fmodf", "remainderf", "remquof", "hypotf", "sqrtf", "fmaf", "floorf", "ceilf", "truncf",
    "roundf", "rintf", "nearbyintf", "ldexpf", "frexpf", "modff", "nextafterf", "fdimf",
    "logbf", "ilogbf", "sincosf", "fabsf", "fminf", "fmaxf", "copysignf", "scalbnf",
    // double
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p",
    "pow", "cbrt", "erf", "erfc", "tgamma", "lgamma", "lgamma_r", "fmod", "remainder",
    "remquo", "hypot", "sqrt", "fma", "floor", "ceil", "trunc", "round", "rint",
    "nearbyint", "ldexp", "frexp", "modf", "nextafter", "fdim", "logb", "ilogb", "sincos",
    "fabs", "fmin", "fmax", "copysign", "scalbn",
    // memory
    "memcpy", "memmove", "memset", "memcmp",
};

void *lookupHostSymbol(std::string_view name) {
  static const std::map<std::string, void *, std::less<>> table = [] {
    std::map<std::string, void *, std::less<>> t;
    for (const char *n : kLibm) {
      if (void *p = dlsym(RTLD_DEFAULT, n)) t[n] = p;
    }
    t["printf"] = reinterpret_cast<void *>(&__manycl_printf);
    t["__manycl_printf"] = reinterpret_cast<void *>(&__manycl_printf);
    t["__manycl_async_copy"] = reinterpret_cast<void *>(&__manycl_async_copy);
    t["__manycl_barrier"] = reinterpret_cast<void *>(&__manycl_barrier);
    return t;
  }();
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

} // namespace manycl::compiler::detail

// ---------------------------------------------------------------- natives
namespace manycl::compiler {

namespace {
struct NativeRegistry {
  std::mutex mu;
  int next = 1;
  std::map<int, NativeResolver> resolvers;
};
NativeRegistry &natives() {
  static NativeRegistry *r = new NativeRegistry; // never destroyed (used at exit)
  return *r;
}
} // namespace

int addNativeResolver(NativeResolver r) {
  auto &n = natives();
  std::lock_guard<std::mutex> l(n.mu);
  int id = n.next++;
  n.resolvers[id] = std::move(r);
  return id;
}

void removeNativeResolver(int id) {
  auto &n = natives();
  std::lock_guard<std::mutex> l(n.mu);
  n.resolvers.erase(id);
}

Status addNativeLibrary(const std::string &path) {
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return Status::error(ErrorCode::Internal, "cannot load native library '" + path + "': " + (e ? e : "?"));
  }
  addNativeResolver([h](std::string_view name) -> void * {
    std::string n(name);
    return dlsym(h, n.c_str());
  });
  return Status::success();
}

void *resolveNative(std::string_view name) {
  auto &n = natives();
  std::lock_guard<std::mutex> l(n.mu);
  for (auto &kv : n.resolvers)
    if (void *p = kv.second(name)) return p;
  return nullptr;
}

} // namespace manycl::compiler
