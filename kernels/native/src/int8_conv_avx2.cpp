// AVX2 INT8 kernels on byte weights (compiled with -mavx2 -mfma -mf16c). No saturating step:
// the weight bytes are sign-extended to INT16 (vpmovsxbw) and the activation bytes widened to
// INT16 u values, so vpmaddwd's products (|u*w| <= 255*128) and pair sums are exact; the
// saturating u8 x s8 vpmaddubsw (pair sums up to 65280 > 32767) is not used.
#include "int8_conv_impl.h"
#include "steps_avx2.h"

#include <immintrin.h>

namespace {

struct Avx2Int8 : Avx2Steps {
  static constexpr int MR = 6; // 6 rows x 2 accumulators + 2 weight vectors + 1 broadcast
  using AElem = int16_t;
  template <class TI> static void pack_row(const TI *src, uint32_t n, int16_t *dst) {
    const __m128i flip = _mm_set1_epi8(std::is_same_v<TI, int8_t> ? (char)0x80 : 0);
    uint32_t k = 0;
    for (; k + 16 <= n; k += 16) {
      const __m128i b =
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + k)), flip);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + k), _mm256_cvtepu8_epi16(b));
    }
    for (; k < n; ++k)
      dst[k] = unsigned_byte(src[k]);
  }
  // Half a panel (8 channels) at a time. A quad of one row, broadcast as 64 bits (u0..u3),
  // against 4 channels' quads sign-extended to INT16: vpmaddwd gives per channel two partial
  // sums (q0+q1, q2+q3) in adjacent INT32 lanes, added pairwise at the end (vphaddd).
  template <int R>
  static void ukernel(uint32_t quads, const int16_t *a, size_t a_stride, const int8_t *w,
                      int32_t (*c)[16]) {
    for (int h = 0; h < 2; ++h) {
      __m256i acc[R][2];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i)
        acc[i][0] = acc[i][1] = _mm256_setzero_si256();
      const int8_t *wh = w + h * 32;
      for (uint32_t p = 0; p < quads; ++p) {
        const int8_t *wp = wh + (size_t)p * 64;
        const __m256i w0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(wp)));
        const __m256i w1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(wp + 16)));
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          const __m256i ai = _mm256_broadcastq_epi64(
              _mm_loadl_epi64(reinterpret_cast<const __m128i *>(a + (size_t)i * a_stride + 4 * p)));
          acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(ai, w0));
          acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(ai, w1));
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        // [c0 c0 c1 c1 | c2 c2 c3 c3] and [c4 ..]: hadd -> [c0 c1 c4 c5 | c2 c3 c6 c7].
        const __m256i s = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][0], acc[i][1]), 0xd8);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(c[i] + h * 8), s);
      }
    }
  }
  template <class TI>
  static void depthwise_block(const TI *in, const int32_t *const *tabs, uint32_t taps,
                              const int8_t *w, uint32_t w_stride, int32_t zp, const int32_t *zw,
                              uint32_t n, int32_t (*c)[16]) {
    if (n != 16)
      return PortableDepthwise::depthwise_block(in, tabs, taps, w, w_stride, zp, zw, n, c);
    const __m256i vzp = _mm256_set1_epi32(zp);
    const __m256i z0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(zw));
    const __m256i z1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(zw + 8));
    __m256i acc[4][2];
    for (int i = 0; i < 4; ++i)
      acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (uint32_t t = 0; t < taps; ++t) {
      const int8_t *wt = w + (size_t)t * w_stride;
      const __m256i w0 = _mm256_sub_epi32(
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(wt))), z0);
      const __m256i w1 = _mm256_sub_epi32(
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(wt + 8))), z1);
      for (int i = 0; i < 4; ++i) {
        const TI *p = in + tabs[i][t];
        acc[i][0] =
            _mm256_add_epi32(acc[i][0], _mm256_mullo_epi32(_mm256_sub_epi32(widen32(p), vzp), w0));
        acc[i][1] = _mm256_add_epi32(acc[i][1],
                                     _mm256_mullo_epi32(_mm256_sub_epi32(widen32(p + 8), vzp), w1));
      }
    }
    for (int i = 0; i < 4; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(c[i]), acc[i][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(c[i] + 8), acc[i][1]);
    }
  }
};

const Int8Kernels kAvx2Int8 = {"avx2", int8_conv<Avx2Int8>, int8_depthwise<Avx2Int8>};

} // namespace

namespace manycl::native {
const Int8Kernels *int8_avx2_kernels() {
  return &kAvx2Int8;
}
} // namespace manycl::native
