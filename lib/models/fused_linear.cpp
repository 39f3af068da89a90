// The linear product over oneDNN's sgemm (see fused_linear.h).
#include "models/fused_linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/gemm.h"
#include "kernels/kernel_choice.h"
#include "util/autocast.h"

namespace hftrain {
namespace {

// x2 [rows, in] (contiguous), W [out, in] or [in, out] (contiguous); y [rows, out] = x2 op(W) (+ b). No bias is
// an empty tensor (an undefined one cannot be an autograd Function's input in LibTorch 1.13).
class FusedLinear : public torch::autograd::Function<FusedLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, bool in_out) {
    const int64_t in = in_out ? weight.size(0) : weight.size(1), out = in_out ? weight.size(1) : weight.size(0);
    const torch::Tensor x2 = x.reshape({-1, in}).contiguous();
    const int64_t rows = x2.size(0);
    const bool has_bias = bias.numel() > 0;
    auto sizes = x.sizes().vec();
    sizes.back() = out;
    // The output itself, not a view of a [rows, out] result: autograd forbids in-place ops on a view that a
    // custom Function returns.
    torch::Tensor y = torch::empty(sizes, x.options());
    torch::Tensor y2 = y.view({rows, out});
    if (has_bias) y2.copy_(bias.expand({rows, out}));  // a copy: with one row, expand().contiguous() is the bias itself
    if (rows > 0)
      kernels::sgemm(false, !in_out, rows, out, in, 1.0f, x2.data_ptr<float>(), in, weight.data_ptr<float>(),
                     in_out ? out : in, has_bias ? 1.0f : 0.0f, y2.data_ptr<float>(), out);
    ctx->save_for_backward({x2, weight});
    ctx->saved_data["in_out"] = in_out;
    ctx->saved_data["has_bias"] = has_bias;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x2 = saved[0], &weight = saved[1];
    const bool in_out = ctx->saved_data["in_out"].toBool();
    const int64_t rows = x2.size(0), in = x2.size(1), out = in_out ? weight.size(1) : weight.size(0);
    const torch::Tensor dy = grads[0].reshape({rows, out}).contiguous();
    torch::Tensor dx, dw, db;
    const bool empty = rows == 0;
    if (ctx->needs_input_grad(0)) {  // dX = dY op(W)^T: [rows, out] x [out, in]
      dx = torch::empty({rows, in}, dy.options());
      if (empty) dx.zero_();
      else kernels::sgemm(false, in_out, rows, in, out, 1.0f, dy.data_ptr<float>(), out, weight.data_ptr<float>(),
                          in_out ? out : in, 0.0f, dx.data_ptr<float>(), in);
      auto sizes = grads[0].sizes().vec();
      sizes.back() = in;
      dx = dx.view(sizes);
    }
    if (ctx->needs_input_grad(1)) {  // [out, in] = dY^T X, or [in, out] = X^T dY
      dw = torch::empty(weight.sizes(), dy.options());
      if (empty) dw.zero_();
      else if (in_out) kernels::sgemm(true, false, in, out, rows, 1.0f, x2.data_ptr<float>(), in, dy.data_ptr<float>(), out, 0.0f,
                                      dw.data_ptr<float>(), out);
      else kernels::sgemm(true, false, out, in, rows, 1.0f, dy.data_ptr<float>(), out, x2.data_ptr<float>(), in, 0.0f,
                          dw.data_ptr<float>(), in);
    }
    if (ctx->needs_input_grad(2) && ctx->saved_data["has_bias"].toBool()) db = dy.sum(0);
    return {dx, dw, db, torch::Tensor()};
  }
};

bool host_fp32(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; }

}  // namespace

void matmul_into(torch::Tensor& c, const torch::Tensor& a, bool trans_a, const torch::Tensor& b, bool trans_b, float beta) {
  const torch::Tensor oa = trans_a ? a.t() : a, ob = trans_b ? b.t() : b;
  const bool fused = kernels::fused_kernels_enabled() && kernels::gemm_available() && host_fp32(a) && host_fp32(b) &&
                     host_fp32(c) && a.is_contiguous() && b.is_contiguous() && c.is_contiguous();
  if (!fused) {
    if (beta == 0.0f) torch::mm_out(c, oa, ob);
    else c.addmm_(oa, ob);
    return;
  }
  const int64_t m = oa.size(0), k = oa.size(1), n = ob.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0.0f) c.zero_();
    return;
  }
  kernels::sgemm(trans_a, trans_b, m, n, k, 1.0f, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(), b.size(1), beta,
                 c.data_ptr<float>(), n);
}

torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool weight_in_out) {
  const bool fused = kernels::fused_kernels_enabled() && kernels::gemm_available() && current_autocast_dtype() == torch::kFloat &&
                     host_fp32(x) && host_fp32(weight) && weight.dim() == 2 && weight.numel() > 0 && weight.is_contiguous() &&
                     (!bias.defined() || (host_fp32(bias) && bias.dim() == 1 && bias.is_contiguous()));
  if (fused) return FusedLinear::apply(x, weight, bias.defined() ? bias : torch::empty({0}), weight_in_out);
  if (!weight_in_out) return torch::nn::functional::linear(x, weight, bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(1);
  const torch::Tensor flat = x.reshape({-1, x.size(-1)});
  return (bias.defined() ? torch::addmm(bias, flat, weight) : torch::mm(flat, weight)).view(sizes);
}

}  // namespace hftrain
