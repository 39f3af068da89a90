// save_total_limit: which checkpoint-N directories to delete, with HF Trainer's rules
// (_sorted_checkpoints / _rotate_checkpoints) plus three protections HF lacks:
//  - order is numeric (see checkpoint_finder.h for why not mtime);
//  - only checkpoints up to the one just saved take part: higher-numbered ones belong to another run
//    (or to a future abandoned by resuming from an earlier step) and are neither counted nor deleted;
//  - the checkpoint this run resumed from is never deleted (it may sit beyond the limit).
// HF's rules: the best checkpoint is bubbled up to position len-2, so it is never among the oldest
// deleted (the fix of HF PR #11748 for issue #11769); with save_total_limit == 1 and a best checkpoint
// that is not the newest, 2 are kept "to allow resuming" (issue #19300); at the end of training with
// save_total_limit == 1 every checkpoint but the best is removed (issue #35070) -- and only when the
// best one is present, so that cleanup can never remove everything (issue #25129).
// Pure functions on step numbers, pinned by unit tests; apply_rotation() does the deleting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hftrain {

struct RotationRequest {
  std::vector<int64_t> checkpoints;     // steps of the checkpoint-N directories present (any order)
  int64_t limit = 0;                    // save_total_limit; <= 0 keeps everything
  std::optional<int64_t> best;          // best checkpoint's step, when best-model tracking is on
  std::optional<int64_t> resumed_from;  // the checkpoint this run resumed from
  int64_t current = 0;                  // the checkpoint just saved (or the final step at train end)
};

// Steps to delete after saving `current`, ascending.
std::vector<int64_t> checkpoints_to_rotate(const RotationRequest& r);
// Steps to delete when training ends normally (HF: save_total_limit == 1 keeps only the best).
std::vector<int64_t> checkpoints_to_remove_at_train_end(const RotationRequest& r);

// Deletes output_dir/checkpoint-<step> for each step: renamed to a hidden .checkpoint-N.deleting
// first (one atomic step), then removed, so a crash never leaves a half-deleted checkpoint-N.
void apply_rotation(const std::string& output_dir, const std::vector<int64_t>& steps);

}  // namespace hftrain
