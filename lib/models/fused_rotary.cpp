// Rotary position embedding as an autograd operation over the fused kernels (see fused_rotary.h).
#include "models/fused_rotary.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/kernel_choice.h"
#include "kernels/row_kernels.h"

namespace hftrain {
namespace {

kernels::RowType row_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? kernels::RowType::kBF16 : kernels::RowType::kF32;
}

// The kernel's description of x (its last dim contiguous) against tables cos / sin, written to out.
kernels::RotaryRows rotary_rows(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                torch::Tensor& out, bool backward) {
  kernels::RotaryRows p;
  p.x = x.data_ptr();
  p.x_type = row_type(x);
  p.batch = x.size(0), p.heads = x.size(1), p.tokens = x.size(2), p.dim = x.size(3), p.rotary = cos.size(-1);
  for (int i = 0; i < 3; ++i) p.x_stride[i] = x.stride(i);
  p.cos = cos.data_ptr(), p.sin = sin.data_ptr();
  p.table_type = row_type(cos);
  p.table_batch = cos.size(0);
  p.out = out.data_ptr();
  p.out_type = row_type(out);
  p.backward = backward;
  return p;
}

class FusedRotary : public torch::autograd::Function<FusedRotary> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& t, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    torch::Tensor out = torch::empty(t.sizes(), t.options().dtype(torch::promote_types(t.scalar_type(), cos.scalar_type())));
    kernels::row_kernels_at(t.device()).rotary_rows(rotary_rows(t, cos, sin, out, /*backward=*/false));
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["input_dtype"] = static_cast<int64_t>(t.scalar_type());
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["input_dtype"].toInt());
    torch::Tensor dy = grads[0];
    if (dy.stride(3) != 1) dy = dy.contiguous();
    torch::Tensor dx = torch::empty(dy.sizes(), dy.options().dtype(dtype));
    kernels::row_kernels_at(dy.device()).rotary_rows(rotary_rows(dy, saved[0], saved[1], dx, /*backward=*/true));
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

bool floating_row(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16;
}

bool fusable(const torch::Tensor& t, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (kernels::row_kernels_on(t.device()) == nullptr || t.dim() != 4 || t.numel() == 0 || t.stride(3) != 1) return false;
  const int64_t rd = cos.dim() == 4 ? cos.size(3) : -1;
  return floating_row(t) && floating_row(cos) && sin.scalar_type() == cos.scalar_type() && cos.device() == t.device() &&
         sin.device() == t.device() && cos.sizes() == sin.sizes() && cos.is_contiguous() && sin.is_contiguous() &&
         (cos.size(0) == 1 || cos.size(0) == t.size(0)) && cos.size(1) == 1 && cos.size(2) == t.size(2) && rd > 0 &&
         rd % 2 == 0 && rd <= t.size(3) && !(t.requires_grad() && (cos.requires_grad() || sin.requires_grad()));
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const auto half = x.size(-1) / 2;
  return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

}  // namespace

torch::Tensor apply_rotary(const torch::Tensor& t, const torch::Tensor& cos, const torch::Tensor& sin) {
  if (fusable(t, cos, sin)) {
    kernels::count_fused_call(kernels::FusedKernel::kRotary);
    return FusedRotary::apply(t, cos, sin);
  }
  const int64_t rd = cos.size(-1), d = t.size(-1);
  if (rd == d) return t * cos + rotate_half(t) * sin;
  const auto r = t.narrow(-1, 0, rd);
  return torch::cat({r * cos + rotate_half(r) * sin, t.narrow(-1, rd, d - rd)}, -1);
}

}  // namespace hftrain
