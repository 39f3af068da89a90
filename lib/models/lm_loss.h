// The language-model loss without the logits tensor: the output layer and the token cross-entropy fused
// and computed over chunks of tokens (the idea of Liger's FusedLinearCrossEntropy and of chunked CE).
// Only label tokens (!= -100) pass through the output layer; each chunk's logits [chunk, V] exist only
// while that chunk is scored, and the gradients of the features, weight and bias are formed there and
// then (the loss is the graph's end, so backward only scales them by its incoming gradient). Training
// thus never holds [tokens x vocab] logits, their log-softmax or their gradient.
#pragma once

#include <cstdint>

#include "util/torch_compat.h"

namespace hftrain {

// How a language model computes its training loss (Model::set_lm_loss, from training.chunked_lm_loss and
// training.lm_loss_chunk_tokens).
struct LmLossSettings {
  bool chunked = false;  // false: full logits, then the cross-entropy (LibTorch ops); training turns it on
  int64_t chunk_tokens = 0;  // tokens per chunk; 0 = auto_chunk_tokens
};

// Liger's rule, chunks of next_power_of_2(ceil(tokens / ceil(vocab / hidden))) tokens so that a chunk's
// logits are about as large as the features of all the tokens, but never fewer tokens than keep a chunk's
// logits at 2^23 values (the largest power of two that does).
int64_t auto_chunk_tokens(int64_t tokens, int64_t vocab, int64_t hidden);

// The loss of `features` [..., H] through the output layer (`weight` [V, H], `bias` [V] or undefined)
// against `labels` (the same leading shape, -100 = ignored): HF's token cross-entropy, with label smoothing
// `epsilon` as HF's LabelSmoother ((1 - eps) NLL + eps mean over classes of -log p). The sum over label
// tokens divided by `denominator` when it is > 0 (Batch::loss_denominator), else their mean. Under
// autocast the matrix products run in autocast's dtype (as linear would) and the softmax in fp32.
// With `softcap` > 0 the logits scored are softcap * tanh(logits / softcap) (gemma2's final_logit_softcapping),
// their gradient through tanh's derivative. Equals linear (+ the cap) + token_cross_entropy / label_smoothed_loss
// within fp32 rounding, for any chunk size.
// `known`: what the host found of the labels before they moved to the device (Batch::scored_tokens): with it the
// scored rows are picked without reading their count back, and labels known to lie in the vocabulary are not
// checked again by a read of the kernel's verdict; on a GPU each such read waits for the device.
struct ScoredLabels {
  int64_t count = -1;  // labels != -100; -1 = unknown
  int64_t smallest = 0, largest = 0;  // of those labels, when count > 0
};
torch::Tensor linear_cross_entropy(const torch::Tensor& features, const torch::Tensor& weight, const torch::Tensor& bias,
                                   const torch::Tensor& labels, double epsilon, double denominator, int64_t chunk_tokens,
                                   double softcap = 0.0, const ScoredLabels& known = {});

}  // namespace hftrain
