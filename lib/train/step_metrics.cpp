// Token, FLOP, data-wait and NaN accounting of the training loop (see step_metrics.h).
#include "train/step_metrics.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "data/batch_prefetcher.h"

namespace hftrain {

int64_t StepMetrics::next_batch(BatchPrefetcher& batches, Batch& batch, double& unstored_flos) {
  const auto wait_start = std::chrono::steady_clock::now();
  batches.next(batch);
  data_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (!batch.input_ids.defined()) return 0;  // HF counts 0 tokens for inputs without input_ids
  const int64_t tokens = batch.input_ids.numel();
  input_tokens_ += tokens;
  unstored_flos += training_flos(parameters_, tokens);
  switch (args_.include_num_input_tokens_seen.mode) {
    case InputTokensSeen::Mode::kNo: return 0;
    case InputTokensSeen::Mode::kAll: return tokens;
    case InputTokensSeen::Mode::kNonPadding:  // HF: the attention mask's ones (all tokens without a mask)
      return batch.attention_mask.defined() ? batch.attention_mask.sum().item<int64_t>() : tokens;
  }
  return 0;
}

nlohmann::json StepMetrics::train_metrics(double runtime, int64_t samples, int64_t steps, const TrainerState& state) const {
  const bool count_tokens = args_.include_tokens_per_second && input_tokens_ > 0;
  nlohmann::json metrics =
      speed_metrics("train", runtime, samples, steps, count_tokens ? std::optional<int64_t>(input_tokens_) : std::nullopt);
  metrics["total_flos"] = state.total_flos;
  // Not an HF metric: how much of the run the step waited on data (should stay near 0).
  metrics["train_data_wait_fraction"] = runtime > 0 ? std::round(data_wait_seconds_ / runtime * 1e4) / 1e4 : 0.0;
  return metrics;
}

}  // namespace hftrain
