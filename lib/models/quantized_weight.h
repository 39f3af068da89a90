// A frozen linear weight held as bitsandbytes' 4-bit storage (QLoRA's NF4 or FP4, kernels/quant4bit.h): the
// packed codes and the quant state (block absmax, or with double quantisation the 8-bit absmax codes, their
// nested absmax, map and offset), with dequantisation of a range of rows into the compute dtype and the product
// y = x W^T + b as one autograd operation that dequantises one tile of rows at a time (never the whole weight).
// Or as bitsandbytes' 8-bit storage (Linear8bitLt, LLM.int8(): int8 rows with one absmax each, its product in
// models/int8_weight.h). The weight gets no gradient; the input does.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/quant4bit.h"
#include "util/torch_compat.h"

namespace hftrain {

// How a weight is quantised: bitsandbytes' Linear4bit settings, or Linear8bitLt's (bits 8: type, block sizes and
// double_quant unused).
struct QuantSettings {
  int bits = 4;                            // 4 (load_in_4bit) or 8 (load_in_8bit)
  kernels::Quant4Type type = kernels::Quant4Type::kNf4;
  int64_t blocksize = 64;
  bool double_quant = false;               // bnb_4bit_use_double_quant
  int64_t nested_blocksize = 256;          // the double quantisation's blocks
  torch::ScalarType compute_dtype = torch::kFloat;  // bnb_4bit_compute_dtype (4 bits; 8 bits compute in x's dtype)
  double threshold = 6.0;                  // llm_int8_threshold (8 bits): |x| from which a feature is an outlier; 0 = none
};

struct QuantizedWeight {
  QuantSettings settings;
  int64_t out = 0, in = 0;      // the weight's [out, in] shape
  torch::Tensor packed;         // uint8 [(out * in + 1) / 2, 1]: two codes a byte, the even element high; 8 bits:
                                // int8 [out, in] (bitsandbytes' CB)
  torch::Tensor absmax;         // float32 [blocks]; uint8 codes of (absmax - offset) with double quantisation;
                                // 8 bits: float32 [out], each row's absmax (bitsandbytes' SCB)
  torch::Tensor quant_map;      // float32 [16]: the code values (4 bits only)
  torch::Tensor nested_absmax;  // float32 [ceil(blocks / nested_blocksize)] (double quantisation only)
  torch::Tensor nested_quant_map;  // float32 [256] (double quantisation only)
  float offset = 0.0f;          // the mean absmax subtracted before double quantisation
  torch::ScalarType source_dtype = torch::kFloat;  // the weight's dtype before quantisation (the quant state's dtype)

  bool nested() const { return nested_absmax.defined(); }
  bool eight_bit() const { return settings.bits == 8; }
  int64_t numel() const { return out * in; }
  // The float32 absmax of every block (dequantised from the nested state when there is one).
  torch::Tensor block_absmax() const;
  // Rows [row0, row1) of W as [row1 - row0, in] in `dtype` (float32 or bfloat16: code value * absmax in
  // float32, then rounded; other dtypes converted from float32). `absmax` is block_absmax().
  torch::Tensor dequantize_rows(int64_t row0, int64_t row1, torch::ScalarType dtype, const torch::Tensor& absmax) const;
  // The whole weight (merging, tests).
  torch::Tensor dequantize(torch::ScalarType dtype) const;
  // Bytes of the storage: packed codes and block scales (the code tables are shared by every weight).
  int64_t storage_bytes() const;
};

// Quantises a floating [out, in] weight (any floating dtype; read as float32) to settings.bits. On the meta
// device the result holds meta tensors of the right shapes.
QuantizedWeight quantize_weight(const torch::Tensor& weight_out_in, const QuantSettings& settings);

// Elements of a tile: the forward / backward passes dequantise about this many at a time (rows of the weight
// whose product fills it, at least one row).
int64_t quant_tile_elements();
void set_quant_tile_elements(int64_t elements);  // tests: several tiles on a tiny weight; <= 0 restores the default

// y = x W^T + b with W the quantised weight (b may be undefined), in the compute dtype: autocast's dtype when
// autocast is on, else the settings' compute_dtype; the output is returned in that dtype under autocast and in
// x's dtype otherwise (bitsandbytes' Linear4bit). Gradients reach x (and b), never W. An 8-bit W takes
// LLM.int8()'s decomposed product (int8_linear, models/int8_weight.h).
torch::Tensor quantized_linear(const torch::Tensor& x, const std::shared_ptr<const QuantizedWeight>& weight,
                               const torch::Tensor& bias);

// Row norms of W + scaling * B A ([out], float32, no gradient), a tile of rows at a time: DoRA's weight norm.
torch::Tensor quantized_adapted_row_norms(const QuantizedWeight& weight, const torch::Tensor& lora_B,
                                          const torch::Tensor& lora_A, double scaling);

}  // namespace hftrain
