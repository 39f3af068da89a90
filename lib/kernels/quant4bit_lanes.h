// The 16-entry code lookup of the 4-bit dequantisation (quant4bit_body.h) on the x86 lanes, without a gather:
// a lane of W consecutive elements, starting at an even one, from its W / 2 packed bytes (the even element in
// the high nibble), each element the code value of its nibble. AVX2 looks up the 16 values as two 8-wide
// permutes (each keyed by the code's low 3 bits) blended on bit 3; AVX-512 as one 16-wide permute.
// Defined only for the lanes the including file is compiled for; internal linkage (see attention_body.h).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include "kernels/simd_avx2.h"
#endif
#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
#include "kernels/simd_avx512.h"
#endif

namespace hftrain {
namespace kernels {
namespace {

// Table: the 16 code values held in registers; table(code) loads them, decode(table, bytes) gives one lane.
template <class V>
struct NibbleLookup;

#if defined(__x86_64__) && defined(__AVX2__)
// The nibbles of `bytes` (up to 8, in the low half) as bytes, high nibble first: byte k gives bytes 2k and 2k + 1.
inline __m128i split_nibbles_x86(__m128i bytes) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4), low = _mm_and_si128(bytes, low4);
  return _mm_unpacklo_epi8(high, low);
}
#endif

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
template <>
struct NibbleLookup<simd::Avx2Isa> {
  struct Table {
    __m256 low, high;  // code values 0-7 and 8-15
  };
  static Table table(const float* code) { return {_mm256_loadu_ps(code), _mm256_loadu_ps(code + 8)}; }
  static __m256 decode(const Table& t, const uint8_t* bytes) {
    int32_t four;
    std::memcpy(&four, bytes, sizeof four);
    const __m256i codes = _mm256_cvtepu8_epi32(split_nibbles_x86(_mm_cvtsi32_si128(four)));
    const __m256 low = _mm256_permutevar8x32_ps(t.low, codes), high = _mm256_permutevar8x32_ps(t.high, codes);
    return _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(codes, 28)));  // bit 3 -> sign
  }
};
#endif

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__)
template <>
struct NibbleLookup<simd::Avx512Isa> {
  struct Table {
    __m512 values;
  };
  static Table table(const float* code) { return {_mm512_loadu_ps(code)}; }
  static __m512 decode(const Table& t, const uint8_t* bytes) {
    const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes));
    return _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(split_nibbles_x86(eight)), t.values);
  }
};
#endif

}  // namespace
}  // namespace kernels
}  // namespace hftrain
