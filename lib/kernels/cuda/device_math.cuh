// Scalar math of the CUDA kernels (kernels/cuda/*.cu; bf16 conversions from kernels/half_convert.h): SiLU, the two
// GELU forms and their derivatives, in the forms the host kernels use (kernels/activation.h). nvcc
// compiles them as __host__ __device__ functions; the C++ compiler as plain inline ones, so a unit test
// (tests/unit/test_device_math.cpp) checks them against LibTorch on a machine without a GPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/half_convert.h"
#include "kernels/host_device.h"

namespace hftrain {
namespace kernels {
namespace device_math {

// f rounded to bf16 and back (kernels/half_convert.h's rounding): where a bf16 op of LibTorch rounds its result.
HFTRAIN_HD float round_bf16(float f) { return simd::bf16_to_float(simd::float_to_bf16(f)); }

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
