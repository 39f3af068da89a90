// Throughput figures, as HF computes them: speed_metrics (trainer_utils) and the FLOPs estimate of
// PreTrainedModel.floating_point_ops = 6 * tokens * non-embedding parameters (the forward + backward
// cost per token from Kaplan et al. 2020, "Scaling Laws for Neural Language Models"; HF counts the
// tokens as input_ids.numel(), padding included, and 0 for inputs without input_ids).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace hftrain {

// Filled by count_parameters (models/parameter_counts.h).
struct ParameterCounts {
  int64_t total = 0;
  int64_t trainable = 0;
  int64_t non_embedding = 0;  // total minus the weights of embedding modules (HF exclude_embeddings)
};

// HF floating_point_ops for `tokens` input tokens.
double training_flos(const ParameterCounts& counts, int64_t tokens);

// HF speed_metrics: <split>_runtime (4 places), <split>_samples_per_second, <split>_steps_per_second
// and, when `tokens` is given, <split>_tokens_per_second (3 places). Rates are left out when the
// runtime is 0 or their count is 0, as HF does.
nlohmann::json speed_metrics(const std::string& split, double runtime, int64_t samples, int64_t steps,
                             std::optional<int64_t> tokens = std::nullopt);

}  // namespace hftrain
