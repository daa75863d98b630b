// AVX2 INT8 kernels on byte weights (compiled with -mavx2 -mfma -mf16c). No saturating step:
// the weight bytes are sign-extended to INT16 (vpmovsxbw) and the activation bytes widened to
// INT16 u values, so vpmaddwd's products (|u*w| <= 255*128) and pair sums are exact; the
// saturating u8 x s8 vpmaddubsw (pair sums up to 65280 > 32767) is not used.
#include "int8_winograd_impl.h"
#include "steps_avx2.h"

#include <immintrin.h>

namespace {

struct Avx2Int8 : Avx2Steps {
  static constexpr int MR = 6; // 6 rows x 2 accumulators + 2 weight vectors + 1 broadcast
  using AElem = int16_t;
  // Tails of 4 to 15 bytes take two overlapping loads and stores (the first and the last 8 or
  // 4 bytes: the overlap is written twice with the same values), never reading past the row:
  // a 3-channel stem's kernel rows are 9-byte runs.
  template <class TI> static void pack_row(const TI *src, uint32_t n, int16_t *dst) {
    const __m128i flip = _mm_set1_epi8(std::is_same_v<TI, int8_t> ? (char)0x80 : 0);
    uint32_t k = 0;
    for (; k + 16 <= n; k += 16) {
      const __m128i b =
          _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + k)), flip);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + k), _mm256_cvtepu8_epi16(b));
    }
    const uint32_t rest = n - k;
    auto widen8 = [&](uint32_t at) { // bytes [at, at + 8) -> dst
      const __m128i b =
          _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(src + at)), flip);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + at), _mm_cvtepu8_epi16(b));
    };
    auto widen4 = [&](uint32_t at) { // bytes [at, at + 4) -> dst
      int32_t bytes;
      std::memcpy(&bytes, src + at, 4);
      const __m128i b = _mm_xor_si128(_mm_cvtsi32_si128(bytes), flip);
      _mm_storel_epi64(reinterpret_cast<__m128i *>(dst + at), _mm_cvtepu8_epi16(b));
    };
    if (rest >= 8) {
      widen8(k);
      widen8(n - 8);
    } else if (rest >= 4) {
      widen4(k);
      widen4(n - 4);
    } else {
      for (; k < n; ++k)
        dst[k] = unsigned_byte(src[k]);
    }
  }
  // Half a panel (8 channels) at a time. A quad of one row, broadcast as 64 bits (u0..u3),
  // against 4 channels' quads sign-extended to INT16: vpmaddwd gives per channel two partial
  // sums (q0+q1, q2+q3) in adjacent INT32 lanes, added pairwise at the end (vphaddd).
  // The empty asm after each row pins that row's accumulators in registers there, so each
  // broadcast is consumed before the next is loaded and the 12 accumulators, two weight
  // vectors, the broadcast and one product fit the 16 registers. Without it GCC loaded all six
  // broadcasts first and spilled most accumulators to the stack every quad (1.3-1.6x slower).
  template <int R>
  static void ukernel(uint32_t quads, const int16_t *a, size_t a_stride, const int8_t *w,
                      int32_t (*c)[16]) {
    for (int h = 0; h < 2; ++h) {
      __m256i acc[R][2];
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i)
        acc[i][0] = acc[i][1] = _mm256_setzero_si256();
      const int8_t *wp = w + h * 32;
      const int16_t *ap = a;
      for (uint32_t p = 0; p < quads; ++p, wp += 64, ap += 4) {
        const __m256i w0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(wp)));
        const __m256i w1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(wp + 16)));
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
          __m256i ai = _mm256_broadcastq_epi64(
              _mm_loadl_epi64(reinterpret_cast<const __m128i *>(ap + (size_t)i * a_stride)));
          acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(ai, w0));
          acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(ai, w1));
          asm("" : "+x"(acc[i][0]), "+x"(acc[i][1]));
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
  // Winograd points (int8_winograd_impl.h): C[R][16] (+)= sum over channel pairs of a row's
  // INT16 pair, broadcast as 32 bits, times the pair's weights of 16 output channels
  // ([16][2] INT16, two vectors): vpmaddwd adds the two products per channel. Exact: the
  // transformed values are at most 1020 and 2295 in magnitude.
  static constexpr int WMR = 6;
  // Not inlined: inside the large Winograd driver GCC spilled the accumulators anyway.
  template <int R>
  [[gnu::noinline]] static void wino_gemm(uint32_t pairs, const int16_t *a, size_t a_stride,
                                          const int16_t *u, bool accumulate, int32_t *c,
                                          size_t stride) {
    __m256i acc[R][2];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < 2; ++v)
        acc[i][v] =
            accumulate
                ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(c + i * stride + 8 * v))
                : _mm256_setzero_si256();
    for (uint32_t q = 0; q < pairs; ++q, u += 32) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(u));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(u + 16));
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        int32_t pair;
        std::memcpy(&pair, a + (size_t)i * a_stride + 2 * q, sizeof pair);
        const __m256i ai = _mm256_set1_epi32(pair);
        acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(ai, w0));
        acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(ai, w1));
        asm("" : "+x"(acc[i][0]), "+x"(acc[i][1])); // as in ukernel: no spills
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < 2; ++v)
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(c + i * stride + 8 * v), acc[i][v]);
  }
  static __m256i widen16(const uint8_t *p) {
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  static __m256i widen16(const int8_t *p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
  }
  // Depthwise, 16 channels of 4 pixels: taps taken in pairs, the two taps' INT16 values
  // interleaved per channel so that one vpmaddwd adds both products into an INT32 lane
  // (|x * (w - w_zp)| <= 255 * 255: exact). The input zero point comes out of the sums as
  //   sum_t (x - x_zp)(w - w_zp) = sum_t x (w - w_zp) - x_zp * sum_t (w - w_zp)
  // (one constant per channel; equal modulo 2^32, as the wrapping reference sums are). Lanes
  // after unpacklo/unpackhi hold channels [0-3 | 8-11] and [4-7 | 12-15]; one permute each at
  // the end restores the order.
  template <class TI>
  static void depthwise_block(const TI *in, const int32_t *const *tabs, uint32_t taps,
                              const int8_t *w, uint32_t w_stride, int32_t zp, const int32_t *zw,
                              uint32_t n, int32_t (*c)[16]) {
    // w - w_zp fits INT16 for the zero points a model can have ([-128, 127]); others (the
    // block's zero points are data, not validated) take the portable INT32 loops.
    const __m256i z0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(zw));
    const __m256i z1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(zw + 8));
    const __m256i zmin = _mm256_set1_epi32(-128), zmax = _mm256_set1_epi32(127);
    const __m256i out_of_range = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(zmin, z0), _mm256_cmpgt_epi32(z0, zmax)),
        _mm256_or_si256(_mm256_cmpgt_epi32(zmin, z1), _mm256_cmpgt_epi32(z1, zmax)));
    if (n != 16 || !_mm256_testz_si256(out_of_range, out_of_range))
      return PortableDepthwise::depthwise_block(in, tabs, taps, w, w_stride, zp, zw, n, c);
    // packs gives the lanes [0-3 8-11 | 4-7 12-15]; the permute puts the channels in order.
    const __m256i zws = _mm256_permute4x64_epi64(_mm256_packs_epi32(z0, z1), 0xd8);
    __m256i acc[4][2];
    for (int i = 0; i < 4; ++i)
      acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    __m256i wsum_lo = _mm256_setzero_si256(), wsum_hi = _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1);
    for (uint32_t t = 0; t < taps; t += 2) {
      const bool pair = t + 1 < taps;
      const __m256i w0 = _mm256_sub_epi16(widen16(w + (size_t)t * w_stride), zws);
      const __m256i w1 = pair ? _mm256_sub_epi16(widen16(w + (size_t)(t + 1) * w_stride), zws)
                              : _mm256_setzero_si256();
      const __m256i wlo = _mm256_unpacklo_epi16(w0, w1), whi = _mm256_unpackhi_epi16(w0, w1);
      wsum_lo = _mm256_add_epi32(wsum_lo, _mm256_madd_epi16(wlo, ones));
      wsum_hi = _mm256_add_epi32(wsum_hi, _mm256_madd_epi16(whi, ones));
      for (int i = 0; i < 4; ++i) {
        const __m256i x0 = widen16(in + tabs[i][t]);
        // A lone last tap multiplies zero weights: any valid pixel serves as its partner.
        const __m256i x1 = pair ? widen16(in + tabs[i][t + 1]) : x0;
        acc[i][0] =
            _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1), wlo));
        acc[i][1] =
            _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1), whi));
      }
    }
    const __m256i vzp = _mm256_set1_epi32(zp);
    const __m256i zlo = _mm256_mullo_epi32(vzp, wsum_lo), zhi = _mm256_mullo_epi32(vzp, wsum_hi);
    for (int i = 0; i < 4; ++i) {
      const __m256i lo = _mm256_sub_epi32(acc[i][0], zlo), hi = _mm256_sub_epi32(acc[i][1], zhi);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(c[i]),
                          _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(c[i] + 8),
                          _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
};

const Int8Kernels kAvx2Int8 = {"avx2", int8_conv<Avx2Int8>, int8_depthwise<Avx2Int8>,
                               int8_winograd<Avx2Int8>};

} // namespace

namespace manycl::native {
const Int8Kernels *int8_avx2_kernels() {
  return &kAvx2Int8;
}
} // namespace manycl::native
