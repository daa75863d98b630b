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
struct PrintVal {
  int n = 1; // number of components
  bool isFloat = false;
  bool isPtr = false;
  double f[16] = {};
  long i[16] = {};
  const void *p = nullptr;
  bool vec = false;
  uint64_t raw = 0; // bits of a scalar (small vectors arrive ABI-coerced)
};

template <class T> void readElements(const void *p, int n, PrintVal &v, bool flt) {
  for (int k = 0; k < n; ++k) {
    T x;
    std::memcpy(&x, static_cast<const char *>(p) + k * sizeof(T), sizeof(T));
    v.f[k] = static_cast<double>(x);
    v.i[k] = flt ? static_cast<long>(static_cast<double>(x)) : static_cast<long>(x);
  }
}

// Reads one variadic argument described by `d` (see wgfunc.cpp).
bool readArg(va_list &ap, const char *&d, PrintVal &v) {
  if (!*d)
    return false;
  if (*d == 'v') {
    ++d;
    int n = 0;
    while (*d >= '0' && *d <= '9')
      n = n * 10 + (*d++ - '0');
    char e = *d ? *d++ : '?';
    if (*d == ';')
      ++d;
    if (n < 1 || n > 16)
      return false;
    v.n = n;
    v.vec = true;
    // Vectors arrive by address (wgfunc.cpp); half vectors were widened to float.
    const void *p = va_arg(ap, const void *);
    switch (e) {
    case 'c':
      readElements<int8_t>(p, n, v, false);
      break;
    case 's':
      readElements<int16_t>(p, n, v, false);
      break;
    case 'i':
      readElements<int32_t>(p, n, v, false);
      break;
    case 'l':
      readElements<int64_t>(p, n, v, false);
      break;
    case 'f':
      v.isFloat = true;
      readElements<float>(p, n, v, true);
      break;
    case 'd':
      v.isFloat = true;
      readElements<double>(p, n, v, true);
      break;
    default:
      return false; // half vectors are not supported
    }
    return true;
  }
  char c = *d++;
  if (*d == ';')
    ++d;
  switch (c) {
  case 'i':
    v.i[0] = va_arg(ap, int);
    v.f[0] = double(v.i[0]);
    v.raw = uint32_t(v.i[0]);
    return true;
  case 'l':
    v.i[0] = va_arg(ap, long);
    v.f[0] = double(v.i[0]);
    v.raw = uint64_t(v.i[0]);
    return true;
  case 'd':
    v.isFloat = true;
    v.f[0] = va_arg(ap, double);
    v.i[0] = long(v.f[0]);
    std::memcpy(&v.raw, &v.f[0], 8);
    return true;
  case 'p':
    v.isPtr = true;
    v.p = va_arg(ap, void *);
    v.i[0] = reinterpret_cast<long>(v.p);
    return true;
  default:
    return false;
  }
}
} // namespace

static void appendf(std::string &out, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
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

/// OpenCL printf. `types` lists the actual types of the variadic arguments.
extern "C" int __manycl_printf(const char *fmt, const char *types, ...) {
  std::string out;
  va_list ap;
  va_start(ap, types);
  const char *d = types ? types : "";
  const char *p = fmt;
  int rc = 0;
  while (*p) {
    if (*p != '%') {
      out += *p++;
      continue;
    }
    if (p[1] == '%') {
      out += '%';
      p += 2;
      continue;
    }
    const char *start = p++;
    std::string flags, width, prec;
    while (*p && std::strchr("-+ #0", *p))
      flags += *p++;
    while (*p >= '0' && *p <= '9')
      width += *p++;
    if (*p == '.') {
      prec += *p++;
      while (*p >= '0' && *p <= '9')
        prec += *p++;
    }
    int vecN = 0;
    if (*p == 'v') {
      ++p;
      while (*p >= '0' && *p <= '9')
        vecN = vecN * 10 + (*p++ - '0');
    }
    std::string len;
    if (p[0] == 'h' && p[1] == 'h') {
      len = "hh";
      p += 2;
    } else if (p[0] == 'h' && p[1] == 'l') {
      len = "hl";
      p += 2;
    } else if (p[0] == 'h') {
      len = "h";
      p += 1;
    } else if (p[0] == 'l') {
      len = "l";
      p += 1;
    }
    char conv = *p;
    if (!conv) {
      out.append(start);
      break;
    }
    ++p;
    std::string spec = "%" + flags + width + prec;
    PrintVal v;
    if (conv == 's' || conv == 'p') {
      if (!readArg(ap, d, v)) {
        rc = -1;
        break;
      }
      if (conv == 's')
        appendf(out, (spec + "s").c_str(), v.p ? static_cast<const char *>(v.p) : "(null)");
      else
        appendf(out, (spec + "p").c_str(), v.p);
      continue;
    }
    bool isInt = std::strchr("diouxXc", conv) != nullptr;
    bool isFlt = std::strchr("fFeEgGaA", conv) != nullptr;
    if (!isInt && !isFlt) {
      out.append(start, static_cast<size_t>(p - start));
      continue;
    }
    if (!readArg(ap, d, v)) {
      rc = -1;
      break;
    }
    int n = vecN ? vecN : 1;
    bool sgn = conv == 'd' || conv == 'i';
    int bits = len == "hh" ? 8 : len == "h" ? 16 : len == "l" ? 64 : 32;
    if (vecN > 0 && !v.vec) {
      // A small vector passed as an integer/double: unpack its bytes.
      int es = bits / 8;
      unsigned char b[8];
      std::memcpy(b, &v.raw, 8);
      for (int k = 0; k < n && k < 16; ++k) {
        if ((k + 1) * es > 8) {
          v.i[k] = 0;
          v.f[k] = 0;
          continue;
        }
        if (isFlt && es == 4) {
          float f;
          std::memcpy(&f, b + k * es, 4);
          v.f[k] = f;
        } else if (es == 1)
          v.i[k] = static_cast<signed char>(b[k]);
        else if (es == 2) {
          short x;
          std::memcpy(&x, b + 2 * k, 2);
          v.i[k] = x;
        } else if (es == 4) {
          int x;
          std::memcpy(&x, b + 4 * k, 4);
          v.i[k] = x;
        } else {
          long x;
          std::memcpy(&x, b, 8);
          v.i[k] = x;
        }
      }
    }
    for (int k = 0; k < n && k < 16; ++k) {
      if (k)
        out += ',';
      if (isFlt) {
        appendf(out, (spec + conv).c_str(), v.f[k]);
      } else if (conv == 'c') {
        appendf(out, (spec + "c").c_str(), int(v.i[k]));
      } else {
        long x = v.i[k];
        if (bits == 8)
          x = sgn ? long(static_cast<signed char>(x)) : long(static_cast<unsigned char>(x));
        else if (bits == 16)
          x = sgn ? long(static_cast<short>(x)) : long(static_cast<unsigned short>(x));
        else if (bits == 32)
          x = sgn ? long(static_cast<int>(x)) : long(static_cast<unsigned>(x));
        appendf(out, (spec + "l" + conv).c_str(), x);
      }
    }
  }
  va_end(ap);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  fwrite(out.data(), 1, out.size(), stdout);
  fflush(stdout);
  return rc;
}

// ---------------------------------------------------------------- async copy
extern "C" void manycl_default_async_copy(void *, void *dst, const void *src, size_t es, size_t n,
                                          size_t ss, size_t ds) {
  if (ss == 1 && ds == 1) {
    std::memmove(dst, src, es * n);
    return;
  }
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(d + i * ds * es, s + i * ss * es, es);
}

/// Called (once per group, by local linear id 0) from the builtin library.
extern "C" void __manycl_async_copy(WiCtx *ctx, void *dst, const void *src, size_t es, size_t n,
                                    size_t ss, size_t ds) {
  auto hook = reinterpret_cast<AsyncCopyHook>(ctx->slot[SlotAsyncHook]);
  if (!hook)
    hook = manycl_default_async_copy;
  hook(reinterpret_cast<void *>(ctx->slot[SlotAsyncUser]), dst, src, es, n, ss, ds);
}

// ---------------------------------------------------------------- symbols
static const char *const kLibm[] = {
    // float
    "sinf",
    "cosf",
    "tanf",
    "asinf",
    "acosf",
    "atanf",
    "atan2f",
    "sinhf",
    "coshf",
    "tanhf",
    "asinhf",
    "acoshf",
    "atanhf",
    "expf",
    "exp2f",
    "exp10f",
    "expm1f",
    "logf",
    "log2f",
    "log10f",
    "log1pf",
    "powf",
    "cbrtf",
    "erff",
    "erfcf",
    "tgammaf",
    "lgammaf",
    "lgammaf_r",
    "fmodf",
    "remainderf",
    "remquof",
    "hypotf",
    "sqrtf",
    "fmaf",
    "floorf",
    "ceilf",
    "truncf",
    "roundf",
    "rintf",
    "nearbyintf",
    "ldexpf",
    "frexpf",
    "modff",
    "nextafterf",
    "fdimf",
    "logbf",
    "ilogbf",
    "sincosf",
    "fabsf",
    "fminf",
    "fmaxf",
    "copysignf",
    "scalbnf",
    // double
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "exp",
    "exp2",
    "exp10",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "pow",
    "cbrt",
    "erf",
    "erfc",
    "tgamma",
    "lgamma",
    "lgamma_r",
    "fmod",
    "remainder",
    "remquo",
    "hypot",
    "sqrt",
    "fma",
    "floor",
    "ceil",
    "trunc",
    "round",
    "rint",
    "nearbyint",
    "ldexp",
    "frexp",
    "modf",
    "nextafter",
    "fdim",
    "logb",
    "ilogb",
    "sincos",
    "fabs",
    "fmin",
    "fmax",
    "copysign",
    "scalbn",
    // memory
    "memcpy",
    "memmove",
    "memset",
    "memcmp",
};

void *lookupHostSymbol(std::string_view name) {
  static const std::map<std::string, void *, std::less<>> table = [] {
    std::map<std::string, void *, std::less<>> t;
    // libm/libc are dependencies of this library: look them up by handle, so
    // that it works even when the ICD was dlopen()ed with RTLD_LOCAL.
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (!libm)
      libm = dlopen("libm.so.6", RTLD_NOW);
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    for (const char *n : kLibm) {
      void *p = libm ? dlsym(libm, n) : nullptr;
      if (!p && libc)
        p = dlsym(libc, n);
      if (!p)
        p = dlsym(RTLD_DEFAULT, n);
      if (p)
        t[n] = p;
    }
    t["__manycl_printf"] = reinterpret_cast<void *>(&__manycl_printf);
    t["__manycl_async_copy"] = reinterpret_cast<void *>(&__manycl_async_copy);
    t["__manycl_async_copy_g2l"] = reinterpret_cast<void *>(&__manycl_async_copy);
    t["__manycl_async_copy_l2g"] = reinterpret_cast<void *>(&__manycl_async_copy);
    // Half conversions without a native instruction (double -> half, or float -> half on a
    // host without F16C) are libgcc calls; a C host program (Python) may not have loaded it.
    void *libgcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!libgcc)
      libgcc = dlopen("libgcc_s.so.1", RTLD_NOW);
    for (const char *n :
         {"__extendhfsf2", "__truncsfhf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee"}) {
      void *p = libgcc ? dlsym(libgcc, n) : nullptr;
      if (!p)
        p = dlsym(RTLD_DEFAULT, n);
      if (p)
        t[n] = p;
    }
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
    return Status::error(ErrorCode::Internal,
                         "cannot load native library '" + path + "': " + (e ? e : "?"));
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
    if (void *p = kv.second(name))
      return p;
  return nullptr;
}

} // namespace manycl::compiler
