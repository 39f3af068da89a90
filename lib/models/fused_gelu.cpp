// GELU as one autograd operation over the fused kernels (see fused_gelu.h).
#include "models/fused_gelu.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/activation.h"
#include "kernels/kernel_choice.h"

namespace hftrain {
namespace {

class FusedGelu : public torch::autograd::Function<FusedGelu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, bool tanh) {
    torch::Tensor y = torch::empty_like(x);
    const auto form = tanh ? kernels::GeluForm::kTanh : kernels::GeluForm::kErf;
    kernels::gelu_forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), form);
    ctx->save_for_backward({x});
    ctx->saved_data["tanh"] = tanh;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const torch::Tensor dy = grads[0].contiguous();
    torch::Tensor dx = torch::empty_like(x);
    const auto form = ctx->saved_data["tanh"].toBool() ? kernels::GeluForm::kTanh : kernels::GeluForm::kErf;
    kernels::gelu_backward(x.data_ptr<float>(), dy.data_ptr<float>(), dx.data_ptr<float>(), x.numel(), form);
    return {dx, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor gelu_activation(const torch::Tensor& x, const std::string& approximate) {
  const bool fused = kernels::fused_kernels_enabled() && x.device().is_cpu() && x.scalar_type() == torch::kFloat &&
                     x.is_contiguous() && (approximate == "none" || approximate == "tanh");
  if (!fused) return torch::gelu(x, approximate);
  return FusedGelu::apply(x, approximate == "tanh");
}

}  // namespace hftrain
