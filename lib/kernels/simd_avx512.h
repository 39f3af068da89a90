// AVX-512 (F + BW) lane (16 floats) for the kernel body. Include only from a file compiled for that ISA.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hftrain {
namespace simd {

struct Avx512Isa {
  using R = __m512;
  static constexpr int kWidth = 16;
  static constexpr const char* kName = "avx512";
  static R set1(float x) { return _mm512_set1_ps(x); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R x) { _mm512_storeu_ps(p, x); }
  static R load_bf16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static R load_fp16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store_bf16(uint16_t* p, R x) {
    // Integer rounding rather than VCVTNEPS2BF16, which flushes subnormals (torch keeps them).
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  static void store_fp16(uint16_t* p, R x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  // 1 / a within about an ulp: the 14-bit estimate and one Newton step (2 FMAs), far cheaper than a division.
  static R reciprocal(R a) {
    const R r = _mm512_rcp14_ps(a);
    return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(a, r, _mm512_set1_ps(1.0f)), r);
  }
  static R abs(R a) { return _mm512_abs_ps(a); }
  static R sqrt(R a) { return _mm512_sqrt_ps(a); }
  static R fmadd(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R fnmadd(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }
  static R zero() { return _mm512_setzero_ps(); }
  // For the model kernels (kernels/attention_body.h): lane-wise max, exp, and sums / maxima across the lane.
  static R max(R a, R b) { return _mm512_max_ps(a, b); }
  static float reduce_add(R a) { return _mm512_reduce_add_ps(a); }
  static float reduce_max(R a) { return _mm512_reduce_max_ps(a); }
  // e^x to about 2 ulp (Cephes' expf: x = n ln2 + r, a degree-6 polynomial in r, times 2^n); 0 below -87.3.
  static R exp(R x) {
    const R lo = _mm512_set1_ps(-87.3365447505531f), hi = _mm512_set1_ps(88.3762626647949f);
    const __mmask16 underflow = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const R n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    R r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    R y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~underflow), _mm512_mul_ps(y, _mm512_castsi512_ps(e)));
  }
  static R where_negative(R x, R if_negative, R otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), otherwise, if_negative);
  }
  static R sign(R a) {
    const R zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    const R pos = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, zero, _CMP_GT_OQ), one);
    const R neg = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, zero, _CMP_LT_OQ), one);
    return _mm512_sub_ps(pos, neg);
  }
};

}  // namespace simd
}  // namespace hftrain
