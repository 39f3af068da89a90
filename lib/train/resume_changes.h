// What a resumed run changes against its checkpoint: the run-spec options whose values differ from the
// checkpoint's run_spec.yaml, and the figures derived from the batch layout (world size, global batch, the
// step the run ends at), listed in one block when the run resumes.
#pragma once

#include <string>
#include <vector>

namespace hftrain {

struct SettingChange {
  std::string name;   // "training.learning_rate", or a derived figure ("world size")
  std::string saved;  // as the checkpoint's run had it
  std::string now;
};

// Options whose values differ between two dumped run specs (run_spec.yaml texts), named section.key
// (component options under their section, list entries by index), in the order of `current_yaml`; options
// only one of them has are listed with "(absent)". Left out: the options that say how this run resumes
// (resume_from_checkpoint, overwrite_output_dir, resume_over_newer_model) and the worker count (the world
// size is a derived figure). Throws RuntimeFailure when `saved_yaml` is not YAML.
std::vector<SettingChange> spec_changes(const std::string& saved_yaml, const std::string& current_yaml);

// The figures of a batch layout compared by layout_changes.
struct LayoutFigures {
  int64_t world_size = 1;
  int64_t global_batch = 0;
  int64_t max_steps = 0;  // the step the run ends at
};

// The derived figures that differ (world size, global batch size, the step the run ends at); the options
// behind them (per-device batch, accumulation, zero.stage) are spec_changes'.
std::vector<SettingChange> layout_changes(const LayoutFigures& saved, const LayoutFigures& now);

// The block printed at resume: one line per change, or a line saying nothing changed.
std::string describe_resume_changes(const std::string& checkpoint_dir, const std::vector<SettingChange>& changes);

}  // namespace hftrain
