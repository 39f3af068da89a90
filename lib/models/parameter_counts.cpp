// Parameter counts (see parameter_counts.h).
#include "models/parameter_counts.h"

#include <set>

#include "models/model.h"
#include "models/quantize_model.h"

namespace hftrain {

ParameterCounts count_parameters(const Model& model) {
  std::set<std::string> embedding_weights;
  // Submodules only: the top-level module is a model, never an embedding (and include_self needs the
  // model to be held by a shared_ptr).
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (dynamic_cast<const torch::nn::EmbeddingImpl*>(item.value().get())) embedding_weights.insert(item.key() + ".weight");
  }
  const std::map<std::string, const QuantizedWeight*> four_bit = quantized_weights(model);
  ParameterCounts c;
  std::set<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    const torch::Tensor& p = item.value();
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    auto q = four_bit.find(item.key());
    const int64_t n = q == four_bit.end() ? p.numel() : q->second->numel();  // a 4-bit weight: its [out, in], not its bytes
    c.total += n;
    if (p.requires_grad()) c.trainable += n;
    if (!embedding_weights.count(item.key())) c.non_embedding += n;
  }
  return c;
}

}  // namespace hftrain
