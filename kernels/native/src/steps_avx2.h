// AVX2 versions of the epilogue / packing steps (included by the AVX2 and AVX-512 units,
// whose flags both enable AVX2). Bit-identical to PortableSteps: same float operations,
// cvtps_epi32 rounds to nearest even like std::nearbyint in the default rounding mode.
#pragma once

#include "kernels_impl.h"

#include <immintrin.h>

namespace {

struct Avx2Steps {
  // n binary16 values -> float, 8 per instruction; the tail one at a time (never reads past n).
  static void widen_halves(const uint16_t *p, uint32_t n, float *out) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(out + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i))));
    for (; i < n; ++i)
      out[i] = _cvtsh_ss(p[i]);
  }
  static void narrow_halves(const float *p, uint32_t n, uint16_t *out) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
      store8(out + i, _mm256_loadu_ps(p + i));
    for (; i < n; ++i)
      out[i] = _cvtss_sh(p[i], _MM_FROUND_TO_NEAREST_INT);
  }
  // max_ps(v, acc) is `acc < v ? v : acc` (the second operand on NaN): std::max(acc, v).
  static void max_halves(const uint16_t *p, uint32_t n, float *acc) {
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(
          acc + i,
          _mm256_max_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + i))),
                        _mm256_loadu_ps(acc + i)));
    for (; i < n; ++i)
      acc[i] = std::max(acc[i], _cvtsh_ss(p[i]));
  }
  static void store8(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void store8(uint16_t *p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  template <class T>
  static void bias_clamp_store16(const float *c, const float *bias, float lo, float hi, T *out) {
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int v = 0; v < 2; ++v) {
      __m256 x = _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), _mm256_loadu_ps(bias + 8 * v));
      x = _mm256_min_ps(_mm256_max_ps(x, vlo), vhi); // max(NaN, lo) = lo, as the scalar code
      store8(out + 8 * v, x);
    }
  }
  static __m256 load8(const float *p) { return _mm256_loadu_ps(p); }
  static __m256 load8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  // (c + bias) + residual, then the clamp: the scalar order, so FP32 gives the same bits.
  template <class T>
  static void bias_residual_clamp_store16(const float *c, const float *bias, const T *res, float lo,
                                          float hi, T *out) {
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (int v = 0; v < 2; ++v) {
      __m256 x = _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), _mm256_loadu_ps(bias + 8 * v));
      x = _mm256_add_ps(x, load8(res + 8 * v));
      x = _mm256_min_ps(_mm256_max_ps(x, vlo), vhi);
      store8(out + 8 * v, x);
    }
  }
  // The clamp, then LeakyRelu as apply_activation computes it (v < 0 ? alpha * v : v).
  template <class T>
  static void bias_leaky_store16(const float *c, const float *bias, float lo, float hi, float alpha,
                                 T *out) {
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const __m256 va = _mm256_set1_ps(alpha), zero = _mm256_setzero_ps();
    for (int v = 0; v < 2; ++v) {
      __m256 x = _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), _mm256_loadu_ps(bias + 8 * v));
      x = _mm256_min_ps(_mm256_max_ps(x, vlo), vhi);
      x = _mm256_blendv_ps(x, _mm256_mul_ps(x, va), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
      store8(out + 8 * v, x);
    }
  }
  static void store16(uint8_t *out, __m128i lo, __m128i hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm_packus_epi16(lo, hi));
  }
  static void store16(int8_t *out, __m128i lo, __m128i hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm_packs_epi16(lo, hi));
  }
  template <class TO>
  static void requant_store16(const int32_t *c, const int32_t *bias, const float *mult, float lo,
                              float hi, int32_t zp, TO *out) {
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const __m256i vzp = _mm256_set1_epi32(zp);
    __m256i r[2];
    for (int v = 0; v < 2; ++v) {
      const __m256i acc =
          _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(c + 8 * v)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bias + 8 * v)));
      __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(mult + 8 * v));
      f = _mm256_min_ps(_mm256_max_ps(f, vlo), vhi);
      r[v] = _mm256_add_epi32(_mm256_cvtps_epi32(f), vzp);
    }
    // Values are inside the output range already: packing never saturates.
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(r[0], r[1]), 0xd8);
    store16(out, _mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  }
  static __m256i widen32(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
  }
  static __m256i widen32(const int8_t *p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
  }
};

} // namespace
