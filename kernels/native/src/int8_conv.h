// INT8 convolution / GEMM / depthwise kernels on byte weights (one implementation per ISA:
// int8_conv.cpp portable, int8_conv_avx2.cpp, int8_conv_avx512.cpp with AVX-512 VNNI).
//
// Packed weights (docs/native.md): per group, per panel of 16 output channels,
// [ceil(K/4)][16][4] int8 with K = (tap, input channel) flattened and taken in quads (a quad
// may span two taps; the last one is padded with zero weights), so one 64-byte load holds the
// four K values of all 16 channels: the operand layout of vpdpbusd. Depthwise: [taps][Cp].
//
// Exactness: activations enter the dot products as unsigned bytes u = x (U8) or x + 128 (S8,
// an exclusive-or of the sign bit), with zu the input zero point moved the same way, so
//   sum_k (x_k - x_zp)(w_k - w_zp) = sum_k u_k w_k - w_zp * sum_k u_k - zu * sum_k (w_k - w_zp).
// The last term is a constant per output channel: mcl_native_pack_conv folds it into the
// INT32 bias (hence the pack needs the calls' input dtype and zero point). The middle term is
// zero unless the block keeps the weight zero points (MCL_CONV_WEIGHT_ZERO_POINTS), when the
// kernels subtract w_zp * sum(u) per pixel. Every product and partial sum is an exact integer
// and the INT32 sums wrap (mod 2^32) identically on every ISA, so all ISAs give the same bytes
// as the former INT16 kernels (x - x_zp) * (w - w_zp).
#pragma once

#include "int8_winograd.h"
#include "internal.h"

namespace manycl::native {

// K rounded up to whole quads.
inline uint64_t int8_padded_k(uint32_t taps, uint32_t cin_g) {
  return ((uint64_t)taps * cin_g + 3) / 4 * 4;
}
// Per-thread scratch words per row of A: the widest packing (INT16 values, AVX2).
inline size_t int8_row_scratch_words(uint32_t taps, uint32_t cin_g) {
  return (size_t)int8_padded_k(taps, cin_g) / 2;
}
// zu: the input zero point as the unsigned byte the kernels multiply.
inline int32_t int8_unsigned_zero_point(uint32_t in_dtype, int32_t zero_point) {
  return in_dtype == MCL_DTYPE_S8 ? zero_point + 128 : zero_point;
}

struct Int8Kernels {
  const char *name;
  void (*conv)(const ConvJob &, const ConvRange &);      // dense and grouped, byte weights
  void (*depthwise)(const ConvJob &, const ConvRange &); // U8/S8 depthwise
  // Integer Winograd F(2x2, 3x3) (int8_winograd.h); null where the direct kernels are faster
  // (VNNI: four products per byte lane and instruction).
  void (*winograd)(const Int8WinogradJob &, const Int8WinogradRange &);
};

const Int8Kernels &int8_generic_kernels();
const Int8Kernels *int8_avx2_kernels();        // nullptr when not compiled in
const Int8Kernels *int8_avx512_vnni_kernels(); // nullptr when not compiled in
// The INT8 kernels of the selected ISA: "avx512" uses VNNI where the CPU has it, else the
// AVX2 kernels (AVX-512 implies AVX2); "avx2" and "generic" their own.
const Int8Kernels &int8_kernels_for(const IsaKernels &isa);

} // namespace manycl::native
