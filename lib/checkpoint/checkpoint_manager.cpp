// Checkpoint saving + rotation policy (see checkpoint_manager.h).
#include "checkpoint/checkpoint_manager.h"

#include <filesystem>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/rotation.h"

namespace hftrain {

std::string CheckpointManager::dir_for(int64_t step) const {
  return (std::filesystem::path(policy_.output_dir) / ckpt::checkpoint_dir_name(step)).string();
}

std::vector<int64_t> CheckpointManager::present_steps() const {
  std::vector<int64_t> steps;
  for (const auto& c : list_checkpoints(policy_.output_dir)) steps.push_back(c.step);
  return steps;
}

std::string CheckpointManager::save(int64_t step, const CheckpointFiles& files, bool save_only_model,
                                    std::optional<int64_t> best_step,
                                    const std::function<void(CheckpointWriter&)>& before_commit) {
  remove_stale_temporaries(policy_.output_dir);
  std::string path;
  {
    CheckpointWriter writer(policy_.output_dir, step);
    for (const auto& [name, bytes] : files) writer.add(name, bytes);
    if (before_commit) before_commit(writer);
    path = writer.commit(save_only_model);
  }
  RotationRequest r;
  r.checkpoints = present_steps();
  r.limit = policy_.save_total_limit;
  if (policy_.protect_best) r.best = best_step;
  r.resumed_from = resumed_from_;
  r.current = step;
  apply_rotation(policy_.output_dir, checkpoints_to_rotate(r));
  return path;
}

void CheckpointManager::on_train_end(int64_t final_step, std::optional<int64_t> best_step) {
  RotationRequest r;
  r.checkpoints = present_steps();
  r.limit = policy_.save_total_limit;
  if (policy_.protect_best) r.best = best_step;
  r.resumed_from = resumed_from_;
  r.current = final_step;
  apply_rotation(policy_.output_dir, checkpoints_to_remove_at_train_end(r));
}

}  // namespace hftrain
