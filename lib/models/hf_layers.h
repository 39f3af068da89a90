// Building blocks shared by the HF model families (gpt2, bert, llama, t5, bart): attention (manual on
// LibTorch 1.13, scaled_dot_product_attention on 2.x), HF activations by config name, HF _init_weights,
// the additive padding and causal masks, NEFTune noise, and the encoder-decoder pieces (labels shifted
// into decoder inputs, the seq2seq loss, cross-attention keys / values kept in a KvCache).
#pragma once

#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "models/adaptable_linear.h"
#include "models/fused_norms.h"  // rms_norm (T5 / Llama) and LayerNorm, for every family that includes this
#include "models/model.h"
#include "util/torch_compat.h"

namespace hftrain {

// HF ACT2FN names: gelu (erf), gelu_new / gelu_pytorch_tanh (tanh approximation), relu, silu / swish.
// Throws ConfigError naming `option` for other names.
void check_activation(const std::string& name, const std::string& option);
torch::Tensor apply_activation(const std::string& name, const torch::Tensor& x);

// Additive attention bias [B, 1, 1, T] from an attention_mask [B, T] (1 = token): 0 where attended,
// the float minimum where padding (HF's extended attention mask). Undefined in, undefined out, and undefined for a
// mask without padding (as HF's SDPA path drops such a mask): a zero bias adds nothing, and without one attention
// runs maskless (the fused kernel without a bias; on 2.x SDPA's causal flash / memory-efficient kernels).
// `has_padding`: what the host already knows of the mask (Batch::has_padding); unset, the mask is asked, which on a
// device waits for it.
torch::Tensor padding_bias(const torch::Tensor& attention_mask, torch::ScalarType dtype,
                           std::optional<bool> has_padding = std::nullopt);

// The dtype's lowest finite value as a float (HF's torch.finfo(dtype).min for float32, bf16, fp16;
// float32's for other dtypes).
float lowest_finite(torch::ScalarType dtype);

// A decoder's self-attention bias [1 or B, 1, T, past + T] for T new tokens after `past` cached ones:
// HF's causal mask times the decoder attention mask [B, past + T] (undefined = every token), then
// (1 - allowed) * finfo.min, in `dtype`.
torch::Tensor causal_bias(int64_t T, int64_t past, const torch::Tensor& decoder_mask, torch::ScalarType dtype,
                          torch::Device device);

// NEFTune (HF neftune_noise_alpha): e + U(-m, m) with m = alpha / sqrt(seq_len * hidden) for embeddings
// e [B, seq_len, hidden]; e itself when alpha is 0.
torch::Tensor add_neftune_noise(const torch::Tensor& e, double alpha);

// Encoder-decoder models (t5, bart).
// HF shift_tokens_right: decoder_start_token_id, then labels[:, :-1], with -100 read as pad_token_id.
torch::Tensor shift_tokens_right(const torch::Tensor& labels, int64_t pad_token_id, int64_t decoder_start_token_id);
// Throws RuntimeFailure naming `family` unless the batch has labels [batch, target length].
void require_seq2seq_labels(const Batch& batch, const std::string& family);
// Cross-attention keys and values of decoder layer `layer`: project() computes them from the encoder
// output; with a cache (cached generation) they are computed on the layer's first use and kept in
// cache->cross_keys / cross_values.
std::pair<torch::Tensor, torch::Tensor> cross_attention_kv(
    KvCache* cache, std::size_t layer, const std::function<std::pair<torch::Tensor, torch::Tensor>()>& project);

// How the attention scores are formed before the mask: q k^T times `scale` (0 = 1 / sqrt(head size)), then, with
// `softcap` > 0, softcap * tanh(scores / softcap) (gemma2's attn_logit_softcapping; the fused kernel and SDPA
// cannot, so a soft-capped attention runs the manual softmax).
struct ScoreRule {
  double scale = 0.0;
  double softcap = 0.0;
};

// softmax(q k^T / sqrt(d) + bias [+ causal]) v for q [B, H, Tq, D], k/v [B, H, Tk, D]; `bias` is
// additive and broadcastable to [B, H, Tq, Tk] or undefined; dropout on the probabilities when p > 0. `rule`
// changes the scale and soft-caps the scores before the bias.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                     bool causal, double dropout_p, const ScoreRule& rule = {});

// A decoder's self-attention, dispatched in one place for every decoder family: q [B, H, T, D] and the new
// tokens' k / v [B, KV, T, D] (rotated already where the family rotates). With a cache (generation) k / v
// are appended to `layer`'s entries and the tokens attend to everything cached, masked by `bias` (left
// padding); a padding-free row (`segments`) attends inside each example (on a GPU in 16 bits all at once through
// flash's variable-length entry, models/dispatched_attention; else example by example); otherwise causal attention with
// `bias` (padding) through attend() (the fused kernel, SDPA or the manual softmax). KV heads are repeated
// to the H query heads (grouped-query attention) after the cache keeps them unrepeated, except where SDPA shares
// them itself (a GPU in 16 bits, PyTorch >= 2.5, no mask: models/dispatched_attention).
torch::Tensor self_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v, const torch::Tensor& bias,
                             const std::vector<int64_t>& segments, double dropout_p, KvCache* cache,
                             std::size_t layer, const ScoreRule& rule = {});

// attend() over a padding-free row (Batch::packed_lengths): q, k, v [1, H, T, D] hold the examples of
// lengths `segments` (summing to T) one after the other, and each example attends causally to itself
// only, exactly as it would alone in a padded batch; never a [T, T] matrix.
torch::Tensor attend_packed(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const std::vector<int64_t>& segments, double dropout_p, const ScoreRule& rule = {});

// The longest sequence the positions of `batch` must reach: past + T, or, for a padding-free row, its longest example
// (positions restart at each one); for a sequence-parallel slice, that of its whole rows (SequenceSlice::length).
int64_t sequence_extent(const Batch& batch, int64_t past, int64_t T);

// The position ids [B or 1, T] of the T new tokens: Batch::position_ids when given (a padding-free row,
// or left-padded rows in batched generation), else past, past + 1, ... (on `device`).
torch::Tensor token_positions(const Batch& batch, int64_t past, int64_t T, torch::Device device);

// HF _init_weights for Linear / Embedding / LayerNorm-like parameters selected by name, as one pass over
// every parameter (Model::initialise_parameters): weights N(0, std), biases 0, norm weights 1 (names
// containing one of `norm_markers`).
InitPass hf_init_pass(double std, const std::vector<std::string>& norm_markers);

// Owns the per-forward block functions handed to checkpointed(), which keeps only their address until
// backward: the functions of the last `keep` blocks run stay alive (deque: stable references).
class CheckpointFunctions {
 public:
  using Fn = std::function<torch::Tensor(const torch::Tensor&)>;
  const Fn& hold(Fn fn, std::size_t keep) {
    fns_.push_back(std::move(fn));
    while (fns_.size() > keep) fns_.pop_front();
    return fns_.back();
  }
  // The same for blocks with a second input (checkpointed(block, x, memory)).
  using MemoryFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
  const MemoryFn& hold(MemoryFn fn, std::size_t keep) {
    memory_fns_.push_back(std::move(fn));
    while (memory_fns_.size() > keep) memory_fns_.pop_front();
    return memory_fns_.back();
  }

 private:
  std::deque<Fn> fns_;
  std::deque<MemoryFn> memory_fns_;
};

}  // namespace hftrain
