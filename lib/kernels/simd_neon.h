// Arm NEON lane (4 floats) for the kernel body; 16-bit loads and stores convert lane by lane.
#pragma once

#include <arm_neon.h>

#include "kernels/half_convert.h"

namespace hftrain {
namespace simd {

struct NeonIsa {
  using R = float32x4_t;
  static constexpr int kWidth = 4;
  static constexpr const char* kName = "neon";
  static R set1(float x) { return vdupq_n_f32(x); }
  static R load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, R x) { vst1q_f32(p, x); }
  static R load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16(p)), 16)); }
  static R load_fp16(const uint16_t* p) {
    float f[4];
    for (int k = 0; k < 4; ++k) f[k] = fp16_to_float(p[k]);
    return vld1q_f32(f);
  }
  static void store_bf16(uint16_t* p, R x) {
    float f[4];
    vst1q_f32(f, x);
    for (int k = 0; k < 4; ++k) p[k] = float_to_bf16(f[k]);
  }
  static void store_fp16(uint16_t* p, R x) {
    float f[4];
    vst1q_f32(f, x);
    for (int k = 0; k < 4; ++k) p[k] = float_to_fp16(f[k]);
  }
  static R add(R a, R b) { return vaddq_f32(a, b); }
  static R mul(R a, R b) { return vmulq_f32(a, b); }
  static R div(R a, R b) { return vdivq_f32(a, b); }
  static R sqrt(R a) { return vsqrtq_f32(a); }
  static R fmadd(R a, R b, R c) { return vfmaq_f32(c, a, b); }
  static R fnmadd(R a, R b, R c) { return vfmsq_f32(c, a, b); }
  static R sign(R a) {
    const R zero = vdupq_n_f32(0.0f), one = vdupq_n_f32(1.0f);
    const R pos = vreinterpretq_f32_u32(vandq_u32(vcgtq_f32(a, zero), vreinterpretq_u32_f32(one)));
    const R neg = vreinterpretq_f32_u32(vandq_u32(vcltq_f32(a, zero), vreinterpretq_u32_f32(one)));
    return vsubq_f32(pos, neg);
  }
};

}  // namespace simd
}  // namespace hftrain
