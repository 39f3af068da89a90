// Shared HF building blocks (see hf_layers.h).
#include "models/hf_layers.h"

#include "models/construction.h"
#include "models/dispatched_attention.h"
#include "models/fused_attention.h"
#include "models/fused_activations.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "util/error.h"
#include "util/strings.h"

namespace hftrain {

void check_activation(const std::string& name, const std::string& option) {
  if (name == "gelu" || name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "relu" || name == "silu" ||
      name == "swish")
    return;
  throw ConfigError(option + ": activation '" + name +
                    "' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish)");
}

torch::Tensor apply_activation(const std::string& name, const torch::Tensor& x) {
  if (name == "gelu") return gelu_activation(x);
  // HF NewGELUActivation (gelu_new) is 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), the same formula as
  // torch's tanh-approximate gelu (HF's gelu_pytorch_tanh), which computes it, and its gradient, in one pass
  // each instead of the seven elementwise passes HF writes out. Measured: 99.6 % of float32 results bitwise
  // equal to the written-out form, at most 4.8e-7 apart for |x| <= 16; a gpt2 of 6 x 512 at sequence 256
  // trained 12 % faster.
  // Both run on the fused kernels where they apply (models/fused_activations).
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return gelu_activation(x, "tanh");
  if (name == "relu") return torch::relu(x);
  if (name == "silu" || name == "swish") return torch::silu(x);
  throw ConfigError("activation '" + name + "' is not supported");
}

torch::Tensor padding_bias(const torch::Tensor& attention_mask, torch::ScalarType dtype, std::optional<bool> has_padding) {
  if (!attention_mask.defined() || !(has_padding ? *has_padding : !attention_mask.all().item<bool>())) return {};
  auto keep = attention_mask.to(dtype).unsqueeze(1).unsqueeze(2);  // [B, 1, 1, T]
  // HF: torch.finfo(dtype).min, the dtype's own lowest finite value (float's lowest is -inf in bf16/fp16,
  // and 0 * -inf would turn every kept position into nan).
  const double lowest = dtype == torch::kDouble     ? std::numeric_limits<double>::lowest()
                        : dtype == torch::kBFloat16 ? static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest())
                        : dtype == torch::kHalf     ? static_cast<double>(std::numeric_limits<c10::Half>::lowest())
                                                    : static_cast<double>(std::numeric_limits<float>::lowest());
  return (1.0 - keep) * lowest;
}

float lowest_finite(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? static_cast<float>(std::numeric_limits<c10::BFloat16>::lowest())
         : dtype == torch::kHalf   ? static_cast<float>(std::numeric_limits<c10::Half>::lowest())
                                   : std::numeric_limits<float>::lowest();
}

torch::Tensor causal_bias(int64_t T, int64_t past, const torch::Tensor& decoder_mask, torch::ScalarType dtype,
                          torch::Device device) {
  const int64_t K = past + T;
  auto allowed = torch::ones({T, K}, torch::TensorOptions().dtype(torch::kFloat).device(device)).tril(past).view({1, 1, T, K});
  if (decoder_mask.defined()) allowed = allowed * decoder_mask.to(torch::kFloat).view({decoder_mask.size(0), 1, 1, K});
  return ((1.0 - allowed) * lowest_finite(dtype)).to(dtype);
}

torch::Tensor add_neftune_noise(const torch::Tensor& e, double alpha) {
  if (alpha <= 0) return e;
  const double magnitude = alpha / std::sqrt(static_cast<double>(e.size(1) * e.size(2)));
  return e + torch::empty_like(e).uniform_(-magnitude, magnitude);
}

torch::Tensor shift_tokens_right(const torch::Tensor& labels, int64_t pad_token_id, int64_t decoder_start_token_id) {
  auto shifted = torch::empty_like(labels);
  shifted.select(1, 0).fill_(decoder_start_token_id);
  if (labels.size(1) > 1) shifted.slice(1, 1).copy_(labels.slice(1, 0, labels.size(1) - 1));
  return shifted.masked_fill(shifted.eq(-100), pad_token_id);
}

void require_seq2seq_labels(const Batch& batch, const std::string& family) {
  if (!batch.labels.defined() || batch.labels.dim() != 2)
    throw RuntimeFailure(family + ": the batch needs labels [batch, target length] (the decoder reads them shifted right); got " +
                         (batch.labels.defined() ? "labels of shape " + c10::str(batch.labels.sizes()) : std::string("none")));
}

std::pair<torch::Tensor, torch::Tensor> cross_attention_kv(
    KvCache* cache, std::size_t layer, const std::function<std::pair<torch::Tensor, torch::Tensor>()>& project) {
  if (!cache) return project();
  if (layer < cache->cross_keys.size() && cache->cross_keys[layer].defined())
    return {cache->cross_keys[layer], cache->cross_values[layer]};
  auto kv = project();
  if (cache->cross_keys.size() <= layer) {
    cache->cross_keys.resize(layer + 1);
    cache->cross_values.resize(layer + 1);
  }
  cache->cross_keys[layer] = kv.first;
  cache->cross_values[layer] = kv.second;
  return kv;
}

torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                     bool causal, double dropout_p, const ScoreRule& rule) {
  const double scale = rule.scale > 0 ? rule.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  if (rule.softcap <= 0 && fused_attention_applies(q, k, v, bias, dropout_p))
    return fused_attention(q, k, v, bias, scale, causal);
  const auto Tq = q.size(2), Tk = k.size(2);
#if HFTRAIN_HAS_SDPA
  if (causal && !bias.defined() && Tq == Tk && rule.scale <= 0 && rule.softcap <= 0)  // no mask tensor: flash may run
    return at::scaled_dot_product_attention(q, k, v, c10::nullopt, dropout_p, /*is_causal=*/true);
#endif
  torch::Tensor full_bias = bias;
  if (causal) {
    auto allowed = torch::ones({Tq, Tk}, q.options().dtype(torch::kBool)).tril(Tk - Tq);
    auto causal_bias = torch::zeros({Tq, Tk}, q.options())
                           .masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
    full_bias = full_bias.defined() ? full_bias + causal_bias : causal_bias;
  }
#if HFTRAIN_HAS_SDPA
  if (rule.scale <= 0 && rule.softcap <= 0)
    return at::scaled_dot_product_attention(q, k, v, full_bias, dropout_p, /*is_causal=*/false);
#endif
  // Scaled by the reciprocal, as nanoGPT's and HF llama's eager attention (the reference loops) compute it;
  // soft-capped before the mask, as HF's Gemma2 eager attention.
  auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  if (rule.softcap > 0) scores = torch::tanh(scores / rule.softcap) * rule.softcap;
  if (full_bias.defined()) scores = scores + full_bias;
  auto probs = torch::softmax(scores, -1);
  if (dropout_p > 0) probs = torch::dropout(probs, dropout_p, /*train=*/true);
  return torch::matmul(probs, v);
}

torch::Tensor self_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v, const torch::Tensor& bias,
                             const std::vector<int64_t>& segments, double dropout_p, KvCache* cache,
                             std::size_t layer, const ScoreRule& rule) {
  if (cache) std::tie(k, v) = cache->append(layer, k, v);  // cached with the KV heads, as computed
  if (!cache && !segments.empty() && rule.softcap <= 0)  // a padding-free row on a GPU: all its examples in one kernel
    if (torch::Tensor y = varlen_flash_attention(q, k, v, segments, dropout_p, rule.scale); y.defined()) return y;
  const int64_t groups = q.size(1) / k.size(1);
  if (groups > 1 && segments.empty() && !bias.defined() && rule.scale <= 0 && rule.softcap <= 0)  // GPU: heads shared
    if (torch::Tensor y = gqa_causal_attention(q, k, v, dropout_p); y.defined()) return y;
  if (groups > 1) {
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
  }
  if (!cache && !segments.empty()) return attend_packed(q, k, v, segments, dropout_p, rule);
  return attend(q, k, v, bias, /*causal=*/true, dropout_p, rule);
}

torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const std::vector<int64_t>& segments, double dropout_p, const ScoreRule& rule) {
  std::vector<torch::Tensor> outputs;
  outputs.reserve(segments.size());
  int64_t start = 0;
  for (const int64_t length : segments) {
    auto piece = [&](const torch::Tensor& t) { return t.narrow(2, start, length); };
    outputs.push_back(attend(piece(q), piece(k), piece(v), {}, /*causal=*/true, dropout_p, rule));
    start += length;
  }
  if (start != q.size(2))
    throw RuntimeFailure("padding_free: packed lengths sum to " + std::to_string(start) + ", the row holds " +
                         std::to_string(q.size(2)) + " tokens");
  return outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 2);
}

int64_t sequence_extent(const Batch& batch, int64_t past, int64_t T) {
  if (batch.sliced()) return batch.slice.length;
  if (batch.packed_lengths.empty()) return past + T;
  return *std::max_element(batch.packed_lengths.begin(), batch.packed_lengths.end());
}

torch::Tensor token_positions(const Batch& batch, int64_t past, int64_t T, torch::Device device) {
  if (batch.position_ids.defined()) return batch.position_ids.to(device);
  return torch::arange(past, past + T, torch::TensorOptions().dtype(torch::kLong).device(device)).unsqueeze(0);
}

InitPass hf_init_pass(double std, const std::vector<std::string>& norm_markers) {
  InitPass pass;
  pass.selects = [](const std::string&) { return true; };
  pass.init = [std, norm_markers](const std::string& name, torch::Tensor& p) {
    bool is_norm = false;
    for (const auto& m : norm_markers) is_norm = is_norm || name.find(m) != std::string::npos;
    const bool is_bias = ends_with(name, "bias");
    if (is_norm)
      is_bias ? p.zero_() : p.fill_(1.0);
    else if (is_bias)
      p.zero_();
    else
      p.normal_(0.0, std);
  };
  return pass;
}


}  // namespace hftrain
