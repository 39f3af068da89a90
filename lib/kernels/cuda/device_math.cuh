// Scalar math of the CUDA kernels (kernels/cuda/*.cu): bf16 bit patterns to and from float with torch's rounding,
// SiLU, the two GELU forms and their derivatives, in the forms the host kernels use (kernels/activation.h). nvcc
// compiles them as __host__ __device__ functions; the C++ compiler as plain inline ones, so a unit test
// (tests/unit/test_device_math.cpp) checks them against LibTorch on a machine without a GPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define HFTRAIN_HD __host__ __device__ __forceinline__
#else
#define HFTRAIN_HD inline
#endif

namespace hftrain {
namespace kernels {
namespace device_math {

HFTRAIN_HD float float_from_bits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

HFTRAIN_HD uint32_t bits_of_float(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

HFTRAIN_HD float bf16_to_float(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN becomes the canonical quiet NaN, as c10::BFloat16 does.
HFTRAIN_HD uint16_t float_to_bf16(float f) {
  if (f != f) return 0x7FC0;
  const uint32_t u = bits_of_float(f);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// f rounded to bf16 and back: where a bf16 op of LibTorch rounds its result.
HFTRAIN_HD float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

HFTRAIN_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

HFTRAIN_HD float silu(float x) { return x * sigmoid(x); }

// d silu / dx = s (1 + x (1 - s)), s = sigmoid(x).
HFTRAIN_HD float silu_derivative(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

// GELU's gate g(x), y = x g(x): the exact form's Phi(x) = erfc(-x / sqrt 2) / 2, or the tanh form's
// (1 + tanh u) / 2 = 1 / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
HFTRAIN_HD float gelu_gate(float x, bool tanh_form) {
  if (!tanh_form) return 0.5f * erfcf(-x * 0.70710678118654752f);
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return 1.0f / (1.0f + expf(-2.0f * u));
}

HFTRAIN_HD float gelu(float x, bool tanh_form) { return x * gelu_gate(x, tanh_form); }

// d gelu / dx: g(x) + x g'(x); exact g' = the normal density, tanh g' = 2 g (1 - g) du/dx.
HFTRAIN_HD float gelu_derivative(float x, bool tanh_form) {
  const float g = gelu_gate(x, tanh_form);
  if (!tanh_form) return g + x * 0.39894228040143268f * expf(-0.5f * x * x);
  const float du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * x * x);
  return g + x * 2.0f * g * (1.0f - g) * du;
}

}  // namespace device_math
}  // namespace kernels
}  // namespace hftrain
