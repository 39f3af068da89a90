// The fused attention as an autograd operation (see fused_attention.h).
#include "models/fused_attention.h"

#include <torch/csrc/autograd/custom_function.h>


#include "kernels/kernel_choice.h"
#include "util/error.h"

namespace hftrain {
namespace {

// fp32 with a contiguous last dimension (the kernels' layout); other strides are kept.
torch::Tensor as_kernel_input(const torch::Tensor& t) {
  torch::Tensor f = t.scalar_type() == torch::kFloat ? t : t.to(torch::kFloat);
  return f.stride(-1) == 1 ? f : f.contiguous();
}

// [B, H, T, d] with the memory of [B, T, H, d] (what merging the heads reads).
torch::Tensor heads_last(int64_t B, int64_t H, int64_t T, int64_t d) {
  return torch::empty({B, T, H, d}, torch::kFloat).transpose(1, 2);
}

struct Problem {
  kernels::AttentionShape shape;
  torch::Tensor bias;  // fp32 [B or 1, Tk], contiguous (or empty: none)
};

Problem problem_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& bias, double scale, bool causal) {
  Problem p;
  p.shape.batch = q.size(0);
  p.shape.heads = q.size(1);
  p.shape.queries = q.size(2);
  p.shape.keys = k.size(2);
  p.shape.dim = q.size(3);
  p.shape.scale = static_cast<float>(scale);
  p.shape.causal = causal;
  p.bias = torch::empty({0}, torch::kFloat);  // (autograd's inputs and saved tensors must be defined)
  if (bias.numel() > 0) {
    p.bias = bias.to(torch::kFloat).reshape({-1, bias.size(-1)}).expand({-1, k.size(2)}).contiguous();
    p.shape.key_bias = p.bias.data_ptr<float>();
    p.shape.key_bias_batch_stride = p.bias.size(0) == 1 ? 0 : p.bias.size(1);
  }
  return p;
}

class FusedAttention : public torch::autograd::Function<FusedAttention> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q_in, const torch::Tensor& k_in,
                               const torch::Tensor& v_in, const torch::Tensor& bias, double scale, bool causal) {
    const torch::Tensor q = as_kernel_input(q_in), k = as_kernel_input(k_in), v = as_kernel_input(v_in);
    const Problem p = problem_of(q, k, bias, scale, causal);
    torch::Tensor o = heads_last(p.shape.batch, p.shape.heads, p.shape.queries, p.shape.dim);
    torch::Tensor lse = torch::empty({p.shape.batch, p.shape.heads, p.shape.queries}, torch::kFloat);
    kernels::attention_forward(p.shape, head_layout(q), head_layout(k), head_layout(v), head_layout(o), lse.data_ptr<float>());
    ctx->save_for_backward({q, k, v, o, lse, p.bias});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["dtype"] = static_cast<int64_t>(q_in.scalar_type());
    return q_in.scalar_type() == torch::kFloat ? o : o.to(q_in.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4], &bias = saved[5];
    const Problem p = problem_of(q, k, bias, ctx->saved_data["scale"].toDouble(), ctx->saved_data["causal"].toBool());
    const torch::Tensor d_o = as_kernel_input(grads[0]);
    const int64_t B = p.shape.batch, H = p.shape.heads, d = p.shape.dim;
    torch::Tensor dq = heads_last(B, H, p.shape.queries, d), dk = heads_last(B, H, p.shape.keys, d),
                  dv = heads_last(B, H, p.shape.keys, d);
    kernels::attention_backward(p.shape, head_layout(q), head_layout(k), head_layout(v), head_layout(o), head_layout(d_o),
                                lse.data_ptr<float>(), head_layout(dq), head_layout(dk), head_layout(dv));
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    auto back = [&](const torch::Tensor& g) { return dtype == torch::kFloat ? g : g.to(dtype); };
    return {back(dq), back(dk), back(dv), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

kernels::HeadLayout head_layout(const torch::Tensor& t) {
  kernels::HeadLayout l;
  l.data = t.data_ptr<float>();
  l.batch_stride = t.stride(0);
  l.head_stride = t.stride(1);
  l.time_stride = t.stride(2);
  return l;
}

bool fused_attention_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& bias, double dropout_p) {
  if (!kernels::fused_kernels_enabled() || dropout_p > 0) return false;
  for (const torch::Tensor* t : {&q, &k, &v}) {
    if (t->dim() != 4 || !t->device().is_cpu()) return false;
    if (t->scalar_type() != torch::kFloat && t->scalar_type() != torch::kBFloat16) return false;
  }
  if (q.size(0) != k.size(0) || q.size(1) != k.size(1) || k.sizes() != v.sizes() || q.size(3) != k.size(3)) return false;
  if (!bias.defined()) return true;
  if (bias.requires_grad() || bias.dim() > 4 || !bias.device().is_cpu() || !bias.is_floating_point()) return false;
  // Per key only: every dimension but the first (batch) and the last (keys) is 1.
  for (int64_t i = 1; i + 1 < bias.dim(); ++i)
    if (bias.size(i) != 1) return false;
  const int64_t rows = bias.dim() >= 2 ? bias.size(0) : 1;
  return (rows == 1 || rows == q.size(0)) && (bias.size(-1) == k.size(2) || bias.size(-1) == 1);
}

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& bias, double scale, bool causal) {
  kernels::count_fused_call(kernels::FusedKernel::kAttention);
  return FusedAttention::apply(q, k, v, bias.defined() ? bias : torch::empty({0}, torch::kFloat), scale, causal);
}

}  // namespace hftrain
