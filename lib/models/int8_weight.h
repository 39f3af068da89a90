// LLM.int8() (Dettmers et al. 2022, arXiv:2208.07339) as bitsandbytes' Linear8bitLt holds and applies a frozen
// weight: each row of the [out, in] weight quantised to int8 by its absmax (CB = round(w * 127 / absmax_row),
// SCB = absmax_row, float32), and the product y = x W^T + b by the mixed-precision decomposition:
//   - the input's feature columns holding any |x| >= threshold (outliers) are multiplied in the compute dtype
//     with those columns of the dequantised weight (CB * SCB / 127);
//   - the rest is quantised row by row (vector-wise: each row's absmax over its values under the threshold,
//     codes round(x * 127 / absmax), the outlier columns' codes 0), multiplied int8 x int8 -> int32 and
//     rescaled by absmax_row(x) * SCB / 127^2 in float32, plus the bias;
//   - threshold 0: no decomposition.
// The int32 product is exact: float32 products of int8 codes over at most 1024 columns at a time (every partial
// sum an integer under 2^24), summed in int32. Backward gives the input dY W with the dequantised weight (the base
// is frozen). Rounding is half to even in float32, as bitsandbytes rounds; a row of zeros gets codes 0.
#pragma once

#include <memory>

#include "models/quantized_weight.h"

namespace hftrain {

// CB and SCB of a floating [out, in] weight (settings.bits 8); meta tensors for a meta weight.
QuantizedWeight quantize_int8_rows(const torch::Tensor& weight_out_in, const QuantSettings& settings);

// Rows [row0, row1) of the dequantised weight, CB * (SCB / 127) in float32, converted to `dtype`.
torch::Tensor dequantize_int8_rows(const QuantizedWeight& w, int64_t row0, int64_t row1, torch::ScalarType dtype);

// The input's vector-wise quantisation: codes int8 [rows, in] (as float32 values), each row's absmax (float32
// [rows]) and the outlier columns (int64, ascending; empty when threshold is 0 or none reach it).
struct Int8Activations {
  torch::Tensor codes, row_absmax, outlier_columns;
};
Int8Activations quantize_int8_activations(const torch::Tensor& x2, double threshold);

// y = x W^T + b by LLM.int8()'s decomposition, in autocast's dtype when it is on, else in x's dtype; gradients
// reach x (and b).
torch::Tensor int8_linear(const torch::Tensor& x, const std::shared_ptr<const QuantizedWeight>& weight, const torch::Tensor& bias);

}  // namespace hftrain
