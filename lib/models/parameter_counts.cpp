// Parameter counts (see parameter_counts.h).
#include "models/parameter_counts.h"

#include <set>

#include "models/model.h"

namespace hftrain {

ParameterCounts count_parameters(const Model& model) {
  std::set<std::string> embedding_weights;
  // Submodules only: the top-level module is a model, never an embedding (and include_self needs the
  // model to be held by a shared_ptr).
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (dynamic_cast<const torch::nn::EmbeddingImpl*>(item.value().get())) embedding_weights.insert(item.key() + ".weight");
  }
  ParameterCounts c;
  std::set<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    c.total += p.numel();
    if (p.requires_grad()) c.trainable += p.numel();
    if (!embedding_weights.count(item.key())) c.non_embedding += p.numel();
  }
  return c;
}

}  // namespace hftrain
