// The fused, chunked language-model loss (see lm_loss.h).
#include "models/lm_loss.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cross_entropy.h"
#include "kernels/kernel_choice.h"
#include "kernels/row_kernels.h"
#include "models/fused_linear.h"
#include "util/autocast.h"
#include "util/error.h"

namespace hftrain {
namespace {

// Adds the cross-entropy of the rows of fp32 logits `z` [n, V] against labels `yc` [n, 1] to `total`; with
// `gradient`, returns d (scale * loss) / d z, formed in place over z. The fused row kernel of z's memory
// (kernels/row_kernels.h: the host's, or a CUDA device's), LibTorch's ops otherwise (HFTRAIN_KERNELS=torch, a
// device without kernels).
torch::Tensor scored_rows(torch::Tensor z, const torch::Tensor& yc, double epsilon, double scale, bool gradient,
                          bool labels_checked, torch::Tensor& total) {
  const int64_t vocab = z.size(1);
  const kernels::RowKernels* row_kernels = kernels::row_kernels_on(z.device());
  if (row_kernels != nullptr && z.scalar_type() == torch::kFloat && z.is_contiguous()) {
    const torch::Tensor labels = yc.to(torch::kLong).contiguous();
    torch::Tensor row_loss = torch::empty({z.size(0)}, z.options());
    kernels::count_fused_call(kernels::FusedKernel::kCrossEntropy);
    kernels::CrossEntropyRows p;
    p.logits = z.data_ptr<float>();
    p.rows = z.size(0);
    p.vocab = vocab;
    p.labels = labels.data_ptr<int64_t>();
    p.epsilon = static_cast<float>(epsilon);
    p.scale = static_cast<float>(scale);
    p.gradient = gradient;
    p.labels_checked = labels_checked;
    try {
      row_kernels->cross_entropy_rows(p, row_loss.data_ptr<float>());
    } catch (const std::out_of_range& e) {
      throw RuntimeFailure(std::string("the language-model loss: ") + e.what());
    }
    total += row_loss.sum();
    return z;
  }
  const torch::Tensor lse = z.logsumexp(1, /*keepdim=*/true);
  torch::Tensor row_loss = (lse - z.gather(1, yc)) * (1.0 - epsilon);
  if (epsilon != 0) row_loss = row_loss + (lse - z.mean(1, /*keepdim=*/true)) * epsilon;
  total += row_loss.sum();
  if (!gradient) return torch::Tensor();
  torch::Tensor g = z.sub_(lse).exp_();
  g.scatter_add_(1, yc, torch::full({z.size(0), 1}, -(1.0 - epsilon), g.options()));
  if (epsilon != 0) g.sub_(epsilon / static_cast<double>(vocab));
  return g.mul_(scale);
}

// Loss and gradients of scored rows `h` [M, H] (already in the compute dtype) through `w` [V, H] (+ `b`)
// against labels `y` [M], chunk by chunk. Everything is formed in forward; backward scales the stored
// gradients by the loss's incoming gradient.
class LinearCrossEntropy : public torch::autograd::Function<LinearCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h, torch::Tensor w, torch::Tensor b,
                               torch::Tensor y, double scale, double epsilon, int64_t chunk, double softcap,
                               bool labels_checked) {
    const bool has_bias = b.numel() > 0;
    const bool grad_h = h.requires_grad(), grad_w = w.requires_grad(), grad_b = has_bias && b.requires_grad();
    const int64_t rows = h.size(0), vocab = w.size(0);
    torch::Tensor dh = grad_h ? torch::empty_like(h) : torch::Tensor();
    torch::Tensor dw = grad_w ? torch::zeros(w.sizes(), w.options().dtype(torch::kFloat)) : torch::Tensor();
    torch::Tensor db = grad_b ? torch::zeros({vocab}, b.options().dtype(torch::kFloat)) : torch::Tensor();
    torch::Tensor total = torch::zeros({}, h.options().dtype(torch::kFloat));
    for (int64_t start = 0; start < rows; start += chunk) {
      const int64_t end = std::min(rows, start + chunk);
      const torch::Tensor hc = h.slice(0, start, end), yc = y.slice(0, start, end).unsqueeze(1);
      torch::Tensor z = torch::empty({end - start, vocab}, h.options());
      if (has_bias) z.copy_(b.expand({end - start, vocab}));
      matmul_into(z, hc, false, w, true, has_bias ? 1.0f : 0.0f);
      z = z.to(torch::kFloat);
      torch::Tensor t;  // soft-capped: tanh(z / cap), kept for the derivative
      if (softcap > 0) {
        t = (z / softcap).tanh_();
        z = t * softcap;
      }
      const bool gradient = grad_h || grad_w || grad_b;
      // d loss / d z = scale * (softmax - (1 - eps) onehot - eps / V), formed in place over z.
      const torch::Tensor g = scored_rows(z, yc, epsilon, scale, gradient, labels_checked, total);
      if (!gradient) continue;
      if (softcap > 0) g.mul_(1.0 - t * t);  // d cap tanh(z / cap) / dz
      if (grad_b) db += g.sum(0);
      const torch::Tensor gc = g.to(h.scalar_type());
      if (grad_h) {
        torch::Tensor rows_of_dh = dh.slice(0, start, end);
        matmul_into(rows_of_dh, gc, false, w, false, 0.0f);
      }
      if (grad_w) matmul_into(dw, gc, true, hc, false, 1.0f);  // accumulated in fp32 across chunks
    }
    ctx->save_for_backward({dh, dw, db});
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(has_bias ? b.scalar_type() : torch::kFloat);
    return total * scale;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& go = grad_outputs[0];
    auto scaled = [&](const torch::Tensor& g, int64_t dtype) {
      return g.defined() ? (g * go).to(static_cast<torch::ScalarType>(dtype)) : torch::Tensor();
    };
    return {saved[0].defined() ? saved[0] * go.to(saved[0].scalar_type()) : torch::Tensor(),
            scaled(saved[1], ctx->saved_data["w_dtype"].toInt()),
            scaled(saved[2], ctx->saved_data["b_dtype"].toInt()),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

int64_t auto_chunk_tokens(int64_t tokens, int64_t vocab, int64_t hidden) {
  const int64_t factor = std::max<int64_t>(1, (vocab + hidden - 1) / std::max<int64_t>(1, hidden));
  const int64_t liger = next_power_of_two(std::max<int64_t>(1, (tokens + factor - 1) / factor));
  // Never below what keeps a chunk's logits at 2^23 values (32 MiB in fp32): smaller chunks save little
  // more memory and make the GEMMs short and the fp32 weight-gradient sums many (measured: 32-token chunks
  // at vocabulary 32k trained 1.5x slower than full logits on 2 cores).
  int64_t floor = 1;
  while (floor * 2 * std::max<int64_t>(1, vocab) <= (int64_t{1} << 23)) floor *= 2;
  return std::max(liger, floor);
}

torch::Tensor linear_cross_entropy(const torch::Tensor& features, const torch::Tensor& weight, const torch::Tensor& bias,
                                   const torch::Tensor& labels, double epsilon, double denominator, int64_t chunk_tokens,
                                   double softcap, const ScoredLabels& known) {
  const int64_t hidden = features.size(-1);
  const torch::Tensor flat_labels = labels.reshape({-1});
  // The scored rows in order: nonzero reads their count back from the device; a stable descending sort of the
  // keep flags puts the same rows first, in the same order, and the host's count takes that many.
  const torch::Tensor keep = flat_labels.ne(-100);
  const torch::Tensor scored =
      known.count < 0 ? keep.nonzero().squeeze(1)
                      : std::get<1>(keep.to(torch::kUInt8).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true)).slice(0, 0, known.count);
  const bool labels_checked = known.count == 0 || (known.count > 0 && known.smallest >= 0 && known.largest < weight.size(0));
  torch::Tensor h = features.reshape({-1, hidden}).index_select(0, scored);
  const torch::Tensor y = flat_labels.index_select(0, scored);
  const int64_t rows = h.size(0);
  if (chunk_tokens <= 0) chunk_tokens = auto_chunk_tokens(rows, weight.size(0), hidden);
  // The casts autocast would make for linear, as ordinary ops (their backward casts the gradients back).
  torch::Tensor w = weight, b = bias.defined() ? bias : torch::empty({0}, weight.options());
  const torch::ScalarType compute = current_autocast_dtype();
  if (compute != torch::kFloat) {
    h = h.to(compute);
    w = w.to(compute);
    if (bias.defined()) b = b.to(compute);
  }
  // HF divides by the batch's label-token count unless num_items_in_batch is given (0 tokens: 0 / 0).
  const double scale = denominator > 0 ? 1.0 / denominator : 1.0 / static_cast<double>(rows);
  return LinearCrossEntropy::apply(h, w, b, y, scale, epsilon, std::max<int64_t>(1, chunk_tokens), softcap, labels_checked);
}

}  // namespace hftrain
