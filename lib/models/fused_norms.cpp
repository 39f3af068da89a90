// LayerNorm and RMSNorm as autograd operations over the fused kernels (see fused_norms.h).
#include "models/fused_norms.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/kernel_choice.h"
#include "kernels/normalization.h"

namespace hftrain {
namespace {

float* data_or_null(const torch::Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr; }

class FusedLayerNorm : public torch::autograd::Function<FusedLayerNorm> {
 public:
  // `b` empty: no bias.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b, double eps) {
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor y = torch::empty_like(x), mean = torch::empty({rows}), rstd = torch::empty({rows});
    kernels::layer_norm_forward(x.data_ptr<float>(), w.data_ptr<float>(), data_or_null(b), y.data_ptr<float>(),
                                mean.data_ptr<float>(), rstd.data_ptr<float>(), rows, cols, static_cast<float>(eps));
    ctx->save_for_backward({x, w, mean, rstd});
    ctx->saved_data["bias"] = b.numel() > 0;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    const bool bias = ctx->saved_data["bias"].toBool();
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dw = ctx->needs_input_grad(1) ? torch::empty_like(w) : torch::Tensor();
    torch::Tensor db = bias && ctx->needs_input_grad(2) ? torch::empty_like(w) : torch::Tensor();
    kernels::layer_norm_backward(x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr<float>(), mean.data_ptr<float>(),
                                 rstd.data_ptr<float>(), dx.data_ptr<float>(), data_or_null(dw), data_or_null(db), rows, cols);
    return {dx, dw, db, torch::Tensor()};
  }
};

class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w, double eps) {
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor y = torch::empty_like(x), rstd = torch::empty({rows});
    kernels::rms_norm_forward(x.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), rstd.data_ptr<float>(), rows,
                              cols, static_cast<float>(eps));
    ctx->save_for_backward({x, w, rstd});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dw = ctx->needs_input_grad(1) ? torch::empty_like(w) : torch::Tensor();
    kernels::rms_norm_backward(x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr<float>(), rstd.data_ptr<float>(),
                               dx.data_ptr<float>(), data_or_null(dw), rows, cols);
    return {dx, dw, torch::Tensor()};
  }
};

bool fusable(const torch::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

}  // namespace

torch::Tensor apply_layer_norm(torch::nn::LayerNorm norm, const torch::Tensor& x) {
  const auto& options = norm->options;
  const torch::Tensor& w = norm->weight;
  const torch::Tensor& b = norm->bias;
  // bf16 input and parameters (mixed precision; autocast leaves layer_norm alone): LibTorch 1.13's bf16 forward was
  // 8 % of a bf16 nanoGPT step. The same math in fp32 -- the statistics are computed in fp32 there too -- with the
  // output and the gradients rounded to bf16 by the casts around it.
  const bool bf16 = x.scalar_type() == torch::kBFloat16 && w.defined() && w.scalar_type() == torch::kBFloat16 &&
                    (!b.defined() || b.scalar_type() == torch::kBFloat16);
  const auto as_computed = [bf16](const torch::Tensor& t) { return bf16 ? t.to(torch::kFloat) : t; };
  const auto same_device_contiguous = [](const torch::Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); };
  const bool fused = kernels::fused_kernels_enabled() && options.elementwise_affine() &&
                     options.normalized_shape().size() == 1 && x.dim() >= 1 && w.defined() && x.size(-1) == w.numel() &&
                     x.numel() > 0 &&
                     (bf16 ? same_device_contiguous(x) && same_device_contiguous(w) && (!b.defined() || same_device_contiguous(b))
                           : fusable(x) && fusable(w) && (!b.defined() || fusable(b)));
  if (!fused) return norm(x);
  kernels::count_fused_call(kernels::FusedKernel::kLayerNorm);
  const torch::Tensor y = FusedLayerNorm::apply(as_computed(x), as_computed(w), b.defined() ? as_computed(b) : torch::empty({0}),
                                                options.eps());
  return bf16 ? y.to(torch::kBFloat16) : y;
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (kernels::fused_kernels_enabled() && x.dim() >= 1 && x.numel() > 0 && fusable(x) && weight.defined() &&
      fusable(weight) && weight.dim() == 1 && x.size(-1) == weight.numel()) {
    kernels::count_fused_call(kernels::FusedKernel::kRmsNorm);
    return FusedRmsNorm::apply(x, weight, eps);
  }
  auto h = x.to(torch::kFloat);
  auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

}  // namespace hftrain
