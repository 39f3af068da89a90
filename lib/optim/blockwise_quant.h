// Block-wise 8-bit dynamic quantisation of optimizer state (Dettmers et al. 2021, "8-bit Optimizers via
// Block-wise Quantization", arXiv:2110.02861, sections 2.1-2.2). A tensor is cut into blocks of `block_size`
// consecutive elements (flattened order; the last block may be shorter); each block is normalised by its
// absolute maximum into [-1, 1] and every element stored as the 8-bit code of the nearest value of a
// dynamic (tree) data type. The block's absmax is kept as float32.
//
// The dynamic data type, as the paper describes it (section 2.2): after the sign bit, the number of
// zero bits E gives the exponent 10^-E, the first one bit is an indicator, and the F bits after it are a
// linear fraction. hftrain's codebook, written here from that description:
//   signed (first moment):    bit 7 sign; the 7 bits below hold E leading zeros, the indicator, F = 6 - E
//                             fraction bits f;   |value| = (1 + 9 (f + 1) / 2^F) / 10^(E + 1)
//   unsigned (second moment): the sign bit is repurposed as one more bit (the paper's extension for
//                             non-negative state): 8 bits, F = 7 - E;  value = same formula
// so each exponent level spans (10^-(E+1), 10^-E] linearly and 1.0 is exact; the all-zero code (and the
// signed code 0x80) is 0. Quantisation picks the nearest codebook value: x goes to the upper neighbour when
// x (as a double) is strictly above the midpoint (v_k + v_{k+1}) / 2 computed in double.
#pragma once

#include <cstdint>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

enum class QuantSign { kSigned, kUnsigned };

// The 256 float32 code values of the data type, indexed by code.
const std::vector<float>& dynamic_codebook(QuantSign sign);

struct QuantizedTensor {
  torch::Tensor codes;   // uint8, same shape as the source
  torch::Tensor absmax;  // float32, one per block: ceil(numel / block_size)
};

// Quantises a float32 tensor (any shape; contiguous copy taken if needed). kUnsigned requires x >= 0.
QuantizedTensor quantize_blockwise(const torch::Tensor& x, QuantSign sign, int64_t block_size);
// The float32 tensor the codes stand for: codebook[code] * absmax of the code's block.
torch::Tensor dequantize_blockwise(const QuantizedTensor& q, QuantSign sign, int64_t block_size);
// Number of blocks for `numel` elements.
int64_t quant_block_count(int64_t numel, int64_t block_size);

}  // namespace hftrain
