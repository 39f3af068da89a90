// LayerNorm and RMSNorm as autograd operations over the fused kernels (see fused_norms.h).
#include "models/fused_norms.h"

#include <torch/csrc/autograd/custom_function.h>

#include "kernels/kernel_choice.h"
#include "kernels/normalization.h"
#include "kernels/row_kernels.h"
#include "models/kernel_arguments.h"

namespace hftrain {
namespace {

float* data_or_null(const torch::Tensor& t) { return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr; }


// Per-row statistics, fp32, beside the rows.
torch::Tensor row_stats(const torch::Tensor& x, int64_t rows) { return torch::empty({rows}, x.options().dtype(torch::kFloat)); }

// With a residual (not empty), the input is x + residual: outputs {y, x + residual}, and the gradient of the sum
// (the residual stream's, from later layers) is added to dx, which is then the gradient of x and of residual both.
torch::Tensor norm_input(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& residual,
                         torch::Tensor& sum) {
  ctx->saved_data["fused_add"] = residual.numel() > 0;
  if (residual.numel() == 0) return x;
  sum = torch::empty_like(x);
  return sum;
}

torch::autograd::variable_list norm_outputs(const torch::Tensor& y, const torch::Tensor& sum) {
  return sum.defined() ? torch::autograd::variable_list{y, sum} : torch::autograd::variable_list{y};
}

// dy (zeros when y went unused) and the sum's gradient from elsewhere (null when none).
std::pair<torch::Tensor, const float*> norm_output_grads(const torch::autograd::variable_list& grads, const torch::Tensor& x,
                                                          torch::Tensor& d_sum) {
  const torch::Tensor dy = grads[0].defined() ? grads[0].to(x.scalar_type()).contiguous() : torch::zeros_like(x);
  if (grads.size() > 1 && grads[1].defined()) d_sum = grads[1].contiguous();
  return {dy, data_or_null(d_sum)};
}

class FusedLayerNorm : public torch::autograd::Function<FusedLayerNorm> {
 public:
  // `b` empty: no bias. `residual` empty: no residual add.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& residual, const torch::Tensor& w, const torch::Tensor& b,
                                                double eps) {
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor sum;
    const torch::Tensor input = norm_input(ctx, x, residual, sum);
    torch::Tensor y = torch::empty_like(x), mean = row_stats(x, rows), rstd = row_stats(x, rows);
    row.layer_norm_forward(x.data_ptr<float>(), data_or_null(residual), data_or_null(sum), w.data_ptr<float>(),
                                data_or_null(b), y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), rows,
                                cols, static_cast<float>(eps));
    ctx->save_for_backward({input, w, mean, rstd});
    ctx->saved_data["bias"] = b.numel() > 0;
    return norm_outputs(y, sum);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    torch::Tensor d_sum;
    const auto [dy, d_sum_data] = norm_output_grads(grads, x, d_sum);
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    const bool bias = ctx->saved_data["bias"].toBool();
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dw = ctx->needs_input_grad(2) ? torch::empty_like(w) : torch::Tensor();
    torch::Tensor db = bias && ctx->needs_input_grad(3) ? torch::empty_like(w) : torch::Tensor();
    row.layer_norm_backward(x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr<float>(), d_sum_data,
                                 mean.data_ptr<float>(), rstd.data_ptr<float>(), dx.data_ptr<float>(), data_or_null(dw),
                                 data_or_null(db), rows, cols);
    return {dx, ctx->saved_data["fused_add"].toBool() ? dx : torch::Tensor(), dw, db, torch::Tensor()};
  }
};

// fp32 rows, with the residual add when one is given; or bf16 rows (no residual), rounded where HF's RMSNorm on a
// bf16 model rounds (kernels/normalization.h).
class FusedRmsNorm : public torch::autograd::Function<FusedRmsNorm> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& residual, const torch::Tensor& w, double eps) {
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor sum;
    const torch::Tensor input = norm_input(ctx, x, residual, sum);
    torch::Tensor y = torch::empty_like(x), rstd = row_stats(x, rows);
    if (x.scalar_type() == torch::kBFloat16)
      row.rms_norm_forward_bf16(bf16_bits(x), bf16_bits(w), bf16_bits(y), rstd.data_ptr<float>(), rows, cols,
                                     static_cast<float>(eps));
    else
      row.rms_norm_forward(x.data_ptr<float>(), data_or_null(residual), data_or_null(sum), w.data_ptr<float>(),
                                y.data_ptr<float>(), rstd.data_ptr<float>(), rows, cols, static_cast<float>(eps));
    ctx->save_for_backward({input, w, rstd});
    return norm_outputs(y, sum);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const kernels::RowKernels& row = kernels::row_kernels_at(x.device());
    torch::Tensor d_sum;
    const auto [dy, d_sum_data] = norm_output_grads(grads, x, d_sum);
    const int64_t cols = w.numel(), rows = x.numel() / cols;
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dw = ctx->needs_input_grad(2) ? torch::empty_like(w) : torch::Tensor();
    if (x.scalar_type() == torch::kBFloat16)
      row.rms_norm_backward_bf16(bf16_bits(x), bf16_bits(w), bf16_bits(dy), rstd.data_ptr<float>(), bf16_bits(dx),
                                      dw.defined() ? bf16_bits(dw) : nullptr, rows, cols);
    else
      row.rms_norm_backward(x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr<float>(), d_sum_data,
                                 rstd.data_ptr<float>(), dx.data_ptr<float>(), data_or_null(dw), rows, cols);
    return {dx, ctx->saved_data["fused_add"].toBool() ? dx : torch::Tensor(), dw, torch::Tensor()};
  }
};

// t in x's memory, of `dtype`, contiguous: as the kernels take it.
bool kernel_ready(const torch::Tensor& t, const torch::Tensor& x, torch::ScalarType dtype) {
  return t.device() == x.device() && t.scalar_type() == dtype && t.is_contiguous();
}

}  // namespace

namespace {

// Whether `norm` runs on the fused kernel for input x: fp32 tensors, or (bf16 = true) bf16 ones, in a memory that has
// the kernels (the host, or a CUDA device where they are built).
bool layer_norm_fusable(const torch::nn::LayerNorm& norm, const torch::Tensor& x, bool bf16) {
  const auto& options = norm->options;
  const torch::Tensor& w = norm->weight;
  const torch::Tensor& b = norm->bias;
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
  return kernels::row_kernels_on(x.device()) != nullptr && options.elementwise_affine() &&
         options.normalized_shape().size() == 1 && x.dim() >= 1 && w.defined() && x.size(-1) == w.numel() &&
         x.numel() > 0 && kernel_ready(x, x, dtype) && kernel_ready(w, x, dtype) &&
         (!b.defined() || kernel_ready(b, x, dtype));
}

// fp32 or bf16 rows and weight of one dtype.
bool rms_norm_fusable(const torch::Tensor& x, const torch::Tensor& weight) {
  const auto dtype = x.scalar_type();
  return kernels::row_kernels_on(x.device()) != nullptr && (dtype == torch::kFloat || dtype == torch::kBFloat16) &&
         x.dim() >= 1 && x.numel() > 0 && kernel_ready(x, x, dtype) && weight.defined() &&
         kernel_ready(weight, x, dtype) && weight.dim() == 1 && x.size(-1) == weight.numel();
}

torch::Tensor bias_or_empty(const torch::Tensor& b) { return b.defined() ? b : torch::empty({0}); }

}  // namespace

torch::Tensor apply_layer_norm(torch::nn::LayerNorm norm, const torch::Tensor& x) {
  const torch::Tensor& w = norm->weight;
  const torch::Tensor& b = norm->bias;
  // bf16 input and parameters (mixed precision; autocast leaves layer_norm alone): LibTorch 1.13's bf16 forward was
  // 8 % of a bf16 nanoGPT step. The same math in fp32 -- the statistics are computed in fp32 there too -- with the
  // output and the gradients rounded to bf16 by the casts around it.
  const bool bf16 = x.scalar_type() == torch::kBFloat16 && w.defined() && w.scalar_type() == torch::kBFloat16 &&
                    (!b.defined() || b.scalar_type() == torch::kBFloat16);
  if (!layer_norm_fusable(norm, x, bf16)) return norm(x);
  const auto as_computed = [bf16](const torch::Tensor& t) { return bf16 ? t.to(torch::kFloat) : t; };
  kernels::count_fused_call(kernels::FusedKernel::kLayerNorm);
  const torch::Tensor y = FusedLayerNorm::apply(as_computed(x), torch::empty({0}), as_computed(w),
                                                b.defined() ? as_computed(b) : torch::empty({0}), norm->options.eps())[0];
  return bf16 ? y.to(torch::kBFloat16) : y;
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm(torch::nn::LayerNorm norm, const torch::Tensor& x,
                                                       const torch::Tensor& update) {
  if (update.sizes() == x.sizes() && kernel_ready(update, x, torch::kFloat) && layer_norm_fusable(norm, x, /*bf16=*/false)) {
    kernels::count_fused_call(kernels::FusedKernel::kLayerNorm);
    kernels::count_fused_call(kernels::FusedKernel::kResidualAdd);
    const auto out = FusedLayerNorm::apply(x, update, norm->weight, bias_or_empty(norm->bias), norm->options.eps());
    return {out[1], out[0]};
  }
  const torch::Tensor sum = x + update;
  return {sum, apply_layer_norm(norm, sum)};
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  if (rms_norm_fusable(x, weight)) {
    kernels::count_fused_call(kernels::FusedKernel::kRmsNorm);
    return FusedRmsNorm::apply(x, torch::empty({0}), weight, eps)[0];
  }
  auto h = x.to(torch::kFloat);
  auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * torch::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

std::pair<torch::Tensor, torch::Tensor> add_rms_norm(const torch::Tensor& x, const torch::Tensor& update,
                                                     const torch::Tensor& weight, double eps) {
  if (update.sizes() == x.sizes() && x.scalar_type() == torch::kFloat && kernel_ready(update, x, torch::kFloat) &&
      rms_norm_fusable(x, weight)) {
    kernels::count_fused_call(kernels::FusedKernel::kRmsNorm);
    kernels::count_fused_call(kernels::FusedKernel::kResidualAdd);
    const auto out = FusedRmsNorm::apply(x, update, weight, eps);
    return {out[1], out[0]};
  }
  const torch::Tensor sum = x + update;
  return {sum, rms_norm(sum, weight, eps)};
}

}  // namespace hftrain
