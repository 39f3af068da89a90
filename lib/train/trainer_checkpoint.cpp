// The trainer's side of checkpoints: what goes into checkpoint-N (model, optimizer, schedule, RNG,
// sampler position, loss accounting, trainer_state.json, the run spec) and how a run resumes from it.
// Writing, verifying, rotating and finding checkpoints live in lib/checkpoint; docs/checkpoints.md
// describes every file.
#include <cmath>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <set>
#include <mutex>

#include "checkpoint/checkpoint_files.h"
#include "config/issues.h"
#include "checkpoint/checkpoint_finder.h"
#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/checkpoint_reader.h"
#include "log/logger.h"
#include "util/fault_injection.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/checkpoint_writer.h"
#include "distributed/comm.h"
#include "engine/partition.h"
#include "engine/universal_state.h"
#include "engine/zero_checkpoint.h"
#include "runspec/run_spec.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/signals.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

// Doubles are stored as JSON numbers (nlohmann writes the shortest text that reads back to the same
// bits); nan / inf, which JSON cannot hold, as strings.
nlohmann::json exact_double(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

double read_exact_double(const nlohmann::json& j, const std::string& source) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  throw RuntimeFailure("'" + source + "': '" + s + "' is not a number");
}

// HF tracks (and protects) a best checkpoint only when metric_for_best_model is in use.
bool tracks_best_model(const TrainingArgs& args) {
  return args.load_best_model_at_end || !args.metric_for_best_model.empty() || args.save_strategy == "best";
}

void warn(const std::string& message) { std::cerr << "warning: " << message << std::endl; }

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace

void Trainer::prepare_checkpointing(const TrainingPlan& plan) {
  const TrainingArgs& args = spec_.training;
  checkpoints_ = std::make_unique<CheckpointManager>(
      CheckpointPolicy{args.output_dir, args.save_total_limit, tracks_best_model(args)});
  loop_.batches_per_epoch = plan.batches_per_epoch;
  if (!resumed_) return;
  const std::string& dir = resumed_->dir;
  const CheckpointReader ckpt(dir);
  // Optimizer state means something only to the optimizer that wrote it (AdamW's exp_avg read as Lion's
  // momentum would train on silently): another optimizer type is refused before anything is loaded.
  const bool with_optimizer = !args.ignore_optimizer_state;
  if (!resumed_->spec_text.empty() && with_optimizer) {
    const YAML::Node saved_type = lookup(lookup(YAML::Load(resumed_->spec_text), "optimizer"), "type");
    if (saved_type.IsScalar() && saved_type.Scalar() != spec_.optimizer.type)
      throw ConfigError("'" + dir + "' holds the state of optimizer '" + saved_type.Scalar() + "' (" +
                        ckpt.path(ckpt::kRunSpecFile) + ") but this run uses '" + spec_.optimizer.type +
                        "': its moments would be read as another optimizer's. Resume with optimizer.type: " +
                        saved_type.Scalar() + ", or with training.ignore_optimizer_state: true to take only the "
                        "weights, schedule and data position");
  }
  load_training_state(ckpt, with_optimizer);
  const std::string sched_path = ckpt.path(ckpt::kSchedulerFile);
  const TrainerState& saved = resumed_->state;
  const std::string loop_path = ckpt.path(ckpt::kLoopStateFile);
  try {
    const nlohmann::json sched = ckpt.json(ckpt::kSchedulerFile);
    if (sched.at("type").get<std::string>() != spec_.scheduler.type)
      warn("'" + sched_path + "' is a '" + sched.at("type").get<std::string>() + "' schedule but the run spec asks for '" +
           spec_.scheduler.type + "'; its state is not restored");
    else
      schedule_->load_state(sched.at("state"));

    const nlohmann::json loop = ckpt.json(ckpt::kLoopStateFile);
    loop_.tr_loss = read_exact_double(loop.at("loss").at("tr_loss"), loop_path);
    loop_.total_loss = read_exact_double(loop.at("loss").at("total_loss"), loop_path);
    last_logged_step_ = loop.at("loss").at("last_logged_step").get<int64_t>();
    loop_.skipped_steps = loop.value("skipped_steps", int64_t{0});  // absent in checkpoints of older versions
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + sched_path + "' or '" + loop_path + "' is malformed: " + e.what());
  }
  loop_.epoch = resumed_->position.epoch;
  loop_.samples_consumed = resumed_->position.samples_consumed;
  loop_.samples_seen = resumed_->position.samples_seen;

  state_.global_step = saved.global_step;
  state_.epoch = saved.epoch;
  state_.total_flos = saved.total_flos;
  state_.num_input_tokens_seen = saved.num_input_tokens_seen;
  state_.log_history = saved.log_history;
  state_.best_metric = saved.best_metric;
  state_.best_global_step = saved.best_global_step;
  state_.best_model_checkpoint = saved.best_model_checkpoint;
  state_.stateful_callbacks = saved.stateful_callbacks;
  // HF restores callback states (EarlyStopping's patience counter) only when asked to.
  if (spec_.training.restore_callback_states_from_checkpoint) callbacks_.import_states(saved.stateful_callbacks);
  else if (!saved.stateful_callbacks.empty() && comm_.rank() == 0)
    log_info("callback states of the checkpoint not restored (training.restore_callback_states_from_checkpoint: "
             "false, HF's default): " + saved.stateful_callbacks.dump());

  const int64_t saved_world = resumed_->world_size, world_size = comm_.world_size();
  std::string rng_name = ckpt::rng_state_file(comm_.rank(), world_size);
  // Rank r continues the random stream of saved rank r mod W (dropout then differs from an uninterrupted run).
  if (saved_world != world_size) rng_name = ckpt::rng_state_file(comm_.rank() % saved_world, saved_world);
  SafetensorsFile rng = ckpt.safetensors(rng_name);
  if (!rng.tensors.count("cpu")) throw RuntimeFailure("'" + ckpt.path(rng_name) + "': tensor 'cpu' is missing");
  resume_rng_state_ = rng.tensors.at("cpu");
  resume_rng_source_ = ckpt.path(rng_name);

  fs::path resumed_dir(dir);
  if (resumed_dir.filename().empty()) resumed_dir = resumed_dir.parent_path();  // "out/checkpoint-7/"
  if (same_directory(resumed_dir.parent_path(), args.output_dir)) checkpoints_->set_resumed_from(saved.global_step);
}

void Trainer::load_training_state(const CheckpointReader& ckpt, bool with_optimizer) {
  const std::string& dir = ckpt.dir();
  const SafetensorsFile model_file = ckpt.safetensors(ckpt::kModelFile);
  // Stage 3's parameters are its shards; without optimizer state they come from the consolidated weights.
  if (!engine_->partitions_parameters()) load_model_weights(model_file, ckpt.path(ckpt::kModelFile), *pipeline_.model);
  if (!with_optimizer) {
    warn("training.ignore_optimizer_state: the weights, schedule and data position of '" + dir +
         "' are restored, its optimizer state is not: the optimizer starts from zero moments");
    engine_->load_master_weights(model_file.tensors, ckpt.path(ckpt::kModelFile));
    return;
  }
  if (engine_->sharded()) {  // ZeRO: this rank's shard, cut from any saved layout (engine/zero_checkpoint.h)
    load_zero_checkpoint(dir, *engine_, comm_);
    return;
  }
  // Mixed precision: the checkpoint's fp32 weights become the master weights.
  engine_->load_master_weights(model_file.tensors, ckpt.path(ckpt::kModelFile));
  if (!has_zero_checkpoint(dir)) {
    engine_->load_optimizer_state(ckpt.safetensors(ckpt::kOptimizerFile).tensors);
    return;
  }
  // A ZeRO checkpoint resumed at stage 0: every parameter's state consolidated from the shards.
  std::vector<std::pair<std::string, std::vector<int64_t>>> trainable;
  for (const auto& np : pipeline_.model->named_parameters())
    if (np.value().requires_grad()) trainable.emplace_back(np.key(), np.value().sizes().vec());
  const SlabLayout saved = saved_state_layout(dir);
  if (comm_.rank() == 0)
    std::cerr << "consolidating the optimizer state of " << saved.describe() << " for stage 0" << std::endl;
  engine_->load_optimizer_state(cut_state(saved, per_parameter_state_layout(trainable)).state);
}

void Trainer::restore_rng_state() {
  if (!resume_rng_state_.defined()) return;
  if (fault::skip_rng_restore()) {
    warn("HFTRAIN_FAULT_INJECT=skip_rng_restore: the RNG state is not restored");
  } else {
    try {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle sharing the default generator
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(resume_rng_state_);
    } catch (const c10::Error& e) {
      throw RuntimeFailure("'" + resume_rng_source_ + "': tensor 'cpu' is not a CPU generator state: " +
                           e.what_without_backtrace());
    }
  }
  resume_rng_state_ = torch::Tensor();
}

void Trainer::save_checkpoint(bool for_resume) {
  const TrainingArgs& args = spec_.training;
  const int64_t gs = state_.global_step;
  if (!state_.best_global_step.is_null()) {
    const int64_t best = state_.best_global_step.get<int64_t>();
    if (fs::exists(checkpoints_->dir_for(best)) || best == gs) state_.best_model_checkpoint = checkpoints_->dir_for(best);
  }
  state_.stateful_callbacks = callbacks_.export_states();
  const bool model_only = args.save_only_model && !for_resume;

  CheckpointFiles files;
  // Mixed precision: the fp32 master weights (gathered from every rank's partition), so resume is exact.
  // Stage 3 streams them (one flat group gathered at a time, rank 0 writing) into the checkpoint.
  const StreamedWeights streamed = engine_->stream_master_weights();
  auto stream_model = [&](const std::string& dir) {
    if (streamed.names.empty()) return std::vector<std::string>{};
    if (comm_.rank() != 0) {
      streamed.produce([](const std::string&, const torch::Tensor&) {});
      return std::vector<std::string>{};
    }
    write_model_file(dir + "/" + ckpt::kModelFile, *pipeline_.model, SavedWeights{}, &streamed);
    return std::vector<std::string>{ckpt::kModelFile};
  };
  if (streamed.names.empty())
    files.emplace_back(ckpt::kModelFile, serialize_safetensors(model_tensors(*pipeline_.model, weights_to_save(true))));
  files.emplace_back(ckpt::kConfigFile, pipeline_.model->config_json().dump(2) + "\n");
  // Data-parallel runs: every rank writes its own RNG state, and a sharded (ZeRO) engine its shard,
  // into the checkpoint while rank 0 commits it (engine/zero_checkpoint.h).
  const bool per_rank = comm_.world_size() > 1 || engine_->sharded();
  std::vector<std::pair<std::string, std::string>> own_files;
  if (!model_only) {
    if (!engine_->sharded()) {
      NamedTensors optim;
      for (const auto& [k, v] : engine_->optimizer_state()) optim.emplace_back(k, v);
      files.emplace_back(ckpt::kOptimizerFile, serialize_safetensors(optim));
    }
    const nlohmann::json sched = {{"type", spec_.scheduler.type},
                                  {"last_step", schedule_step()},
                                  {"last_lr", schedule_->lr(schedule_step())},
                                  {"state", schedule_->state()}};
    files.emplace_back(ckpt::kSchedulerFile, sched.dump(2) + "\n");
    (per_rank ? own_files : files)
        .emplace_back(ckpt::rng_state_file(comm_.rank(), comm_.world_size()),
                      serialize_safetensors({{"cpu", at::detail::getDefaultCPUGenerator().get_state()}}));
    const nlohmann::json loop = {
        {"sampler",
         {{"epoch", loop_.epoch},
          {"batches_consumed", loop_.batches_consumed},
          {"batches_per_epoch", loop_.batches_per_epoch},
          {"samples_consumed", loop_.samples_consumed},
          {"samples_seen", loop_.samples_seen},
          {"world_size", comm_.world_size()},
          {"batch_size", args.per_device_train_batch_size},
          {"seed", args.data_seed >= 0 ? args.data_seed : args.seed},
          {"shuffle", true}}},
        {"loss",
         {{"tr_loss", exact_double(loop_.tr_loss)},
          {"total_loss", exact_double(loop_.total_loss)},
          {"last_logged_step", last_logged_step_}}},
        {"skipped_steps", loop_.skipped_steps}};
    files.emplace_back(ckpt::kLoopStateFile, loop.dump(2) + "\n");
  }
  files.emplace_back(ckpt::kTrainerStateFile, state_.to_json_text());
  files.emplace_back(ckpt::kRunSpecFile, dump_run_spec(spec_, components_.catalog()));

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
        for (const auto& name : stream_model(writer.tmp_dir())) writer.adopt(name);
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
  const PrecisionArgs& p = spec_.precision;
  nlohmann::json layout = {{"world_size", comm_.world_size()},
                           {"zero_stage", spec_.zero.stage},
                           {"optimizer", spec_.optimizer.type},
                           {"dtypes",
                            {{"parameters", p.bf16 ? "bf16" : p.fp16 ? "fp16" : "fp32"},
                             {"master_weights", "fp32"},
                             {"optimizer_state", "fp32"}}},
                           {"optimizer_state", engine_->sharded() ? "ZeRO shards (latest)" : ckpt::kOptimizerFile}};
  if (const PartitionMap* map = engine_->partition_map()) layout["partition"] = map->to_json();
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
