// GELU and SwiGLU as autograd operations over the fused kernels (see fused_activations.h).
#include "models/fused_activations.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/activation.h"
#include "kernels/kernel_choice.h"
#include "kernels/row_kernels.h"
#include "models/kernel_arguments.h"

namespace hftrain {
namespace {


// fp32: y saved for backward (the gate read back from it); bf16: x alone (the gate evaluated again).
class FusedGelu : public torch::autograd::Function<FusedGelu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, bool tanh) {
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    torch::Tensor y = torch::empty_like(x);
    const auto form = tanh ? kernels::GeluForm::kTanh : kernels::GeluForm::kErf;
    if (x.scalar_type() == torch::kBFloat16) {
      row.gelu_forward_bf16(bf16_bits(x), bf16_bits(y), x.numel(), form);
      ctx->save_for_backward({x});
    } else {
      row.gelu_forward(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), form);
      ctx->save_for_backward({x, y});  // y: usually saved anyway, as the next linear layer's input
    }
    ctx->saved_data["tanh"] = tanh;
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    const torch::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    torch::Tensor dx = torch::empty_like(x);
    const auto form = ctx->saved_data["tanh"].toBool() ? kernels::GeluForm::kTanh : kernels::GeluForm::kErf;
    if (x.scalar_type() == torch::kBFloat16)
      row.gelu_backward_bf16(bf16_bits(x), bf16_bits(dy), bf16_bits(dx), x.numel(), form);
    else
      row.gelu_backward(x.data_ptr<float>(), saved[1].data_ptr<float>(), dy.data_ptr<float>(), dx.data_ptr<float>(),
                             x.numel(), form);
    return {dx, torch::Tensor()};
  }
};

// fp32 or bf16 gate and up (one dtype), each kernel over that dtype's elements.
class FusedSwiGlu : public torch::autograd::Function<FusedSwiGlu> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& gate, const torch::Tensor& up) {
    const kernels::RowKernels& row = kernels::row_kernels_at(gate.device());
    torch::Tensor y = torch::empty_like(gate);
    if (gate.scalar_type() == torch::kBFloat16)
      row.swiglu_forward_bf16(bf16_bits(gate), bf16_bits(up), bf16_bits(y), gate.numel());
    else
      row.swiglu_forward(gate.data_ptr<float>(), up.data_ptr<float>(), y.data_ptr<float>(), gate.numel());
    ctx->save_for_backward({gate, up});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &gate = saved[0], &up = saved[1];
    const kernels::RowKernels& row = kernels::row_kernels_at(gate.device());
    const torch::Tensor dy = grads[0].to(gate.scalar_type()).contiguous();
    torch::Tensor dg = torch::empty_like(gate), du = torch::empty_like(up);
    if (gate.scalar_type() == torch::kBFloat16)
      row.swiglu_backward_bf16(bf16_bits(gate), bf16_bits(up), bf16_bits(dy), bf16_bits(dg), bf16_bits(du), dy.numel());
    else
      row.swiglu_backward(gate.data_ptr<float>(), up.data_ptr<float>(), dy.data_ptr<float>(), dg.data_ptr<float>(),
                               du.data_ptr<float>(), dy.numel());
    return {dg, du};
  }
};

// Contiguous fp32 or bf16 (SwiGLU's kernel rounds as LibTorch's bf16 ops do: kernels/activation.h) in a memory that
// has the kernels, and in `like`'s memory and dtype.
bool fusable(const torch::Tensor& t, const torch::Tensor& like) {
  const auto dtype = like.scalar_type();
  return kernels::row_kernels_on(like.device()) != nullptr && (dtype == torch::kFloat || dtype == torch::kBFloat16) &&
         t.device() == like.device() && t.scalar_type() == dtype && t.is_contiguous();
}

}  // namespace

torch::Tensor silu_gated(const torch::Tensor& gate, const torch::Tensor& up) {
  if (fusable(gate, gate) && fusable(up, gate) && gate.sizes() == up.sizes()) {
    kernels::count_fused_call(kernels::FusedKernel::kSwiGlu);
    return FusedSwiGlu::apply(gate, up);
  }
  return torch::silu(gate) * up;
}

torch::Tensor gelu_activation(const torch::Tensor& x, const std::string& approximate) {
  const bool fused = fusable(x, x) && (approximate == "none" || approximate == "tanh");
  if (!fused) return torch::gelu(x, approximate);
  kernels::count_fused_call(kernels::FusedKernel::kGelu);
  return FusedGelu::apply(x, approximate == "tanh");
}

}  // namespace hftrain
