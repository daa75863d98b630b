// AVX-512 VNNI INT8 kernels on byte weights (compiled with -mavx512f -mavx512bw
// -mavx512vnni -mfma -mf16c; chosen only where cpuid reports AVX512_VNNI). vpdpbusd multiplies
// the u8 activation bytes by the s8 weight bytes and adds each group of four products into an
// INT32 lane without saturation (the non-"s" form): exact, wrapping like the other ISAs.
#include "int8_conv_impl.h"
#include "steps_avx2.h"

#include <immintrin.h>

namespace {

struct Avx512VnniInt8 : Avx2Steps {
  static constexpr int MR = 14; // 14 accumulators + weights + broadcast of 32 registers
  using AElem = uint8_t;
  template <class TI> static void pack_row(const TI *src, uint32_t n, uint8_t *dst) {
    const __m512i flip = _mm512_set1_epi8(std::is_same_v<TI, int8_t> ? (char)0x80 : 0);
    for (uint32_t k = 0; k < n; k += 64) {
      const __mmask64 m = n - k >= 64 ? ~0ull : (1ull << (n - k)) - 1;
      _mm512_mask_storeu_epi8(dst + k, m,
                              _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + k), flip));
    }
  }
  template <int R>
  static void ukernel(uint32_t quads, const uint8_t *a, size_t a_stride, const int8_t *w,
                      int32_t (*c)[16]) {
    __m512i acc[R];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
      acc[i] = _mm512_setzero_si512();
    for (uint32_t p = 0; p < quads; ++p) {
      const __m512i b = _mm512_loadu_si512(w + (size_t)p * 64);
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        int32_t q;
        std::memcpy(&q, a + (size_t)i * a_stride + 4 * p, 4);
        acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(q), b);
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
      _mm512_storeu_si512(c[i], acc[i]);
  }
  static __m512i widen32x16(const uint8_t *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  static __m512i widen32x16(const int8_t *p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  template <class TI>
  static void depthwise_block(const TI *in, const int32_t *const *tabs, uint32_t taps,
                              const int8_t *w, uint32_t w_stride, int32_t zp, const int32_t *zw,
                              uint32_t n, int32_t (*c)[16]) {
    if (n != 16)
      return PortableDepthwise::depthwise_block(in, tabs, taps, w, w_stride, zp, zw, n, c);
    const __m512i vzp = _mm512_set1_epi32(zp), z = _mm512_loadu_si512(zw);
    __m512i acc[4];
    for (int i = 0; i < 4; ++i)
      acc[i] = _mm512_setzero_si512();
    for (uint32_t t = 0; t < taps; ++t) {
      const __m512i wt = _mm512_sub_epi32(widen32x16(w + (size_t)t * w_stride), z);
      for (int i = 0; i < 4; ++i)
        acc[i] = _mm512_add_epi32(
            acc[i], _mm512_mullo_epi32(_mm512_sub_epi32(widen32x16(in + tabs[i][t]), vzp), wt));
    }
    for (int i = 0; i < 4; ++i)
      _mm512_storeu_si512(c[i], acc[i]);
  }
};

const Int8Kernels kAvx512VnniInt8 = {"avx512", int8_conv<Avx512VnniInt8>,
                                     int8_depthwise<Avx512VnniInt8>, nullptr};

} // namespace

namespace manycl::native {
const Int8Kernels *int8_avx512_vnni_kernels() {
  return &kAvx512VnniInt8;
}
} // namespace manycl::native
