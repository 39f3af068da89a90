// The 4-bit (NF4 / FP4) dequantisation of quant4bit.h written once over a SIMD lane type V (kernels/simd_*.h);
// included by the per-ISA files, internal linkage throughout (see attention_body.h). Block by block: the
// block's absmax broadcast once, whole lanes of codes looked up without a gather (quant4bit_lanes.h) and
// multiplied by it; an odd first element and the part of a block shorter than a lane element by element. Every
// element is the same float32 product code value * absmax however it is reached, so each lane width gives the
// scalar lane's bits (bf16 rounds that product to nearest even, lane or element).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/half_convert.h"
#include "kernels/kernel_table.h"
#include "kernels/quant4bit.h"
#include "kernels/quant4bit_lanes.h"

namespace hftrain {
namespace kernels {
namespace {

inline void quant4_put(float* out, float value) { *out = value; }
inline void quant4_put(uint16_t* out, float value) { *out = simd::float_to_bf16(value); }

template <class V>
struct Dequant4Body {
  using R = typename V::R;
  static constexpr int64_t W = V::kWidth;

  // out[i - begin] for i in [i0, i1), one element at a time, all of one block (absmax `scale`).
  template <class T>
  static void elements(const uint8_t* packed, const float* code, float scale, int64_t begin, int64_t i0, int64_t i1,
                       T* out) {
    for (int64_t i = i0; i < i1; ++i) quant4_put(out + (i - begin), code[quant4_nibble_at(packed, i)] * scale);
  }

  // Elements [i0, i1) of one block (absmax `scale`) a lane at a time, the rest element by element.
  template <class T, class Table>
  static void lanes(const uint8_t* packed, const float* code, const Table& table, float scale, int64_t begin, int64_t i0,
                    int64_t i1, T* out) {
    static_assert(W % 2 == 0, "a lane covers whole bytes");
    const R lane_scale = V::set1(scale);
    int64_t i = i0;
    if (i & 1) {  // lanes start on a byte
      elements(packed, code, scale, begin, i, i + 1, out);
      ++i;
    }
    for (; i + W <= i1; i += W)
      store_lane<V>(out + (i - begin), V::mul(NibbleLookup<V>::decode(table, packed + (i >> 1)), lane_scale));
    elements(packed, code, scale, begin, i, i1, out);
  }

  // out[i - begin] = code[nibble i] * absmax[i / block] for i in [begin, end).
  template <class T>
  static void range(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                    int64_t end, T* out) {
    if (begin >= end) return;
    if constexpr (W == 1) {
      for (int64_t b = begin / block; b * block < end; ++b)
        elements(packed, code, absmax[b], begin, std::max(begin, b * block), std::min(end, (b + 1) * block), out);
    } else {
      const auto table = NibbleLookup<V>::table(code);
      for (int64_t b = begin / block; b * block < end; ++b)
        lanes(packed, code, table, absmax[b], begin, std::max(begin, b * block), std::min(end, (b + 1) * block), out);
    }
  }

  static void to_float(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                       int64_t end, float* out) {
    range(packed, absmax, code, block, begin, end, out);
  }
  static void to_bf16(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                      int64_t end, uint16_t* out) {
    range(packed, absmax, code, block, begin, end, out);
  }
};

}  // namespace
}  // namespace kernels
}  // namespace hftrain
