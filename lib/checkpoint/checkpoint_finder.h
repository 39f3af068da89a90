// Finding checkpoints in output_dir and resolving training.resume_from_checkpoint.
// Checkpoints are ordered by the number in checkpoint-N, never by modification time: mtimes change
// when a run directory is copied or synced, have coarse resolution on some filesystems (HF itself
// falls back to numeric order when they lie within a second), and go backwards with the clock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hftrain {

struct CheckpointDir {
  int64_t step = 0;
  std::string path;
};

// Directories of output_dir named exactly checkpoint-<digits>, ascending by step. Hidden
// .checkpoint-N.partial leftovers and plain files are not listed.
std::vector<CheckpointDir> list_checkpoints(const std::string& output_dir);

// Why a checkpoint cannot be resumed from ("" = it can): a manifest problem naming the file, or a
// checkpoint saved with save_only_model.
std::string resume_problem(const std::string& checkpoint_dir);

// The highest checkpoint-N of output_dir that verifies; each one skipped is reported through `warn`
// naming the file at fault. Returns "" when there is none.
std::string find_last_complete_checkpoint(const std::string& output_dir,
                                          const std::function<void(const std::string&)>& warn);

// Why training.resume_from_checkpoint cannot be honoured ("" = it can), known before a run starts:
// "true" / "last" with no complete checkpoint in output_dir (each one skipped named with its problem);
// a path that does not exist, is not a directory, or holds no complete checkpoint (what it holds is
// listed, and its own newest complete checkpoint-N suggested); a checkpoint saved with save_only_model.
std::string resume_setting_problem(const std::string& resume_from, const std::string& output_dir);

// training.resume_from_checkpoint -> the directory to resume from, or "" for a fresh start.
// "" / "false" = fresh; "true" / "last" = find_last_complete_checkpoint; anything else is a checkpoint
// directory that must verify. A problem (resume_setting_problem, as HF's "No valid checkpoint found")
// is a ConfigError naming the key.
std::string resolve_resume_checkpoint(const std::string& resume_from, const std::string& output_dir,
                                      const std::function<void(const std::string&)>& warn);

}  // namespace hftrain
