// SavedRun: what a checkpoint says about the run that saved it (step, data position, batch layout, run
// spec), read before the trainer is set up, so that the resume plan, the older-weights check and the list
// of changed settings all come before anything is loaded or written.
#pragma once

#include <cstdint>
#include <string>

#include "train/resume_plan.h"
#include "train/trainer_state.h"

namespace hftrain {

class CheckpointReader;

struct SavedRun {
  std::string dir;
  TrainerState state;      // its trainer_state.json
  DataPosition position;   // where its sampler stood (loop_state.json)
  int64_t world_size = 1;  // workers that saved it (one rng_state file each)
  int zero_stage = 0;
  int64_t per_device_batch = 0;
  std::string spec_text;   // its run_spec.yaml ("" when it has none, as an HF checkpoint)
};

// Reads `ckpt`'s trainer_state.json, loop_state.json and run_spec.yaml. `num_examples`: the training split's
// size, for checkpoints written before loop_state.json recorded samples (their position is derived from
// batches_consumed x batch size x world size). Throws RuntimeFailure naming a malformed file.
SavedRun read_saved_run(const CheckpointReader& ckpt, int64_t num_examples);

// Why a resume from `checkpoint_dir` that ends at `final_step` would put older weights over the model that
// `output_dir` already holds ("" = it would not): its trainer_state.json (written with the final model of a
// finished run) records a later global_step.
std::string older_weights_problem(const std::string& output_dir, const std::string& checkpoint_dir, int64_t final_step);

}  // namespace hftrain
