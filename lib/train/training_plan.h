// TrainingPlan: the derived step counts of a run (HF's set_initial_training_values), computed once
// and printed at start: batches per epoch, update steps per epoch, max_steps, epochs, warmup steps.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {

struct TrainingArgs;

struct TrainingPlan {
  int64_t batches_per_epoch = 0;   // len(train_dataloader)
  int64_t updates_per_epoch = 0;   // ceil(batches / gradient_accumulation_steps), at least 1
  int64_t max_steps = 0;
  int64_t num_epochs = 0;
  int64_t warmup_steps = 0;
  int64_t global_batch_size = 0;   // per_device * accumulation * world size

};

// Accumulation windows over `batches` micro-batches: gradient_accumulation_steps each, except a shorter
// last window (an epoch's, or the rest of a resumed epoch's).
int64_t windows_for(int64_t batches, int64_t accumulation);
int64_t window_size_for(int64_t batches, int64_t w, int64_t accumulation);

TrainingPlan make_training_plan(const TrainingArgs& args, int64_t batches_per_epoch, int64_t world_size);

std::string describe(const TrainingPlan& plan);

}  // namespace hftrain
