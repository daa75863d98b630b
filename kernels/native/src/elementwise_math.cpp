// Element-wise math functions (MCL_NATIVE_FN_MATH): one float function per element, rows
// split over the PEs. Binary16 tiles compute in float (widened per element, rounded once).
#include "elementwise_math.h"

#include <cmath>

namespace manycl::native {

float math_function(const mcl_math_args &a, float x) {
  switch (a.op) {
  case MCL_MATH_ABS:
    return std::fabs(x);
  case MCL_MATH_NEG:
    return -x;
  case MCL_MATH_EXP:
    return std::exp(x);
  case MCL_MATH_LOG:
    return std::log(x);
  case MCL_MATH_SQRT:
    return std::sqrt(x);
  case MCL_MATH_RECIPROCAL:
    return 1.0f / x;
  case MCL_MATH_FLOOR:
    return std::floor(x);
  case MCL_MATH_CEIL:
    return std::ceil(x);
  case MCL_MATH_ROUND: // halves to even, as ONNX Round
    return std::nearbyint(x);
  case MCL_MATH_SIGN:
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; // keeps 0 and NaN
  case MCL_MATH_SIN:
    return std::sin(x);
  case MCL_MATH_COS:
    return std::cos(x);
  case MCL_MATH_TAN:
    return std::tan(x);
  case MCL_MATH_ASIN:
    return std::asin(x);
  case MCL_MATH_ACOS:
    return std::acos(x);
  case MCL_MATH_ATAN:
    return std::atan(x);
  case MCL_MATH_SINH:
    return std::sinh(x);
  case MCL_MATH_COSH:
    return std::cosh(x);
  case MCL_MATH_ASINH:
    return std::asinh(x);
  case MCL_MATH_ACOSH:
    return std::acosh(x);
  case MCL_MATH_ATANH:
    return std::atanh(x);
  case MCL_MATH_ERF:
    return std::erf(x);
  case MCL_MATH_SOFTPLUS: // log(1 + e^x) without overflow for large x
    return x > 20.0f ? x : std::log1p(std::exp(x));
  case MCL_MATH_SOFTSIGN:
    return x / (1.0f + std::fabs(x));
  case MCL_MATH_ELU: // alpha
    return x < 0.0f ? a.alpha * std::expm1(x) : x;
  case MCL_MATH_SELU: // alpha, gamma (beta)
    return a.beta * (x > 0.0f ? x : a.alpha * std::expm1(x));
  case MCL_MATH_CELU: // alpha
    return std::max(0.0f, x) + std::min(0.0f, a.alpha * std::expm1(x / a.alpha));
  case MCL_MATH_THRESHOLDED_RELU: // alpha
    return x > a.alpha ? x : 0.0f;
  case MCL_MATH_SHRINK: // lambd (alpha), bias (beta)
    return x < -a.alpha ? x + a.beta : x > a.alpha ? x - a.beta : 0.0f;
  default:
    return x;
  }
}

namespace {

struct half_bits {
  uint16_t bits;
};
inline float load(const float *p) {
  return *p;
}
inline float load(const half_bits *p) {
  return half_to_float(p->bits);
}
inline void store(float *p, float v) {
  *p = v;
}
inline void store(half_bits *p, float v) {
  p->bits = float_to_half(v);
}

template <class T> void reduce_typed(const mcl_native_exec &exec, const mcl_reduce_args &a) {
  uint8_t *spm = exec.spm_base;
  const uint32_t C = a.input.c;
  const uint32_t chunks = std::min<uint32_t>(C, std::max<uint32_t>(1, exec.pe_count) * 2);
  parallel_for(exec, chunks, [&](uint32_t i) {
    for (uint32_t c = uint32_t(uint64_t(C) * i / chunks); c < uint64_t(C) * (i + 1) / chunks; ++c) {
      auto value = [&](uint32_t y, uint32_t x) {
        return load(reinterpret_cast<const T *>(tile_ptr(spm, a.input, y, x, c)));
      };
      float shift = 0.0f; // LOG_SUM_EXP: the maximum, so no exp overflows
      if (a.op == MCL_REDUCE_LOG_SUM_EXP) {
        shift = -INFINITY;
        for (uint32_t y = 0; y < a.input.h; ++y)
          for (uint32_t x = 0; x < a.input.w; ++x)
            shift = std::max(shift, value(y, x));
        if (!std::isfinite(shift))
          shift = 0.0f;
      }
      float acc = a.op == MCL_REDUCE_MAX    ? -INFINITY
                  : a.op == MCL_REDUCE_MIN  ? INFINITY
                  : a.op == MCL_REDUCE_PROD ? 1.0f
                                            : 0.0f;
      for (uint32_t y = 0; y < a.input.h; ++y)
        for (uint32_t x = 0; x < a.input.w; ++x) {
          const float v = value(y, x);
          switch (a.op) {
          case MCL_REDUCE_MAX:
            acc = std::max(acc, v);
            break;
          case MCL_REDUCE_MIN:
            acc = std::min(acc, v);
            break;
          case MCL_REDUCE_PROD:
            acc *= v;
            break;
          case MCL_REDUCE_L1:
            acc += std::fabs(v);
            break;
          case MCL_REDUCE_L2:
          case MCL_REDUCE_SUM_SQUARE:
            acc += v * v;
            break;
          case MCL_REDUCE_LOG_SUM_EXP:
            acc += std::exp(v - shift);
            break;
          default: // SUM, MEAN, LOG_SUM
            acc += v;
          }
        }
      if (a.op == MCL_REDUCE_MEAN)
        acc /= float(uint64_t(a.input.h) * a.input.w);
      else if (a.op == MCL_REDUCE_L2)
        acc = std::sqrt(acc);
      else if (a.op == MCL_REDUCE_LOG_SUM)
        acc = std::log(acc);
      else if (a.op == MCL_REDUCE_LOG_SUM_EXP)
        acc = std::log(acc) + shift;
      store(reinterpret_cast<T *>(tile_ptr(spm, a.output, 0, 0, c)), acc);
    }
  });
}

template <class T> void math_typed(const mcl_native_exec &exec, const mcl_math_args &a) {
  uint8_t *spm = exec.spm_base;
  const uint32_t rows = a.output.h;
  const uint32_t chunks = std::min<uint32_t>(rows, std::max<uint32_t>(1, exec.pe_count) * 2);
  parallel_for(exec, chunks, [&](uint32_t i) {
    const uint32_t y0 = uint32_t(uint64_t(rows) * i / chunks);
    const uint32_t y1 = uint32_t(uint64_t(rows) * (i + 1) / chunks);
    for (uint32_t y = y0; y < y1; ++y)
      for (uint32_t x = 0; x < a.output.w; ++x)
        for (uint32_t c = 0; c < a.output.c; ++c) {
          const T *p = reinterpret_cast<const T *>(tile_ptr(spm, a.input, y, x, c));
          store(reinterpret_cast<T *>(tile_ptr(spm, a.output, y, x, c)), math_function(a, load(p)));
        }
  });
}

} // namespace

Status run_math(const mcl_native_exec &exec, const mcl_math_args &a) {
  if (a.output.dtype == MCL_DTYPE_F16)
    math_typed<half_bits>(exec, a);
  else
    math_typed<float>(exec, a);
  return Status::Ok();
}

Status run_reduce(const mcl_native_exec &exec, const mcl_reduce_args &a) {
  if (a.output.dtype == MCL_DTYPE_F16)
    reduce_typed<half_bits>(exec, a);
  else
    reduce_typed<float>(exec, a);
  return Status::Ok();
}

namespace cost {

// A streaming pass over the input (two for LOG_SUM_EXP), a few operations per element.
Cost reduce_cost(const mcl_reduce_args &a, uint32_t pes) {
  const double passes = a.op == MCL_REDUCE_LOG_SUM_EXP ? 2.0 : 1.0;
  const double ops = a.op == MCL_REDUCE_LOG_SUM_EXP ? 26.0 : 2.0;
  return stream(elements(a.input), passes * dtype_size(a.input.dtype), ops, a.input.dtype, pes);
}

// VLIW operations per element: transcendental functions as a polynomial evaluation plus
// range reduction (assumption, docs/device-model.md), the others a few operations.
Cost math_cost(const mcl_math_args &a, uint32_t pes) {
  double ops = 24.0;
  switch (a.op) {
  case MCL_MATH_ABS:
  case MCL_MATH_NEG:
  case MCL_MATH_FLOOR:
  case MCL_MATH_CEIL:
  case MCL_MATH_ROUND:
  case MCL_MATH_SIGN:
  case MCL_MATH_THRESHOLDED_RELU:
  case MCL_MATH_SHRINK:
    ops = 2.0;
    break;
  case MCL_MATH_RECIPROCAL:
  case MCL_MATH_SQRT:
  case MCL_MATH_SOFTSIGN:
    ops = 8.0; // reciprocal (square root) estimate + Newton steps
    break;
  default:
    break;
  }
  const double bytes = (double)dtype_size(a.input.dtype) + dtype_size(a.output.dtype);
  return stream(elements(a.output), bytes, ops, a.output.dtype, pes);
}

} // namespace cost

} // namespace manycl::native
