// The linear layer every model family builds (nn.Linear's [out, in] layout, or HF's Conv1D [in, out]),
// able to carry a LoRA / DoRA adapter (PEFT's LoraLayer): the frozen base y = W x + b plus the low-rank
// path s * B A dropout(x), or DoRA's magnitude-normalised form. The adapter's tensors are registered on
// the layer itself as lora_A.weight [r, in], lora_B.weight [out, r] and lora_magnitude_vector [out], so
// their names are PEFT's without the adapter name. QLoRA: the base weight may be replaced by bitsandbytes'
// 4-bit storage (models/quantized_weight.h) at load; the adapter then trains over the dequantised base.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "models/quantized_weight.h"
#include "util/torch_compat.h"

namespace hftrain {

// The low-rank parts of one adapted layer. LoRA (arXiv:2106.09685): y = W x + b + s B A x. DoRA
// (arXiv:2402.09353): y = m / ||W + s B A||_row * (W + s B A) x + b, the norm treated as a constant in
// backward (the paper's section 4.3, as PEFT does).
struct LowRankAdapter {
  torch::Tensor lora_A;     // [r, in]
  torch::Tensor lora_B;     // [out, r]
  torch::Tensor magnitude;  // DoRA's m [out]; undefined for LoRA
  double scaling = 1.0;     // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora
  double dropout = 0.0;     // lora_dropout, on the input of the low-rank path while training
};

class AdaptableLinearImpl : public torch::nn::Module {
 public:
  enum class Layout { kOutIn, kInOut };  // nn.Linear / HF Conv1D
  // Adopts `weight` (and `bias`, may be undefined) as the parameters "weight" and "bias".
  AdaptableLinearImpl(torch::Tensor weight, torch::Tensor bias, Layout layout);
  torch::Tensor forward(const torch::Tensor& x);

  Layout layout() const { return layout_; }
  int64_t in_features() const;
  int64_t out_features() const;
  // The base weight as [out, in] (a view for the Conv1D layout; of a quantised base, its dequantised values in
  // float32).
  torch::Tensor weight_out_in() const;

  // QLoRA (bitsandbytes' Linear4bit): quantises the base weight to 4 bits. The parameter "weight" then holds the
  // packed uint8 codes [(out * in + 1) / 2, 1], frozen (as bitsandbytes' Params4bit), and the quant state lives
  // beside it; forward dequantises a tile of rows at a time. With settings.bits 8 (Linear8bitLt, LLM.int8()) it
  // holds the int8 codes [out, in] and the row scales live beside it. The layout no longer matters (the codes are
  // of the [out, in] weight). An adapter must not be attached yet. A layer already quantised takes the compute
  // dtype and threshold alone.
  void quantize_base(const QuantSettings& settings);
  // The same with a weight quantised elsewhere (a quantised checkpoint's), of this layer's [out, in] shape; it is
  // moved to the layer's device.
  void quantize_base(QuantizedWeight quantized);
  const QuantizedWeight* quantized() const { return quantized_.get(); }
  // Back to a plain weight: the dequantised values in float32, in the layer's layout (a merge's target).
  void dequantize_base();
  // Module::to for dtypes, keeping a quantised base's codes as they are (the bias and adapter convert).
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  // Attaches an adapter of rank r: registers lora_A / lora_B (and, for DoRA, lora_magnitude_vector set to
  // the row norms of W + s B A, PEFT's initialisation) on this layer. A and B are initialised as PEFT's
  // init_lora_weights: "true" (A kaiming-uniform with a = sqrt(5), B zero), "gaussian" (A normal with
  // std 1/r, B zero) or "false" (both as nn.Linear initialises its weight).
  void attach_adapter(int64_t r, double scaling, double dropout, bool dora, const std::string& init);
  const LowRankAdapter* adapter() const { return adapter_ ? &*adapter_ : nullptr; }
  // W + delta as [out, in], in float32: the weight merge_and_unload writes.
  torch::Tensor merged_weight_out_in() const;

  torch::Tensor weight, bias;

 private:
  // W x (+ b) in the layer's layout.
  torch::Tensor base_output(const torch::Tensor& x, bool with_bias) const;
  // W xd without the bias (DoRA's rescaling of the base output under dropout).
  torch::Tensor base_product(const torch::Tensor& xd) const;
  // ||W + s B A||_row of DoRA, float32 for a quantised base.
  torch::Tensor adapted_row_norms(const LowRankAdapter& a) const;
  Layout layout_;
  // The parameter "weight" takes the quantised codes and becomes the very tensor quantized_->packed is.
  void hold_codes_as_weight();
  std::optional<LowRankAdapter> adapter_;
  std::shared_ptr<QuantizedWeight> quantized_;
};
TORCH_MODULE(AdaptableLinear);

// HF's Conv1D (gpt2): weight [in, out], y = x W + b; new weights are empty (the family initialises them).
struct Conv1D : AdaptableLinearImpl {
  Conv1D(int64_t in, int64_t out);
};

}  // namespace hftrain
