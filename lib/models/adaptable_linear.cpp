// The adaptable linear layer and its LoRA / DoRA path (see adaptable_linear.h).
#include "models/adaptable_linear.h"

#include <cmath>
#include <string>

#include "models/construction.h"
#include "models/fused_linear.h"
#include "util/error.h"

namespace hftrain {

AdaptableLinearImpl::AdaptableLinearImpl(torch::Tensor w, torch::Tensor b, Layout layout) : layout_(layout) {
  weight = register_parameter("weight", std::move(w));
  if (b.defined()) bias = register_parameter("bias", std::move(b));
}

int64_t AdaptableLinearImpl::in_features() const {
  if (quantized_) return quantized_->in;
  return layout_ == Layout::kOutIn ? weight.size(1) : weight.size(0);
}
int64_t AdaptableLinearImpl::out_features() const {
  if (quantized_) return quantized_->out;
  return layout_ == Layout::kOutIn ? weight.size(0) : weight.size(1);
}

torch::Tensor AdaptableLinearImpl::weight_out_in() const {
  if (quantized_) return quantized_->dequantize(torch::kFloat);
  return layout_ == Layout::kOutIn ? weight : weight.t();
}

torch::Tensor AdaptableLinearImpl::base_output(const torch::Tensor& x, bool with_bias) const {
  if (quantized_) return quantized_linear(x, quantized_, with_bias ? bias : torch::Tensor());
  return linear_product(x, weight, with_bias ? bias : torch::Tensor(), layout_ == Layout::kInOut);
}

torch::Tensor AdaptableLinearImpl::base_product(const torch::Tensor& xd) const {
  if (quantized_) return quantized_linear(xd, quantized_, torch::Tensor());
  return torch::nn::functional::linear(xd, weight_out_in());
}

torch::Tensor AdaptableLinearImpl::adapted_row_norms(const LowRankAdapter& a) const {
  if (quantized_) return quantized_adapted_row_norms(*quantized_, a.lora_B.detach(), a.lora_A.detach(), a.scaling);
  const torch::Tensor w = weight_out_in();
  return (w + a.scaling * torch::matmul(a.lora_B, a.lora_A).to(w.scalar_type())).norm(2, /*dim=*/1).detach();
}

void AdaptableLinearImpl::quantize_base(const QuantSettings& settings) {
  if (adapter_) throw RuntimeFailure("quantising a linear layer that already carries an adapter");
  if (quantized_) {  // loaded quantised: the run chooses the compute dtype (and the 8-bit threshold) alone
    const QuantSettings& held = quantized_->settings;
    if (held.bits != settings.bits || (held.bits == 4 && (held.type != settings.type || held.double_quant != settings.double_quant)))
      throw RuntimeFailure("quantising a linear layer held quantised in other settings");
    quantized_->settings.compute_dtype = settings.compute_dtype;
    quantized_->settings.threshold = settings.threshold;
    return;
  }
  quantized_ = std::make_shared<QuantizedWeight>(quantize_weight(weight_out_in(), settings));
  hold_codes_as_weight();
}

void AdaptableLinearImpl::hold_codes_as_weight() {
  torch::NoGradGuard no_grad;
  weight.set_requires_grad(false);
  weight.set_data(quantized_->packed);
  quantized_->packed = weight;  // one tensor: what moves or partitions the parameter moves the codes the product reads
}

void AdaptableLinearImpl::quantize_base(QuantizedWeight quantized) {
  if (adapter_) throw RuntimeFailure("quantising a linear layer that already carries an adapter");
  if (quantized.out != out_features() || quantized.in != in_features())
    throw RuntimeFailure("a quantised weight [" + std::to_string(quantized.out) + ", " + std::to_string(quantized.in) +
                         "] for a linear layer [" + std::to_string(out_features()) + ", " + std::to_string(in_features()) + "]");
  const torch::Device device = weight.device();
  for (torch::Tensor* t : {&quantized.packed, &quantized.absmax, &quantized.quant_map, &quantized.nested_absmax, &quantized.nested_quant_map})
    if (t->defined()) *t = t->to(device);
  quantized_ = std::make_shared<QuantizedWeight>(std::move(quantized));
  hold_codes_as_weight();
}

void AdaptableLinearImpl::dequantize_base() {
  if (!quantized_) return;
  const torch::Tensor w = quantized_->dequantize(torch::kFloat);
  quantized_.reset();
  torch::NoGradGuard no_grad;
  weight.set_data(layout_ == Layout::kOutIn ? w : w.t().contiguous());
  weight.set_requires_grad(true);
}

void AdaptableLinearImpl::to(torch::Dtype dtype, bool non_blocking) {
  if (!quantized_) return torch::nn::Module::to(dtype, non_blocking);
  const torch::Tensor packed = weight.data();
  torch::nn::Module::to(dtype, non_blocking);
  weight.set_data(packed);
}

void AdaptableLinearImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  to(device, non_blocking);
  to(dtype, non_blocking);
}

void AdaptableLinearImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  if (!quantized_) return;
  QuantizedWeight& q = *quantized_;
  for (torch::Tensor* t : {&q.absmax, &q.quant_map, &q.nested_absmax, &q.nested_quant_map})
    if (t->defined()) *t = t->to(device, non_blocking);
  q.packed = weight;  // moved with the parameter
}

torch::Tensor AdaptableLinearImpl::forward(const torch::Tensor& x) {
  if (!adapter_) return base_output(x, /*with_bias=*/true);
  const LowRankAdapter& a = *adapter_;
  const bool drop = a.dropout > 0 && is_training();
  const torch::Tensor xd = drop ? torch::dropout(x, a.dropout, /*train=*/true) : x;
  const torch::Tensor low_rank =
      torch::nn::functional::linear(torch::nn::functional::linear(xd, a.lora_A), a.lora_B) * a.scaling;
  if (!a.magnitude.defined()) return base_output(x, true) + low_rank;
  // DoRA: m / ||W + s B A||_row scales the whole adapted weight; the norm is a constant for backward.
  const torch::Tensor norm = adapted_row_norms(a);
  const torch::Tensor scale = (a.magnitude / norm).to(low_rank.scalar_type());
  if (!drop) {  // m / ||V|| (W x + s B A x) + b, as the paper writes it (no cancellation against the base output)
    const torch::Tensor y = scale * (base_output(x, false) + low_rank);
    return bias.defined() ? y + bias : y;
  }
  // With dropout on the adapter's input, PEFT's form: the base output of x, plus the rescaling of W xd.
  return base_output(x, true) + (scale - 1) * base_product(xd) + scale * low_rank;
}

void AdaptableLinearImpl::attach_adapter(int64_t r, double scaling, double dropout, bool dora, const std::string& init) {
  if (adapter_) throw RuntimeFailure("a LoRA adapter is already attached to this layer");
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(weight.device());
  // Drawn on the host and then moved, as PEFT builds adapters before moving them to the base layer's device:
  // the same seed gives the same adapter on a GPU as on the CPU.
  const auto draw_options = weight.is_meta() ? options : options.device(torch::kCPU);
  LowRankAdapter a;
  a.scaling = scaling;
  a.dropout = dropout;
  a.lora_A = torch::empty({r, in_features()}, draw_options);
  a.lora_B = torch::empty({out_features(), r}, draw_options);
  {
    torch::NoGradGuard no_grad;
    // nn.Linear's own initialisation of a weight: kaiming-uniform with a = sqrt(5).
    auto linear_init = [](torch::Tensor& t) { torch::nn::init::kaiming_uniform_(t, std::sqrt(5.0)); };
    if (!weight.is_meta()) {
      if (init == "gaussian") {
        a.lora_A.normal_(0.0, 1.0 / static_cast<double>(r));
        a.lora_B.zero_();
      } else if (init == "false") {
        linear_init(a.lora_A);
        linear_init(a.lora_B);
      } else {
        linear_init(a.lora_A);
        a.lora_B.zero_();
      }
    }
  }
  a.lora_A = a.lora_A.to(weight.device());
  a.lora_B = a.lora_B.to(weight.device());
  a.lora_A = register_module("lora_A", std::make_shared<torch::nn::Module>())->register_parameter("weight", a.lora_A);
  a.lora_B = register_module("lora_B", std::make_shared<torch::nn::Module>())->register_parameter("weight", a.lora_B);
  if (dora) {
    torch::Tensor m = torch::empty({out_features()}, options);
    if (!weight.is_meta()) {
      torch::NoGradGuard no_grad;
      m.copy_(quantized_ ? quantized_adapted_row_norms(*quantized_, a.lora_B, a.lora_A, scaling)
                         : (weight_out_in().to(torch::kFloat) + scaling * torch::matmul(a.lora_B, a.lora_A)).norm(2, 1));
    }
    a.magnitude = register_parameter("lora_magnitude_vector", m);
  }
  adapter_ = a;
}

torch::Tensor AdaptableLinearImpl::merged_weight_out_in() const {
  torch::NoGradGuard no_grad;
  torch::Tensor w = weight_out_in().to(torch::kFloat);
  if (!adapter_) return w.clone();
  const LowRankAdapter& a = *adapter_;
  torch::Tensor v = w + a.scaling * torch::matmul(a.lora_B.to(torch::kFloat), a.lora_A.to(torch::kFloat));
  if (!a.magnitude.defined()) return v;
  return a.magnitude.to(torch::kFloat).unsqueeze(1) * v / v.norm(2, 1, /*keepdim=*/true);
}

Conv1D::Conv1D(int64_t in, int64_t out)
    : AdaptableLinearImpl(torch::empty({in, out}, parameter_options()), torch::zeros({out}, parameter_options()),
                          Layout::kInOut) {}

}  // namespace hftrain
