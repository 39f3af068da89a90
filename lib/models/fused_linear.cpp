// The linear product over oneDNN's sgemm (see fused_linear.h).
#include "models/fused_linear.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cpu_features.h"
#include "kernels/gemm.h"
#include "kernels/kernel_choice.h"
#include "util/autocast.h"

namespace hftrain {
namespace {

// The three products over contiguous fp32 host tensors: x2 [rows, in], W [out, in] or [in, out] (in_out), dY
// [rows, out]. forward: y2 [rows, out] = x2 op(W) (+ b; an empty b is none).
void product_forward(const torch::Tensor& x2, const torch::Tensor& w, const torch::Tensor& b, bool in_out, torch::Tensor& y2) {
  const int64_t rows = x2.size(0), in = x2.size(1), out = y2.size(1);
  const bool has_bias = b.numel() > 0;
  if (has_bias) y2.copy_(b.expand({rows, out}));  // a copy: with one row, expand().contiguous() is the bias itself
  if (rows > 0)
    kernels::sgemm(false, !in_out, rows, out, in, 1.0f, x2.data_ptr<float>(), in, w.data_ptr<float>(), in_out ? out : in,
                   has_bias ? 1.0f : 0.0f, y2.data_ptr<float>(), out);
}

// dX [rows, in] = dY op(W)^T: [rows, out] x [out, in]
torch::Tensor product_dx(const torch::Tensor& dy, const torch::Tensor& w, bool in_out, int64_t in) {
  const int64_t rows = dy.size(0), out = dy.size(1);
  torch::Tensor dx = torch::empty({rows, in}, dy.options());
  if (rows == 0) return dx.zero_();
  kernels::sgemm(false, in_out, rows, in, out, 1.0f, dy.data_ptr<float>(), out, w.data_ptr<float>(), in_out ? out : in, 0.0f,
                 dx.data_ptr<float>(), in);
  return dx;
}

// dW: [out, in] = dY^T X, or [in, out] = X^T dY
torch::Tensor product_dw(const torch::Tensor& dy, const torch::Tensor& x2, c10::IntArrayRef w_sizes, bool in_out) {
  const int64_t rows = x2.size(0), in = x2.size(1), out = dy.size(1);
  torch::Tensor dw = torch::empty(w_sizes, dy.options());
  if (rows == 0) return dw.zero_();
  if (in_out)
    kernels::sgemm(true, false, in, out, rows, 1.0f, x2.data_ptr<float>(), in, dy.data_ptr<float>(), out, 0.0f, dw.data_ptr<float>(), out);
  else
    kernels::sgemm(true, false, out, in, rows, 1.0f, dy.data_ptr<float>(), out, x2.data_ptr<float>(), in, 0.0f, dw.data_ptr<float>(), in);
  return dw;
}

std::vector<int64_t> with_last(c10::IntArrayRef sizes, int64_t last) {
  auto v = sizes.vec();
  v.back() = last;
  return v;
}

// y = x op(W) + b as one autograd operation over fp32 products. fp32 operands are used as they are; bf16 ones
// (autocast's casts, made by the caller) are widened exactly, and the output and the gradients are rounded back to
// bf16, as a bf16 GEMM's are. The operands are kept for backward in their own dtype, as autocast's linear keeps
// them. No bias: an empty tensor (an undefined one cannot be an autograd Function's input in LibTorch 1.13).
class FusedLinear : public torch::autograd::Function<FusedLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, bool in_out) {
    const int64_t in = in_out ? weight.size(0) : weight.size(1), out = in_out ? weight.size(1) : weight.size(0);
    const torch::Tensor x2 = x.reshape({-1, in}).contiguous();
    // The output itself, not a view of a [rows, out] result: autograd forbids in-place ops on a view that a
    // custom Function returns.
    torch::Tensor y = torch::empty(with_last(x.sizes(), out), x.options());
    torch::Tensor y2 = y.view({x2.size(0), out});
    torch::Tensor y32 = y.scalar_type() == torch::kFloat ? y2 : torch::empty({x2.size(0), out}, torch::kFloat);
    product_forward(as_fp32(x2), as_fp32(weight), as_fp32(bias), in_out, y32);
    if (!y32.is_same(y2)) y2.copy_(y32);
    ctx->save_for_backward({x2, weight});
    ctx->saved_data["in_out"] = in_out;
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x2 = saved[0], &weight = saved[1];
    const bool in_out = ctx->saved_data["in_out"].toBool();
    const int64_t out = in_out ? weight.size(1) : weight.size(0);
    const torch::Tensor dy = as_fp32(grads[0].reshape({x2.size(0), out}));
    const auto like = [](const torch::Tensor& t, const torch::Tensor& operand) { return t.to(operand.scalar_type()); };
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0))
      dx = like(product_dx(dy, as_fp32(weight), in_out, x2.size(1)), x2).view(with_last(grads[0].sizes(), x2.size(1)));
    if (ctx->needs_input_grad(1)) dw = like(product_dw(dy, as_fp32(x2), weight.sizes(), in_out), weight);
    if (ctx->needs_input_grad(2) && ctx->saved_data["has_bias"].toBool()) db = like(dy.sum(0), x2);
    return {dx, dw, db, torch::Tensor()};
  }

 private:
  static torch::Tensor as_fp32(const torch::Tensor& t) { return t.to(torch::kFloat).contiguous(); }  // no copy when fp32
};

std::optional<bool>& forced_bf16_choice() {
  static std::optional<bool> forced;
  return forced;
}

bool host_fp32(const torch::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == torch::kFloat; }

bool host_float_or_bf16(const torch::Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
}

}  // namespace

void matmul_into(torch::Tensor& c, const torch::Tensor& a, bool trans_a, const torch::Tensor& b, bool trans_b, float beta) {
  const torch::Tensor oa = trans_a ? a.t() : a, ob = trans_b ? b.t() : b;
  const auto dense = [](const torch::Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); };
  const bool ours = kernels::fused_kernels_enabled() && kernels::gemm_available() && dense(a) && dense(b) && dense(c) &&
                    host_float_or_bf16(c) && a.scalar_type() == b.scalar_type() &&
                    (host_fp32(a) ? host_fp32(c) : a.scalar_type() == torch::kBFloat16 && bf16_linear_through_fp32());
  if (!ours) {  // LibTorch's product in the operands' dtype, accumulated into c's
    if (c.scalar_type() == a.scalar_type()) {
      if (beta == 0.0f) torch::mm_out(c, oa, ob);
      else c.addmm_(oa, ob);
    } else if (beta == 0.0f) {
      c.copy_(torch::mm(oa, ob));
    } else {
      c.add_(torch::mm(oa, ob).to(c.scalar_type()));
    }
    return;
  }
  const int64_t m = oa.size(0), k = oa.size(1), n = ob.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0.0f) c.zero_();
    return;
  }
  // bf16 operands: widened exactly, multiplied and accumulated in fp32 (see bf16_linear_through_fp32), rounded once
  // into a bf16 c.
  if (a.scalar_type() == torch::kBFloat16) kernels::count_fused_call(kernels::FusedKernel::kBf16Linear);
  const torch::Tensor a32 = a.to(torch::kFloat), b32 = b.to(torch::kFloat);
  torch::Tensor c32 = c.scalar_type() == torch::kFloat ? c : beta == 0.0f ? torch::empty(c.sizes(), torch::kFloat) : c.to(torch::kFloat);
  kernels::sgemm(trans_a, trans_b, m, n, k, 1.0f, a32.data_ptr<float>(), a.size(1), b32.data_ptr<float>(), b.size(1), beta,
                 c32.data_ptr<float>(), n);
  if (!c32.is_same(c)) c.copy_(c32);
}

bool bf16_linear_through_fp32() {
  if (forced_bf16_choice()) return *forced_bf16_choice();
  static const bool through_fp32 = !simd::cpu_has_bf16_gemm();
  return through_fp32;
}

void force_bf16_linear_through_fp32(std::optional<bool> through_fp32) { forced_bf16_choice() = through_fp32; }

torch::Tensor linear_product(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, bool weight_in_out) {
  if (current_autocast_dtype() == torch::kBFloat16 && kernels::fused_kernels_enabled() && kernels::gemm_available() &&
      bf16_linear_through_fp32() && host_float_or_bf16(x) && host_float_or_bf16(weight) && weight.dim() == 2 &&
      weight.numel() > 0 && (!bias.defined() || (host_float_or_bf16(bias) && bias.dim() == 1))) {
    // autocast's casts (autograd ops: gradients return in each input's own dtype), then the products in fp32
    kernels::count_fused_call(kernels::FusedKernel::kBf16Linear);
    const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
    return FusedLinear::apply(bf16(x), bf16(weight).contiguous(),
                                        bias.defined() ? bf16(bias) : torch::empty({0}, torch::kBFloat16), weight_in_out);
  }
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
