// Throughput figures (see speed_metrics.h).
#include "log/speed_metrics.h"

#include <set>

#include "log/metrics_format.h"
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

double training_flos(const ParameterCounts& counts, int64_t tokens) {
  return 6.0 * static_cast<double>(tokens) * static_cast<double>(counts.non_embedding);
}

nlohmann::json speed_metrics(const std::string& split, double runtime, int64_t samples, int64_t steps,
                             std::optional<int64_t> tokens) {
  nlohmann::json m;
  m[split + "_runtime"] = python_round(runtime, 4);
  if (runtime == 0) return m;
  if (samples) m[split + "_samples_per_second"] = python_round(static_cast<double>(samples) / runtime, 3);
  if (steps) m[split + "_steps_per_second"] = python_round(static_cast<double>(steps) / runtime, 3);
  if (tokens) m[split + "_tokens_per_second"] = python_round(static_cast<double>(*tokens) / runtime, 3);
  return m;
}

}  // namespace hftrain
