// StepMetrics: what the training loop counts besides the loss, kept out of the loop: the time spent waiting
// for the next batch (train_data_wait_fraction), input tokens (HF num_input_tokens_seen and
// include_tokens_per_second), FLOPs (HF floating_point_ops = 6 x tokens x non-embedding parameters), and the
// train metrics they end in. The loss's sums are train/loss_tally's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "log/speed_metrics.h"
#include "models/model.h"
#include "runspec/sections.h"
#include "train/trainer_state.h"

namespace hftrain {

class BatchPrefetcher;

class StepMetrics {
 public:
  StepMetrics(const TrainingArgs& args, const ParameterCounts& parameters) : args_(args), parameters_(parameters) {}

  // The next batch of the epoch from `batches` (the wait is timed), its FLOPs added to `unstored_flos` (HF's
  // current_flos: this process's, summed over the workers into total_flos by Trainer::store_flos); returns
  // its input tokens as include_num_input_tokens_seen counts them (0 when off; the trainer sums them over
  // the workers).
  int64_t next_batch(BatchPrefetcher& batches, Batch& batch, double& unstored_flos);
  // HF's train metrics over this process's run: speed (samples, steps, and tokens with
  // include_tokens_per_second), total_flos, and train_data_wait_fraction.
  nlohmann::json train_metrics(double runtime, int64_t samples, int64_t steps, const TrainerState& state) const;

 private:
  const TrainingArgs& args_;
  ParameterCounts parameters_;
  int64_t input_tokens_ = 0;  // input_ids elements (padding included) run through the model here
  double data_wait_seconds_ = 0;
};

}  // namespace hftrain
