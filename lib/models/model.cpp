// Losses shared by model families (see model.h).
#include "models/model.h"

namespace hftrain {

torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  auto shift_logits = logits.slice(1, 0, logits.size(1) - 1);
  auto shift_labels = labels.slice(1, 1, labels.size(1));
  return torch::nn::functional::cross_entropy(
      shift_logits.reshape({-1, shift_logits.size(-1)}), shift_labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
}

}  // namespace hftrain
