// Portable INT8 kernels on byte weights, and the choice of INT8 kernels per ISA.
#include "int8_winograd_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace {

struct GenericInt8 : PortableSteps, PortableDepthwise, PortableWinoGemm {
  static constexpr int MR = 4;
  using AElem = uint8_t;
  template <class TI> static void pack_row(const TI *src, uint32_t n, uint8_t *dst) {
    for (uint32_t k = 0; k < n; ++k)
      dst[k] = unsigned_byte(src[k]);
  }
  // C[MR][16] = sum over quads p of sum_q A[i][4p+q] * W[p][x][q], wrapping INT32.
  template <int R>
  static void ukernel(uint32_t quads, const uint8_t *a, size_t a_stride, const int8_t *w,
                      int32_t (*c)[16]) {
    for (int i = 0; i < R; ++i) {
      const uint8_t *ai = a + (size_t)i * a_stride;
      uint32_t acc[16] = {};
      for (uint32_t p = 0; p < quads; ++p) {
        const uint8_t *ap = ai + 4 * p;
        const int8_t *wp = w + (size_t)p * 64;
        for (int x = 0; x < 16; ++x)
          acc[x] += (uint32_t)(ap[0] * wp[4 * x] + ap[1] * wp[4 * x + 1] + ap[2] * wp[4 * x + 2] +
                               ap[3] * wp[4 * x + 3]);
      }
      for (int x = 0; x < 16; ++x)
        c[i][x] = (int32_t)acc[x];
    }
  }
};

const Int8Kernels kGenericInt8 = {"generic", int8_conv<GenericInt8>, int8_depthwise<GenericInt8>,
                                  int8_winograd<GenericInt8>};

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  return c & (1u << 11); // AVX512_VNNI (the OS support of AVX-512 was checked for "avx512")
#else
  return false;
#endif
}

} // namespace

namespace manycl::native {

const Int8Kernels &int8_generic_kernels() {
  return kGenericInt8;
}

const Int8Kernels &int8_kernels_for(const IsaKernels &isa) {
  static const bool vnni = cpu_has_avx512_vnni();
  if (std::strcmp(isa.name, "avx512") == 0 && vnni && int8_avx512_vnni_kernels())
    return *int8_avx512_vnni_kernels();
  if ((std::strcmp(isa.name, "avx512") == 0 || std::strcmp(isa.name, "avx2") == 0) &&
      int8_avx2_kernels())
    return *int8_avx2_kernels();
  return kGenericInt8;
}

#ifndef MANYCL_NATIVE_HAVE_AVX2
const Int8Kernels *int8_avx2_kernels() {
  return nullptr;
}
#endif
#ifndef MANYCL_NATIVE_HAVE_AVX512_VNNI
const Int8Kernels *int8_avx512_vnni_kernels() {
  return nullptr;
}
#endif

} // namespace manycl::native
