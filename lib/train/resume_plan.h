// ResumePlan: where a resumed run starts reading its data and at which step it ends, whatever batch
// layout (world size, per-device batch, gradient accumulation) the checkpoint was trained with.
// The saved position is counted in samples of the interrupted epoch's order: every layout reads an
// epoch's order as a prefix (DistributedSampler deals it out round robin, batch by batch), so the
// samples consumed say exactly where the data stands, while "steps x global batch" is only right for
// the layout that saved it. Pure arithmetic, unit tested.
#pragma once

#include <cstdint>

#include "train/training_plan.h"

namespace hftrain {

struct TrainingArgs;

// Where a saved run stood in its data, independent of the layout that read it (loop_state.json's sampler).
struct DataPosition {
  int64_t epoch = 0;             // the epoch it was reading
  int64_t samples_consumed = 0;  // of that epoch's order, by all workers together
  int64_t samples_seen = 0;      // over the whole run, every epoch (DistributedSampler padding included)
};

// The stretch of one epoch the loop reads: its batches after `skip_samples` samples of the order.
struct EpochSpan {
  int64_t skip_samples = 0;
  int64_t batches = 0;       // per worker
  int64_t first_batch = 0;   // the epoch-wide index of its first batch (skip_samples / samples per batch)
};

struct ResumePlan {
  int64_t epoch = 0;       // the first epoch the run reads
  EpochSpan first;         // the part of it read
  TrainingPlan plan;       // the run's plan, its max_steps (the step it ends at), epochs and warmup resolved
  bool done = false;       // the checkpoint is at or past the end: nothing is left to train
};

// A fresh run: epoch 0 from its start, the plan unchanged.
ResumePlan fresh_start(const TrainingPlan& plan);

// A run resumed at `global_step`, positioned at `at`. `rest_batches` is what the loader reads per worker of
// epoch at.epoch after at.samples_consumed (DataLoader::batches_after); `samples_per_batch` its batch of
// every worker together. With max_steps > 0 the run ends at max_steps; with epochs, at the data position
// num_train_epochs (HF's ceil(epochs x steps per epoch) when the layout is the one that saved it), so
// max_steps is recomputed from the steps left at this layout. ignore_data_skip starts the interrupted
// epoch from its beginning (HF).
ResumePlan make_resume_plan(const TrainingArgs& args, const TrainingPlan& plan, int64_t global_step,
                            const DataPosition& at, int64_t rest_batches, int64_t samples_per_batch);

// state.epoch after `read` batches of `span` in `epoch` (HF: epoch + batches read / batches per epoch).
double epoch_progress(int64_t epoch, const EpochSpan& span, int64_t read, int64_t batches_per_epoch);

}  // namespace hftrain
