// training.overwrite_output_dir for a fresh run: the previous run's checkpoints and final model are moved
// into output_dir/previous_run-<k>/ (k = 1, 2, ...: the first free number) instead of staying beside the
// new run's, so a bare --resume, checkpoint rotation or the older-weights check can never take them for the
// new run's, and nothing saved is deleted.
#pragma once

#include <string>
#include <vector>

namespace hftrain {

// Whether `name` (an entry of output_dir) is something a training run leaves there that belongs to it:
// checkpoint-<N> directories and their .checkpoint-<N>.partial leftovers, the final model's files
// (model*.safetensors, model.safetensors.index.json, config.json, generation_config.json), trainer_state.json
// and the *_results.json files.
bool belongs_to_previous_run(const std::string& name);

// Moves the entries of `output_dir` that belong_to_previous_run into a new output_dir/previous_run-<k>/.
// Returns that directory ("" when there was nothing to move). Throws RuntimeFailure naming the entry
// that cannot be moved.
std::string move_previous_run_aside(const std::string& output_dir);

}  // namespace hftrain
