// AVX2 + FMA + F16C lane (8 floats) for the kernel body. Include only from a file compiled for that ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hftrain {
namespace simd {

struct Avx2Isa {
  using R = __m256;
  static constexpr int kWidth = 8;
  static constexpr const char* kName = "avx2+fma";
  static R set1(float x) { return _mm256_set1_ps(x); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R x) { _mm256_storeu_ps(p, x); }
  static R load_bf16(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static R load_fp16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store_bf16(uint16_t* p, R x) {
    // Round to nearest even on the bit pattern: add 0x7FFF plus the lowest kept bit, keep the high half.
    const __m256i u = _mm256_castps_si256(x);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void store_fp16(uint16_t* p, R x) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  // 1 / a within about an ulp: the 12-bit estimate and two Newton steps, cheaper than a division.
  static R reciprocal(R a) {
    const R one = _mm256_set1_ps(1.0f);
    R r = _mm256_rcp_ps(a);
    r = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(a, r, one), r);
    return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(a, r, one), r);
  }
  static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static R sqrt(R a) { return _mm256_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R fnmadd(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }
  static R zero() { return _mm256_setzero_ps(); }
  // For the model kernels (kernels/attention_body.h): lane-wise max, exp, and sums / maxima across the lane.
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static float reduce_add(R a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float reduce_max(R a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  // e^x to about 2 ulp (Cephes' expf: x = n ln2 + r, a degree-6 polynomial in r, times 2^n); 0 below -87.3.
  static R exp(R x) {
    const R lo = _mm256_set1_ps(-87.3365447505531f), hi = _mm256_set1_ps(88.3762626647949f);
    const R keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const R n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    R y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(keep, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
  }
  static R where_negative(R x, R if_negative, R otherwise) {
    return _mm256_blendv_ps(otherwise, if_negative, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  }
  static R sign(R a) {
    const R zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    return _mm256_sub_ps(_mm256_and_ps(_mm256_cmp_ps(a, zero, _CMP_GT_OQ), one),
                         _mm256_and_ps(_mm256_cmp_ps(a, zero, _CMP_LT_OQ), one));
  }
};

}  // namespace simd
}  // namespace hftrain
