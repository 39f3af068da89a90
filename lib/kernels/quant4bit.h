// Block-wise 4-bit quantisation of frozen weights (QLoRA, Dettmers et al. 2023, arXiv:2305.14314) in
// bitsandbytes' layout, and the 8-bit block-wise quantisation of the block scales that its double quantisation
// adds. No torch here: raw arrays, split over the intra-op threads.
//
// A tensor is flattened and cut into blocks of `block` consecutive elements (the last may be shorter). Each
// block keeps its absolute maximum (float32); every element x becomes the 4-bit code of the code value nearest
// to x / absmax (a float32 division; 0 when the block is all zeros): the code goes up past a midpoint only when
// the normalised value is strictly above it (the midpoints in double). Two codes share a byte, the element of
// even index in the high nibble (bitsandbytes' order); an odd element count leaves the last low nibble 0.
// Dequantisation is code value * absmax in float32, rounded to the compute dtype.
//
// Code values (by code): NF4 is the paper's table (appendix E: quantiles of N(0, 1) normalised to [-1, 1],
// with an exact zero). FP4 is bitsandbytes' layout: bit 3 the sign, then 2 exponent bits and 1 mantissa bit
// giving the magnitudes 0, 0.0625, 8, 12, 4, 6, 2, 3 (codes 0-7) divided by 12; a negative normalised value
// takes the sign bit and the nearest magnitude.
//
// Double quantisation (bnb_4bit_use_double_quant): the float32 block absmaxes minus their mean (the offset;
// the mean taken in double, rounded to float32) are quantised block-wise to 8 bits in blocks of 256 with the
// signed dynamic map of bitsandbytes (create_dynamic_map: for i = 0..6, 10^(i-6) times the midpoints of 2^i + 1
// evenly spaced points from 0.1 to 1, both signs, plus 0 and 1; 256 values sorted, the code an index into
// them), each element to the nearest map value as above; a block absmax is then map[code] * nested absmax +
// offset, in float32.
#pragma once

#include <cstdint>

#include "kernels/host_device.h"

namespace hftrain {
namespace kernels {

enum class Quant4Type { kNf4, kFp4 };

// The 16 code values of the type, indexed by code.
const float* quant4_code_values(Quant4Type type);
// The 256 sorted values of the signed dynamic 8-bit map (the double quantisation's).
const float* dynamic_map_signed();

int64_t quant_blocks(int64_t n, int64_t block);

// The 4-bit code of element i of a packed tensor (the even element in the high nibble). Host and CUDA kernels.
HFTRAIN_HD uint8_t quant4_nibble_at(const uint8_t* packed, int64_t i) {
  const uint8_t byte = packed[i >> 1];
  return (i & 1) ? static_cast<uint8_t>(byte & 0x0F) : static_cast<uint8_t>(byte >> 4);
}

// Element i of an 8-bit block-wise tensor: map[codes[i]] * absmax[i / block] + offset, in float32 (the product
// rounded before the offset is added). Host and CUDA kernels.
HFTRAIN_HD float dequantized_8bit(const uint8_t* codes, const float* map, const float* absmax, int64_t block,
                                  float offset, int64_t i) {
  return mul_rounded(map[codes[i]], absmax[i / block]) + offset;
}

// x[n] -> packed[(n + 1) / 2], absmax[quant_blocks(n, block)]. `code` is quant4_code_values(type).
void quantize_4bit(const float* x, int64_t n, int64_t block, Quant4Type type, uint8_t* packed, float* absmax);

// x[n] -> codes[n] (index of the nearest of the 256 sorted values of `map`), absmax[quant_blocks(n, block)].
void quantize_8bit_blockwise(const float* x, int64_t n, int64_t block, const float* map, uint8_t* codes, float* absmax);
// out[i] = map[codes[i]] * absmax[i / block] + offset, in float32.
void dequantize_8bit_blockwise(const uint8_t* codes, int64_t n, int64_t block, const float* map, const float* absmax,
                               float offset, float* out);

// Elements [begin, end) of a packed 4-bit tensor: out[i - begin] = code[nibble i] * absmax[i / block], in float32
// (dequantize_4bit) or rounded to bf16 bits (dequantize_4bit_bf16). On the model kernels' SIMD lanes
// (kernel_choice.h; HFTRAIN_KERNEL_ISA=scalar for the portable loop), every lane bitwise equal to the scalar one.
void dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                     int64_t end, float* out);
void dequantize_4bit_bf16(const uint8_t* packed, const float* absmax, const float* code, int64_t block, int64_t begin,
                          int64_t end, uint16_t* out);

}  // namespace kernels
}  // namespace hftrain
