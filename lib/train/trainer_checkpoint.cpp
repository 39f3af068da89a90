// The trainer's side of checkpoints: checkpoint-N holds the model, config.json and the run spec, and what
// each stateful part adds (the engine, schedule, RNG, data position: engine/engine_state.h,
// train/checkpoint_parts.h); a resume loads each part back.
// Writing, verifying, rotating and finding checkpoints live in lib/checkpoint; docs/checkpoints.md
// describes every file.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "checkpoint/checkpoint_files.h"
#include "config/issues.h"
#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/checkpoint_writer.h"
#include "data/saved_tokenizer.h"
#include "distributed/comm.h"
#include "engine/engine_state.h"
#include "engine/partition.h"
#include "engine/zero_checkpoint.h"
#include "runspec/run_spec.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/fs.h"
#include "util/signals.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace

void Trainer::prepare_checkpointing(const TrainingPlan& plan) {
  const TrainingArgs& args = spec_.training;
  checkpoints_ = std::make_unique<CheckpointManager>(
      CheckpointPolicy{args.output_dir, args.save_total_limit, tracks_best_metric_});  // the best one is kept
  loop_.batches_per_epoch = plan.batches_per_epoch;
  // Optimizer state means something only to the optimizer that wrote it (AdamW's exp_avg read as Lion's
  // momentum would train on silently): another optimizer type is refused before anything is loaded.
  const bool with_optimizer = !args.ignore_optimizer_state;
  const SavedRun* saved = resumed_ ? &*resumed_ : nullptr;
  resumable_parts_.clear();
  resumable_parts_.push_back(std::make_unique<EngineState>(*engine_, *pipeline_.model, comm_, with_optimizer));
  resumable_parts_.push_back(
      std::make_unique<ScheduleState>(*schedule_, spec_.scheduler.type, [this] { return schedule_step(); }));
  auto rng = std::make_unique<RngState>(comm_, saved ? saved->world_size : comm_.world_size(), pipeline_.device);
  rng_state_ = rng.get();
  resumable_parts_.push_back(std::move(rng));
  resumable_parts_.push_back(std::make_unique<DataPositionState>(loop_, last_logged_step_, args, comm_, saved));
  trainer_state_file_ = std::make_unique<TrainerStateFile>(
      state_, callbacks_, saved, args.restore_callback_states_from_checkpoint, comm_.rank() == 0);
  if (!resumed_) return;
  const std::string& dir = resumed_->dir;
  const CheckpointReader ckpt(dir);
  if (!resumed_->spec_text.empty() && with_optimizer) {
    const YAML::Node saved_type = lookup(lookup(YAML::Load(resumed_->spec_text), "optimizer"), "type");
    if (saved_type.IsScalar() && saved_type.Scalar() != spec_.optimizer.type)
      throw ConfigError("'" + dir + "' holds the state of optimizer '" + saved_type.Scalar() + "' (" +
                        ckpt.path(ckpt::kRunSpecFile) + ") but this run uses '" + spec_.optimizer.type +
                        "': its moments would be read as another optimizer's. Resume with optimizer.type: " +
                        saved_type.Scalar() + ", or with training.ignore_optimizer_state: true to take only the "
                        "weights, schedule and data position");
  }
  for (const auto& part : resumable_parts_) part->load(ckpt);
  trainer_state_file_->load(ckpt);

  fs::path resumed_dir(dir);
  if (resumed_dir.filename().empty()) resumed_dir = resumed_dir.parent_path();  // "out/checkpoint-7/"
  if (same_directory(resumed_dir.parent_path(), args.output_dir))
    checkpoints_->set_resumed_from(resumed_->state.global_step);
}

void Trainer::store_flos() {
  state_.total_flos += comm_.world_size() > 1 ? comm_.all_reduce_scalar(unstored_flos_, ReduceOp::kSum, "total_flos")
                                               : unstored_flos_;
  unstored_flos_ = 0;
}

void Trainer::save_checkpoint(bool for_resume) {
  store_flos();  // trainer_state.json's total_flos covers every worker's steps (HF _save_checkpoint)
  const TrainingArgs& args = spec_.training;
  const int64_t gs = state_.global_step;
  if (!state_.best_global_step.is_null()) {
    const int64_t best = state_.best_global_step.get<int64_t>();
    if (fs::exists(checkpoints_->dir_for(best)) || best == gs) state_.best_model_checkpoint = checkpoints_->dir_for(best);
  }
  const bool model_only = args.save_only_model && !for_resume;
  // Data-parallel runs: every rank writes its own RNG state, and a sharded (ZeRO) engine its shard,
  // into the checkpoint while rank 0 commits it (engine/zero_checkpoint.h).
  const bool per_rank = comm_.world_size() > 1 || engine_->sharded();
  CheckpointContents contents(per_rank);
  // Mixed precision: the fp32 master weights (gathered from every rank's partition), so resume is exact.
  // Stage 3 streams them (one flat group gathered at a time, rank 0 writing) into the checkpoint.
  const StreamedWeights streamed = engine_->stream_master_weights();
  const std::string weights_file = weights_file_name(*pipeline_.model);
  auto stream_model = [&](const std::string& dir) {
    if (streamed.names.empty()) return std::vector<std::string>{};
    if (comm_.rank() != 0) {
      streamed.produce([](const std::string&, const torch::Tensor&) {});
      return std::vector<std::string>{};
    }
    write_model_file(dir + "/" + weights_file, *pipeline_.model, SavedWeights{}, &streamed);
    return std::vector<std::string>{weights_file};
  };
  if (streamed.names.empty()) {
    NamedTensors weights;
    for (auto& [name, t] : model_tensors(*pipeline_.model, weights_to_save(true)))
      weights.emplace_back(file_tensor_name(*pipeline_.model, name), t);
    contents.add(weights_file, serialize_safetensors(weights));
  }
  contents.add(ckpt::kConfigFile, pipeline_.model->config_json().dump(2) + "\n");
  if (const Tokenizer* t = pipeline_.data->tokenizer())  // HF saves the processing_class in each checkpoint
    for (const auto& f : tokenizer_files_to_save(*t, pipeline_.data->tokenizer_changes())) contents.add(f.name, f.text);
  if (const AdapterDescription* adapter = pipeline_.model->adapter())  // PEFT's checkpoint layout: the adapter only
    contents.add(kAdapterConfigFile, adapter->config.dump(2) + "\n");
  if (!model_only)
    for (const auto& part : resumable_parts_) part->save(contents);
  trainer_state_file_->save(contents);
  contents.add(ckpt::kRunSpecFile, saved_run_spec(spec_, components_.catalog()));
  const CheckpointFiles& files = contents.shared();
  const CheckpointFiles& own_files = contents.own();

  std::optional<int64_t> best_step;
  if (!state_.best_model_checkpoint.is_null() && !state_.best_global_step.is_null())
    best_step = state_.best_global_step.get<int64_t>();
  const nlohmann::json layout = model_only ? nlohmann::json() : checkpoint_layout();
  if (!per_rank || model_only) {
    if (comm_.rank() == 0)
      checkpoints_->save(gs, files, model_only, best_step, [&](CheckpointWriter& writer) {
        for (const auto& name : stream_model(writer.tmp_dir())) writer.adopt(name);
        writer.set_layout(layout);
      });
    else
      stream_model("");
  } else {
    auto write_own = [&](const std::string& tmp_dir) {
      return write_rank_checkpoint_files(tmp_dir, gs, *engine_, *pipeline_.model, own_files, comm_);
    };
    if (comm_.rank() == 0) {
      checkpoints_->save(gs, files, model_only, best_step, [&](CheckpointWriter& writer) {
        std::set<std::string> added;
        for (const auto& f : files) added.insert(f.first);
        for (const auto& name : stream_model(writer.tmp_dir())) {
          writer.adopt(name);
          added.insert(name);  // write_own lists every file of the directory, the streamed model's too
        }
        for (const auto& name : write_own(writer.tmp_dir()))
          if (!added.count(name)) writer.adopt(name);
        writer.set_layout(layout);
      });
    } else {
      stream_model("");
      write_own((fs::path(args.output_dir) / ckpt::partial_dir_name(gs)).string());
    }
    comm_.barrier("checkpoint committed");
  }
  last_resumable_save_step_ = model_only ? -1 : gs;
}

nlohmann::json Trainer::checkpoint_layout() const {
  nlohmann::json layout = engine_->layout();  // zero_stage, dtypes, optimizer state, partition map
  layout["world_size"] = comm_.world_size();
  layout["optimizer"] = spec_.optimizer.type;
  return layout;
}

void Trainer::finish_checkpointing() {
  if (comm_.rank() != 0) return;  // rank 0 owns output_dir
  std::optional<int64_t> best_step;
  if (!state_.best_model_checkpoint.is_null() && !state_.best_global_step.is_null())
    best_step = state_.best_global_step.get<int64_t>();
  checkpoints_->on_train_end(state_.global_step, best_step);
}

void Trainer::stop_for_signal(int signal) {
  if (last_resumable_save_step_ != state_.global_step) save_checkpoint(/*for_resume=*/true);
  const std::string dir = checkpoints_->dir_for(state_.global_step);
  throw StoppedBySignal(std::string("stopped by ") + signal_name(signal) + " after step " +
                            std::to_string(state_.global_step) + "; checkpoint saved to " + dir,
                        signal, dir);
}

}  // namespace hftrain
