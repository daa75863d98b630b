// Helpers for the native compute function tests: an SPM arena, tiles placed inside larger
// buffers (halo filled with NaN / garbage so stray reads show up), random data.
#pragma once

#include "manycl/native/native.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace native_test {

inline uint16_t f2h(float f) {
  // Test-side binary16 conversion through double rounding-free path: use the library's
  // behaviour only where the test wants it; here round-to-nearest-even by construction.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const float a = std::fabs(f);
  if (std::isnan(f))
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 65520.0f)
    return (uint16_t)(sign | 0x7c00u);
  if (a < 6.103515625e-05f) { // subnormal: multiples of 2^-24
    const double q = std::nearbyint((double)a * 16777216.0);
    return (uint16_t)(sign | (uint32_t)q);
  }
  int e;
  const double m = std::frexp((double)a, &e); // a = m * 2^e, m in [0.5, 1)
  double q = std::nearbyint(m * 2048.0);      // 11 significant bits
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  const uint32_t exp = (uint32_t)(e - 1 + 15);
  if (exp >= 31)
    return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | exp << 10 | ((uint32_t)q - 1024u));
}

inline float h2f(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0)
    return (float)(s * std::ldexp((double)mant, -24));
  if (exp == 31)
    return mant ? NAN : (float)(s * INFINITY);
  return (float)(s * std::ldexp(1024.0 + mant, exp - 25));
}

// The SPM of one cluster plus a bump allocator and an exec context.
class Spm {
public:
  explicit Spm(uint64_t size = 4u << 20, uint32_t threads = 2) : bytes_(size) {
    pool_ = mcl_native_host_pool_create(threads);
    mcl_native_host_exec_init(&exec_, pool_, bytes_.data(), bytes_.size());
  }
  ~Spm() { mcl_native_host_pool_destroy(pool_); }
  Spm(const Spm &) = delete;
  Spm &operator=(const Spm &) = delete;

  uint32_t alloc(uint64_t bytes, uint32_t align = 64) {
    top_ = (top_ + align - 1) / align * align;
    const uint32_t at = (uint32_t)top_;
    top_ += bytes;
    EXPECT_LE(top_, bytes_.size()) << "test SPM exhausted";
    return at;
  }
  void reset() { top_ = 0; }
  uint8_t *base() { return bytes_.data(); }
  uint64_t size() const { return bytes_.size(); }
  mcl_native_exec &exec() { return exec_; }
  mcl_native_host_pool *pool() { return pool_; }

  template <class T> T *at(uint32_t offset) { return reinterpret_cast<T *>(bytes_.data() + offset); }

  // Runs and expects success.
  template <class Args> void run(uint32_t fn, const Args &args) {
    char msg[256] = {};
    const int rc = mcl_native_run(&exec_, fn, &args, sizeof args, msg, sizeof msg);
    ASSERT_EQ(rc, MCL_NATIVE_OK) << msg;
  }

private:
  std::vector<uint8_t> bytes_;
  uint64_t top_ = 0;
  mcl_native_host_pool *pool_ = nullptr;
  mcl_native_exec exec_{};
};

inline uint32_t esize(uint32_t dtype) { return mcl_native_dtype_size(dtype); }

// Places an h x w x c tile inside a buffer with `halo` extra pixels on every side and
// `extra_c` extra channels per pixel; fills the whole buffer with `fill` bytes first.
inline mcl_tile place_tile(Spm &spm, uint32_t h, uint32_t w, uint32_t c, uint32_t dtype,
                           uint32_t halo, uint32_t extra_c, uint8_t fill) {
  const uint32_t es = esize(dtype);
  const uint32_t ps = c + extra_c, rs = (w + 2 * halo) * ps;
  const uint64_t bytes = (uint64_t)(h + 2 * halo) * rs * es;
  const uint32_t base = spm.alloc(bytes);
  std::memset(spm.base() + base, fill, bytes);
  mcl_tile t{};
  t.offset = base + (halo * rs + halo * ps) * es;
  t.h = h;
  t.w = w;
  t.c = c;
  t.row_stride = rs;
  t.pixel_stride = ps;
  t.channel_stride = 1;
  t.dtype = dtype;
  return t;
}

inline uint8_t *tile_elem(Spm &spm, const mcl_tile &t, uint32_t y, uint32_t x, uint32_t c) {
  return spm.base() + t.offset +
         ((uint64_t)y * t.row_stride + (uint64_t)x * t.pixel_stride + (uint64_t)c * t.channel_stride) *
             esize(t.dtype);
}

// Reads / writes an element as a double (float types) or raw integer value (INT8).
inline double get(Spm &spm, const mcl_tile &t, uint32_t y, uint32_t x, uint32_t c) {
  const uint8_t *p = tile_elem(spm, t, y, x, c);
  switch (t.dtype) {
  case MCL_DTYPE_F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case MCL_DTYPE_F16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h2f(h);
  }
  case MCL_DTYPE_S8:
    return (int8_t)*p;
  default:
    return *p;
  }
}
inline void set(Spm &spm, const mcl_tile &t, uint32_t y, uint32_t x, uint32_t c, double v) {
  uint8_t *p = tile_elem(spm, t, y, x, c);
  switch (t.dtype) {
  case MCL_DTYPE_F32: {
    float f = (float)v;
    std::memcpy(p, &f, 4);
    break;
  }
  case MCL_DTYPE_F16: {
    uint16_t h = f2h((float)v);
    std::memcpy(p, &h, 2);
    break;
  }
  case MCL_DTYPE_S8:
    *p = (uint8_t)(int8_t)v;
    break;
  default:
    *p = (uint8_t)v;
  }
}

// ISAs this host can run, for running every test on each.
inline std::vector<std::string> available_isas() {
  std::vector<std::string> out;
  for (const char *name : {"generic", "avx2", "avx512"})
    if (mcl_native_set_isa(name) == MCL_NATIVE_OK)
      out.push_back(name);
  mcl_native_set_isa(out.back().c_str());
  return out;
}

// Restores the best ISA after a test that switched it.
struct IsaGuard {
  std::string best = available_isas().back();
  ~IsaGuard() { mcl_native_set_isa(best.c_str()); }
};

inline int32_t clampi(int64_t v, int32_t lo, int32_t hi) {
  return (int32_t)std::min<int64_t>(std::max<int64_t>(v, lo), hi);
}

// ONNX QLinear requantization as documented in docs/native.md.
inline int32_t requant_ref(int32_t acc, float multiplier, int32_t zp, int32_t lo, int32_t hi) {
  const double r = std::nearbyint((double)((float)acc * multiplier)); // float product, RNE
  return clampi((int64_t)r + zp, lo, hi);
}

} // namespace native_test
