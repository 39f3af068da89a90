// The trainer's side of resuming: where a resumed run starts in its data and the step it ends at, whatever
// batch layout (world size, per-device batch, accumulation) the checkpoint had (resume_plan.h); refusing a
// resume that would put older weights over output_dir's model; and the one block that lists what changed
// against the checkpoint. Loading the state itself is trainer_checkpoint.cpp.
#include <algorithm>
#include <iostream>

#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/previous_run.h"
#include "config/issues.h"
#include "data/loader.h"
#include "distributed/comm.h"
#include "engine/zero_checkpoint.h"
#include "log/logger.h"
#include "runspec/run_spec.h"
#include "train/resume_changes.h"
#include "train/trainer.h"
#include "util/error.h"

namespace hftrain {
namespace {

void warn(const std::string& message) { std::cerr << "warning: " << message << std::endl; }

// An integer setting section.key of a saved run spec (1 when it does not say).
int64_t saved_setting(const std::string& spec_text, const char* section, const char* key) {
  if (spec_text.empty()) return 1;
  const YAML::Node v = lookup(lookup(YAML::Load(spec_text), section), key);
  return v.IsScalar() ? v.as<int64_t>() : 1;
}

}  // namespace

ResumePlan Trainer::plan_resume(const TrainingPlan& plan, const DataLoader& loader) {
  const TrainingArgs& args = spec_.training;
  const std::string dir = resolve_resume_checkpoint(args.resume_from_checkpoint, args.output_dir, warn);
  if (dir.empty()) return fresh_start(plan);
  std::cerr << "resuming from " << dir << std::endl;
  resumed_ = read_saved_run(CheckpointReader(dir), loader.num_examples());
  const SavedRun& saved = *resumed_;
  const int64_t gs = saved.state.global_step;
  const DataPosition& at = saved.position;
  const ResumePlan r =
      make_resume_plan(args, plan, gs, at, loader.batches_after(at.samples_consumed), loader.samples_per_batch());
  const int64_t final_step = r.done ? gs : r.plan.max_steps;
  if (!args.resume_over_newer_model) {
    const std::string problem = older_weights_problem(args.output_dir, dir, final_step);
    if (!problem.empty()) throw ConfigError("training.resume_from_checkpoint: " + problem);
  }
  if (comm_.rank() != 0) return r;

  // What changed against the checkpoint, in one block.
  const int64_t world_size = comm_.world_size();
  // The saved run's data-parallel replicas: its world over its sequence-parallel groups' size.
  const int64_t saved_replicas =
      saved.world_size / std::max<int64_t>(1, saved_setting(saved.spec_text, "distributed", "sequence_parallel_size"));
  const int64_t saved_global =
      saved.per_device_batch * saved_setting(saved.spec_text, "training", "gradient_accumulation_steps") * saved_replicas;
  std::vector<SettingChange> changes = layout_changes(LayoutFigures{saved.world_size, saved_global, saved.state.max_steps},
                                                      LayoutFigures{world_size, plan.global_batch_size, r.plan.max_steps});
  if (!saved.spec_text.empty())
    for (auto& c : spec_changes(saved.spec_text, saved_run_spec(spec_, components_.catalog()))) changes.push_back(std::move(c));
  std::string block = layout_change(saved.world_size, saved.zero_stage, world_size, spec_);  // the engine's layout
  if (!block.empty())
    block += ": global batch " + std::to_string(saved_global) + " -> " + std::to_string(plan.global_batch_size) +
             " (per device " + std::to_string(saved.per_device_batch) + " -> " +
             std::to_string(args.per_device_train_batch_size) + ", accumulation " +
             std::to_string(args.gradient_accumulation_steps) + "), " +
             std::to_string(plan.updates_per_epoch) + " optimizer steps per epoch\n";
  std::cerr << block << describe_resume_changes(dir, changes) << std::endl;
  if ((args.group_by_length || args.sortish_sampler) && saved_global != plan.global_batch_size)
    warn(std::string(args.group_by_length ? "group_by_length" : "sortish_sampler") +
         ": an epoch's order depends on the batch size, which changed, so the samples skipped in the interrupted "
         "epoch are not exactly those the checkpoint's run consumed");

  if (r.done) {
    warn(dir + " is at step " + std::to_string(gs) + ", already at the end of this run (max_steps " +
         std::to_string(r.plan.max_steps) + "): nothing left to train; its weights are the final model");
    return r;
  }
  std::string where = "epoch " + std::to_string(r.epoch);
  if (r.first.skip_samples > 0)
    where += ", after " + std::to_string(r.first.skip_samples) + " of its " + std::to_string(loader.num_examples()) +
             " samples";
  else if (args.ignore_data_skip && r.epoch == at.epoch && at.samples_consumed > 0)
    where += " from its start (ignore_data_skip: its " + std::to_string(at.samples_consumed) + " consumed samples are read again)";
  std::cerr << "resumed at step " << gs << " (" << where << "; " << r.first.batches
            << " batches per worker left in it); training to step " << r.plan.max_steps << " ("
            << r.plan.max_steps - gs << " steps)" << std::endl;
  return r;
}

void Trainer::set_aside_previous_run() {
  const TrainingArgs& args = spec_.training;
  if (resumed_ || !args.overwrite_output_dir || comm_.rank() != 0) return;
  const std::string moved = move_previous_run_aside(args.output_dir);
  if (!moved.empty())
    log_info("overwrite_output_dir: the previous run's checkpoints and model in " + args.output_dir + " were moved to " +
             moved + " (delete it when no longer needed)");
}

void Trainer::report_short_end(const TrainingPlan& plan, bool nothing_to_train) {
  if (nothing_to_train || state_.global_step >= plan.max_steps || comm_.rank() != 0) return;
  const std::string at = "training ended at step " + std::to_string(state_.global_step) + " of max_steps " +
                         std::to_string(plan.max_steps);
  if (callbacks_.control().should_training_stop)
    log_warning(at + ": a callback stopped it (early stopping or a custom callback)");
  else
    log_warning(at + ": the training data ran out after epoch " + std::to_string(loop_.epoch) + " of " +
                std::to_string(plan.num_epochs));
}

}  // namespace hftrain
