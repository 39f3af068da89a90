// Scalar fp32 <-> bf16 / fp16 conversions with torch's rounding (round to nearest even; NaN stays NaN),
// used by the scalar kernels and for the tails of the vector ones, and by the CUDA kernels (HFTRAIN_HD).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/host_device.h"

namespace hftrain {
namespace simd {

HFTRAIN_HD uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

HFTRAIN_HD float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

HFTRAIN_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

HFTRAIN_HD uint16_t float_to_bf16(float f) {
  if (f != f) return 0x7FC0;  // canonical quiet NaN, as c10::BFloat16 does
  const uint32_t u = float_bits(f);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

HFTRAIN_HD float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return bits_float(float_bits(v) | sign);
  }
  if (exponent == 31) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

HFTRAIN_HD uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u, magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to infinity (>= 65520)
  if (magnitude < 0x38800000u) {
    // Below 2^-14: the result is subnormal. Adding 0.5 puts the value where one float ulp (2^-24) is one
    // fp16 subnormal step, so the float addition itself rounds to nearest even.
    const float shifted = bits_float(magnitude) + 0.5f;
    return static_cast<uint16_t>(sign | (float_bits(shifted) - 0x3F000000u));
  }
  const uint32_t odd = (magnitude >> 13) & 1u;
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  return static_cast<uint16_t>(sign | ((magnitude + 0xC8000FFFu + odd) >> 13));
}

}  // namespace simd
}  // namespace hftrain
