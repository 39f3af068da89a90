// Scalar lane for the kernel body (one float per "vector"): the portable fallback, and the lane of the CUDA
// optimizer kernels (one element per thread; HFTRAIN_HD).
#pragma once

#include <cmath>

#include "kernels/half_convert.h"
#include "kernels/host_device.h"

namespace hftrain {
namespace simd {

struct ScalarIsa {
  using R = float;
  static constexpr int kWidth = 1;
  static constexpr const char* kName = "scalar";
  HFTRAIN_HD static R set1(float x) { return x; }
  HFTRAIN_HD static R load(const float* p) { return *p; }
  HFTRAIN_HD static void store(float* p, R x) { *p = x; }
  HFTRAIN_HD static R load_bf16(const uint16_t* p) { return bf16_to_float(*p); }
  HFTRAIN_HD static R load_fp16(const uint16_t* p) { return fp16_to_float(*p); }
  HFTRAIN_HD static void store_bf16(uint16_t* p, R x) { *p = float_to_bf16(x); }
  HFTRAIN_HD static void store_fp16(uint16_t* p, R x) { *p = float_to_fp16(x); }
  HFTRAIN_HD static R add(R a, R b) { return a + b; }
  HFTRAIN_HD static R mul(R a, R b) { return a * b; }
  HFTRAIN_HD static R div(R a, R b) { return a / b; }
  HFTRAIN_HD static R reciprocal(R a) { return 1.0f / a; }
  HFTRAIN_HD static R abs(R a) { return std::fabs(a); }
  HFTRAIN_HD static R sqrt(R a) { return std::sqrt(a); }
  HFTRAIN_HD static R fmadd(R a, R b, R c) { return a * b + c; }   // c + a*b (contracted only where the ISA has FMA)
  HFTRAIN_HD static R fnmadd(R a, R b, R c) { return c - a * b; }  // c - a*b
  HFTRAIN_HD static R zero() { return 0.0f; }
  // For the model kernels (kernels/attention_body.h): lane-wise max, exp, and sums / maxima across the lane.
  HFTRAIN_HD static R max(R a, R b) { return a > b ? a : b; }
  HFTRAIN_HD static float reduce_add(R a) { return a; }
  HFTRAIN_HD static float reduce_max(R a) { return a; }
  HFTRAIN_HD static R exp(R x) { return x < -87.3365447505531f ? 0.0f : std::exp(x); }
  HFTRAIN_HD static R where_negative(R x, R if_negative, R otherwise) { return x < 0.0f ? if_negative : otherwise; }
  HFTRAIN_HD static R sign(R a) { return static_cast<float>((a > 0.0f) - (a < 0.0f)); }  // NaN -> 0, as torch.sign on CPU
};

}  // namespace simd
}  // namespace hftrain
