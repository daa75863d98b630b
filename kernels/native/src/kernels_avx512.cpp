// AVX-512 (F + BW) kernels (this file is compiled with -mavx512f -mavx512bw -mfma -mf16c).
#include "kernels_impl.h"
#include "steps_avx2.h"
#include "winograd_impl.h"

#include <immintrin.h>

namespace {

struct Avx512Simd : Avx2Steps {
  static constexpr int W = 16;
  static constexpr int MR = 14; // 14 accumulators + panel + broadcast of 32 registers
  using VF = __m512;
  static VF zero() { return _mm512_setzero_ps(); }
  static VF load(const float *p) { return _mm512_loadu_ps(p); }
  static VF load(const uint16_t *p) {
    // The zero-masked form with every lane selected is the same instruction; GCC 12's
    // _mm512_cvtph_ps passes _mm512_undefined_ps(), which -Wuninitialized flags once inlined
    // into some callers (GCC bug 105593).
    return _mm512_maskz_cvtph_ps((__mmask16)0xffff,
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
  }
  static VF bcast(float x) { return _mm512_set1_ps(x); }
  static VF bcast(uint16_t h) { return _mm512_set1_ps(_cvtsh_ss(h)); }
  static VF fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float *p, VF x) { _mm512_storeu_ps(p, x); }
  // Epilogue steps on a block row still in its register (finish_block), in the order of
  // the epilogue_row steps: (x + bias) [+ residual], clamp, [LeakyRelu], store.
  static VF add(VF a, VF b) { return _mm512_add_ps(a, b); }
  // a > b ? a : b (b when either is NaN); the zero-masked form, as in clamp().
  static VF max(VF a, VF b) { return _mm512_maskz_max_ps((__mmask16)0xffff, a, b); }
  // max(NaN, lo) = lo, as the scalar code. The zero-masked forms with every lane selected
  // are the same instructions (GCC bug 105593, as in load()).
  static VF clamp(VF x, VF lo, VF hi) {
    const __mmask16 all = 0xffff;
    return _mm512_maskz_min_ps(all, _mm512_maskz_max_ps(all, x, lo), hi);
  }
  static VF leaky(VF x, VF alpha) {
    const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_mul_ps(x, negative, x, alpha);
  }
  // (c + bias) + residual, then the clamp, 16 lanes at once (the order of PortableSteps).
  template <class T>
  static void bias_residual_clamp_store16(const float *c, const float *bias, const T *res, float lo,
                                          float hi, T *out) {
    VF x = _mm512_add_ps(_mm512_loadu_ps(c), _mm512_loadu_ps(bias));
    x = _mm512_add_ps(x, load(res));
    store_out(out, clamp(x, _mm512_set1_ps(lo), _mm512_set1_ps(hi)));
  }
  static void store_out(float *out, VF x) { _mm512_storeu_ps(out, x); }
  static void store_out(uint16_t *out, VF x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  // n binary16 values -> float, 16 per instruction (binary16 input tiles are widened whole).
  static void widen_halves(const uint16_t *p, uint32_t n, float *out) {
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i, load(p + i));
    Avx2Steps::widen_halves(p + i, n - i, out + i);
  }
  static void max_halves(const uint16_t *p, uint32_t n, float *acc) {
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(acc + i, _mm512_max_ps(load(p + i), _mm512_loadu_ps(acc + i)));
    Avx2Steps::max_halves(p + i, n - i, acc + i);
  }
};

// Requantizing INT8 add, 16 elements per step: the same IEEE operations in the same order as
// int8_add_one (which does the tail), so the same bytes as every other ISA.
void int8_add_avx512(const Int8AddJob &j) {
  const __m512 a_scale = _mm512_set1_ps(j.a_scale), b_scale = _mm512_set1_ps(j.b_scale);
  const __m512 out_scale = _mm512_set1_ps(j.out_scale);
  const __m512 act_lo = _mm512_set1_ps(j.act_lo), act_hi = _mm512_set1_ps(j.act_hi);
  const __m512 q_lo = _mm512_set1_ps(j.q_lo), q_hi = _mm512_set1_ps(j.q_hi);
  const __m512i a_zero = _mm512_set1_epi32(j.a_zero), b_zero = _mm512_set1_epi32(j.b_zero);
  const __m512i out_zero = _mm512_set1_epi32(j.out_zero);
  auto widen = [&](const uint8_t *p) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    return j.is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
  };
  uint32_t i = 0;
  for (; i + 16 <= j.n; i += 16) {
    __m512 fa = _mm512_cvtepi32_ps(_mm512_sub_epi32(widen(j.a + i), a_zero));
    __m512 fb = _mm512_cvtepi32_ps(_mm512_sub_epi32(widen(j.b + i), b_zero));
    fa = _mm512_mul_ps(fa, a_scale);
    fb = _mm512_mul_ps(fb, b_scale);
    __asm__("" : "+v"(fa), "+v"(fb)); // no FMA contraction: the products are rounded
    __m512 v = _mm512_add_ps(fa, fb);
    // max/min return the second operand on NaN or equality, like `v > lo ? v : lo`.
    v = _mm512_min_ps(_mm512_max_ps(v, act_lo), act_hi);
    __m512 r = _mm512_div_ps(v, out_scale);
    r = _mm512_min_ps(_mm512_max_ps(r, q_lo), q_hi);
    // cvtps rounds to nearest even (the default mode, as std::nearbyint); the result is inside
    // [qmin, qmax] after the clamp, so truncating to bytes never changes a value.
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(r), out_zero);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(j.out + i), _mm512_cvtepi32_epi8(q));
  }
  for (; i < j.n; ++i)
    j.out[i] = int8_add_one(j, i);
}

const IsaKernels kAvx512 = {"avx512",
                            Avx512Simd::MR,
                            conv_float<Avx512Simd>,
                            depthwise<Avx512Simd>,
                            winograd<Avx512Simd>,
                            winograd_weights<Avx512Simd>,
                            int8_add_avx512,
                            Avx512Simd::widen_halves,
                            Avx512Simd::narrow_halves,
                            Avx512Simd::max_halves,
                            pool_pixels<Avx512Simd, float>,
                            pool_pixels<Avx512Simd, uint16_t>};

} // namespace

namespace manycl::native {
const IsaKernels *avx512_kernels() {
  return &kAvx512;
}
} // namespace manycl::native
