// The training loop (see trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "data/batch_prefetcher.h"
#include "distributed/comm.h"
#include "engine/engine_builder.h"
#include "engine/precision.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "log/run_summary.h"
#include "log/speed_metrics.h"
#include "models/parameter_counts.h"
#include "optim/optimizer_fit.h"
#include "optim/target_modules.h"
#include "train/evaluation.h"
#include "train/reporting.h"
#include "train/training_loss.h"
#include "util/fault_injection.h"
#include "util/fs.h"
#include "util/signals.h"

namespace hftrain {
namespace {

double round_to(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

// A stop signal every rank acts on at the same step (workers may see a forwarded signal at
// different steps; the highest pending one wins).
int agreed_stop_signal() {
  if (world().world_size() == 1) return pending_stop_signal();
  return static_cast<int>(world().all_reduce_scalar(pending_stop_signal(), ReduceOp::kMax, "stop-signal vote"));
}

}  // namespace

Trainer::Trainer(const RunSpec& spec, const Components& components, ModelAndData& pipeline)
    : spec_(spec), components_(components), pipeline_(pipeline), best_(best_metric_context(spec.training)) {}

void Trainer::setup(const TrainingPlan& plan) {
  const TrainingArgs& args = spec_.training;
  if (spec_.deepspeed.present())  // HF's trainer_config_finalize: the step counts are known now
    deepspeed_resolved_ = resolve_deepspeed_config(spec_, world().world_size(), plan.max_steps, plan.warmup_steps);
  FlowControl flow(args, plan.max_steps);
  state_.max_steps = plan.max_steps;
  state_.num_train_epochs = plan.num_epochs;
  state_.logging_steps = flow.logging_steps();
  state_.eval_steps = flow.eval_steps();
  state_.save_steps = flow.save_steps();
  state_.train_batch_size = args.per_device_train_batch_size;
  callbacks_.add(std::make_unique<DefaultFlowCallback>(flow));
  for (auto& cb : make_reporting_callbacks(args)) callbacks_.add(std::move(cb));
  for (const auto& cb : spec_.callbacks) callbacks_.add(components_.callbacks.build(cb.type, cb.options, best_));
  for (auto& cb : extra_callbacks_) callbacks_.add(std::move(cb));
  extra_callbacks_.clear();

  std::string optimizer_kernel;
  OptimizerHyper hyper{args.adam_beta1, args.adam_beta2, args.adam_epsilon};
  hyper.low_rank_params = low_rank_targets(*pipeline_.model, args.optim_target_modules, spec_.optimizer.type);
  const OptimizerTraits& traits = components_.optimizers.traits(spec_.optimizer.type);
  check_optimizer_fits(spec_, traits, components_.optimizers.names_where([](const OptimizerTraits& t) { return t.element_wise; }));
  auto build_optimizer = [&](std::vector<ParamGroup> groups) {
    auto optimizer = components_.optimizers.build(spec_.optimizer.type, spec_.optimizer.options, std::move(groups), hyper);
    optimizer_kernel = optimizer->kernel_description();
    return optimizer;
  };
  engine_ = build_engine({spec_, pipeline_.model, pipeline_.deferred_weights, traits, build_optimizer, world()});
  if (world().world_size() > 1 || spec_.zero.stage > 0 || spec_.precision.bf16 || spec_.precision.fp16)
    log_info("engine: " + engine_->describe());
  log_info("optimizer: " + spec_.optimizer.type + ", " + optimizer_kernel);
  schedule_ = components_.schedulers.build(spec_.scheduler.type, spec_.scheduler.options,
                                           ScheduleContext{args.learning_rate, plan.warmup_steps, plan.max_steps});
  if (!schedule_->steps_per_optimizer_step() && args.eval_strategy == "no")  // as HF's TrainingArguments
    throw ConfigError("scheduler.type: '" + spec_.scheduler.type +
                      "' steps after each evaluation, so training.eval_strategy must be 'steps' or 'epoch'");
}

nlohmann::json Trainer::train() {
  if (memory_) memory_->start("train");
  const TrainingArgs& args = spec_.training;
  Model& model = *pipeline_.model;
  const int64_t world_size = world().world_size();  // each rank reads its DistributedSampler shard
  DataLoader loader(pipeline_.data->split("train"), pipeline_.data->task(), args.per_device_train_batch_size,
                    /*shuffle=*/true, args.data_seed >= 0 ? args.data_seed : args.seed, args.dataloader_drop_last,
                    world_size, world().rank());
  if (args.group_by_length)  // HF LengthGroupedSampler(train_batch_size * gradient_accumulation_steps)
    loader.group_by_length(args.per_device_train_batch_size * args.gradient_accumulation_steps, args.length_column_name);
  // Sortish batches of the global batch size: the distributed shard deals each one out to the ranks, so every
  // rank's batch comes from one run of similar lengths.
  if (args.sortish_sampler) loader.sortish(args.per_device_train_batch_size * world_size, args.length_column_name);
  const int64_t ga = args.gradient_accumulation_steps;
  // A resumed run continues from the checkpoint's data position to the end this run asks for (resume_plan.h).
  const ResumePlan start = plan_resume(make_training_plan(args, loader.batches_per_epoch(), world_size), loader);
  const TrainingPlan& plan = start.plan;
  BatchPrefetcher batches(loader, args.dataloader_num_workers > 0 ? static_cast<int>(args.dataloader_prefetch_factor) : 0,
                          plan.num_epochs);
  const ParameterCounts parameters = count_parameters(model);
  log_info(format_training_summary({loader.num_examples(), plan.num_epochs, world_size,
                                    args.per_device_train_batch_size, ga, plan.global_batch_size,
                                    plan.batches_per_epoch, plan.updates_per_epoch, plan.max_steps,
                                    plan.warmup_steps, parameters, describe_compute()}));
  int64_t num_input_tokens = 0;  // input_ids elements (padding included) run through the model here
  double data_wait_seconds = 0;  // time the loop spent waiting for the next batch
  setup(plan);
  TrainerControl& control = callbacks_.control();
  prepare_checkpointing(plan);
  set_aside_previous_run();  // everything is accepted: the output_dir is this run's now
  const int64_t first_step = state_.global_step, first_samples = loop_.samples_seen;
  callbacks_.on_init_end(state_);

  const auto start_time = std::chrono::steady_clock::now();
  model.train();
  double& tr_loss = loop_.tr_loss;
  double& total_loss = loop_.total_loss;
  StopSignalGuard stop_guard;  // SIGINT / SIGTERM: finish the step, save, stop (stop_for_signal)
  callbacks_.on_train_begin(state_);
  for (int64_t epoch = start.epoch; epoch < plan.num_epochs && !control.should_training_stop; ++epoch) {
    const EpochSpan span = epoch == start.epoch ? start.first : EpochSpan{0, plan.batches_per_epoch, 0};
    batches.start_epoch(epoch, span.skip_samples);
    if (epoch == start.epoch) restore_rng_state();
    callbacks_.on_epoch_begin(state_);
    const int64_t seen_before = loop_.samples_seen;
    int64_t micro_step = 0;  // batches of the span read
    const int64_t windows = windows_for(span.batches, ga);
    for (int64_t w = 0; w < windows && !control.should_training_stop && !control.should_epoch_stop; ++w) {
      const int64_t window = window_size_for(span.batches, w, ga);
      double step_loss = 0;
      for (int64_t m = 0; m < window; ++m) {
        if (m == 0) {
          callbacks_.on_step_begin(state_);
          engine_->begin_step(schedule_->lr(schedule_step()));
        }
        Batch batch;
        const auto wait_start = std::chrono::steady_clock::now();
        batches.next(batch);
        data_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
        if (args.include_num_input_tokens_seen && batch.input_ids.defined())
          state_.num_input_tokens_seen += batch.input_ids.numel();
        if (batch.input_ids.defined()) {  // HF floating_point_ops: 6 * tokens * non-embedding params
          num_input_tokens += batch.input_ids.numel();
          state_.total_flos += training_flos(parameters, batch.input_ids.numel());
        }
        torch::Tensor loss;
        {
          AutocastScope autocast(pipeline_.compute_dtype);  // forward in the run's 16-bit dtype, if any
          loss = compute_loss(model, batch, args.label_smoothing_factor).loss / static_cast<double>(window);
        }
        engine_->backward(loss, m + 1 == window);
        double l = loss.item<double>();
        if (args.logging_nan_inf_filter && !std::isfinite(l))
          l = tr_loss / static_cast<double>(1 + state_.global_step - last_logged_step_);
        step_loss += l;
        ++micro_step;
        if (m + 1 < window) callbacks_.on_substep_end(state_);
      }
      callbacks_.on_pre_optimizer_step(state_);
      StepResult step = engine_->step(schedule_->lr(schedule_step()));
      callbacks_.on_optimizer_step(state_);
      state_.global_step += 1;
      if (step.skipped) note_skipped_step(step);
      state_.epoch = epoch_progress(epoch, span, micro_step, plan.batches_per_epoch);
      loop_.epoch = epoch;
      loop_.batches_consumed = span.first_batch + micro_step;
      loop_.samples_consumed = loader.samples_consumed_after(span.skip_samples, micro_step);
      loop_.samples_seen = seen_before + loop_.samples_consumed - span.skip_samples;
      tr_loss += step_loss;
      total_loss += step_loss;
      callbacks_.on_step_end(state_);
      maybe_log_save_evaluate(tr_loss, step);
      if (w + 1 == windows) {  // HF: on_epoch_end, then a second log/save/evaluate pass
        callbacks_.on_epoch_end(state_);
        maybe_log_save_evaluate(tr_loss, step);
      }
      fault::after_optimizer_step();
      if (const int sig = agreed_stop_signal()) stop_for_signal(sig);
    }
  }
  const double runtime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  report_short_end(plan, start.done);
  if (args.load_best_model_at_end) load_best_model();
  const bool count_tokens = args.include_tokens_per_second && num_input_tokens > 0;
  // Speed over what this process ran (a resumed run does not count the steps and samples of the checkpoint).
  nlohmann::json metrics = speed_metrics("train", runtime, loop_.samples_seen - first_samples, state_.global_step - first_step,
                                         count_tokens ? std::optional<int64_t>(num_input_tokens) : std::nullopt);
  metrics["total_flos"] = state_.total_flos;
  // Not an HF metric: how much of the run the step waited on data (should stay near 0).
  metrics["train_data_wait_fraction"] = runtime > 0 ? round_to(data_wait_seconds / runtime, 4) : 0.0;
  // HF: the mean over ranks (_nested_gather(tr_loss).mean()).
  const double mean_total_loss =
      world_size == 1 ? total_loss : world().all_reduce_scalar(total_loss, ReduceOp::kSum, "train_loss") / world_size;
  metrics["train_loss"] = mean_total_loss / static_cast<double>(std::max<int64_t>(1, state_.global_step));
  if (memory_) memory_->stop_and_update_metrics("train", metrics);
  log(metrics);
  finish_checkpointing();
  callbacks_.on_train_end(state_);
  metrics["epoch"] = state_.epoch;
  return metrics;
}

void Trainer::maybe_log_save_evaluate(double& tr_loss, const StepResult& step) {
  TrainerControl& control = callbacks_.control();
  if (control.should_log && state_.global_step > last_logged_step_) {
    const auto steps = static_cast<double>(state_.global_step - last_logged_step_);
    // HF logs the mean over ranks of the loss since the last log.
    const double loss_sum = world().world_size() == 1
                                ? tr_loss
                                : world().all_reduce_scalar(tr_loss, ReduceOp::kSum, "logged loss") / world().world_size();
    nlohmann::json entry = {
        {"loss", round_to(loss_sum / steps, 4)}, {"grad_norm", step.grad_norm}, {"learning_rate", schedule_->lr(schedule_step())}};
    if (step.loss_scale > 0) entry["loss_scale"] = step.loss_scale;  // fp16: the scale after this step
    log(entry);
    tr_loss = 0;
    last_logged_step_ = state_.global_step;
  }
  if (control.should_evaluate) {
    nlohmann::json metrics = run_evaluation();
    const bool new_best = update_best_metric(metrics);
    if (spec_.training.save_strategy == "best") control.should_save = new_best;
  }
  if (control.should_save) {
    save_checkpoint();
    callbacks_.on_save(state_);
  }
}

void Trainer::note_skipped_step(const StepResult& step) {
  // HF: a skipped optimizer step does not advance the learning-rate schedule; DeepSpeed counts it.
  loop_.skipped_steps += 1;
  std::string msg = "step " + std::to_string(state_.global_step) + ": gradient overflow (inf/nan), update skipped";
  if (step.loss_scale > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; loss scale %g -> %g", step.prev_loss_scale, step.loss_scale);
    msg += buf;
  }
  if (is_main_rank()) log_warning(msg + " (" + std::to_string(loop_.skipped_steps) + " skipped so far)");
}

namespace {

// precision.save_dtype as a tensor dtype.
torch::ScalarType saved_dtype(const PrecisionArgs& precision) {
  const std::string& d = precision.save_dtype;
  return d == "bf16" ? torch::kBFloat16 : d == "fp16" ? torch::kHalf : torch::kFloat;
}

}  // namespace

SavedWeights Trainer::weights_to_save(bool for_checkpoint) {
  SavedWeights w;
  w.replacements = engine_->master_weights();
  if (!for_checkpoint) w.dtype = saved_dtype(spec_.precision);  // checkpoints keep fp32 so that resume is exact
  return w;
}

bool Trainer::save_final_model(const std::string& dir) {
  const StreamedWeights streamed = engine_->stream_master_weights();
  const bool main_rank = world().rank() == 0;
  if (streamed.names.empty()) {  // stages 0-2 with masters in memory: every rank holds the whole model
    const SavedWeights weights = weights_to_save();  // collective: mixed precision gathers the fp32 masters
    if (main_rank) save_model_dir(dir, *pipeline_.model, kDefaultMaxShardBytes, weights);
    return true;
  }
  if (engine_->partitions_parameters() && !spec_.zero.stage3_gather_16bit_weights_on_model_save) {
    // The shards that hold the trained weights: the best checkpoint's when load_best_model_at_end loaded
    // it, else those of the last step (saved now unless they were).
    if (loaded_best_checkpoint_.empty() && last_resumable_save_step_ != state_.global_step) save_checkpoint(/*for_resume=*/true);
    const std::string ckpt = loaded_best_checkpoint_.empty() ? checkpoints_->dir_for(state_.global_step) : loaded_best_checkpoint_;
    if (main_rank)
      log_info("model.safetensors not written (zero.stage3_gather_16bit_weights_on_model_save: false): the trained "
               "weights are the ZeRO-3 shards in " + ckpt + "; consolidate them with\n  hftrain zero-to-fp32 " + ckpt +
               " " + dir);
    return false;
  }
  if (main_rank) save_model_dir(dir, *pipeline_.model, kDefaultMaxShardBytes, SavedWeights{{}, saved_dtype(spec_.precision)}, &streamed);
  else streamed.produce([](const std::string&, const torch::Tensor&) {});
  return true;
}

void Trainer::log(nlohmann::json entry) {
  entry["epoch"] = state_.epoch;
  entry["step"] = state_.global_step;
  if (spec_.training.include_num_input_tokens_seen) entry["num_input_tokens_seen"] = state_.num_input_tokens_seen;
  state_.log_history.push_back(entry);
  callbacks_.on_log(state_, entry);
}

nlohmann::json Trainer::run_evaluation() {
  nlohmann::json metrics = evaluate(pipeline_, components_, "eval", spec_.training.per_device_eval_batch_size, "eval");
  log(metrics);
  callbacks_.on_evaluate(state_, metrics);
  // HF _evaluate: a metric-driven schedule (ReduceLROnPlateau) steps on metric_for_best_model.
  if (!schedule_->steps_per_optimizer_step()) {
    if (!metrics.contains(best_.metric_for_best_model))
      throw ConfigError("training.metric_for_best_model: '" + best_.metric_for_best_model + "' (needed by scheduler " +
                        spec_.scheduler.type + ") is not an evaluation metric (have: " + metrics.dump() + ")");
    schedule_->observe_metric(metrics.at(best_.metric_for_best_model).get<double>());
  }
  return metrics;
}

// HF _determine_best_metric: a strictly better metric_for_best_model becomes the best.
bool Trainer::update_best_metric(const nlohmann::json& metrics) {
  if (!metrics.contains(best_.metric_for_best_model))
    throw ConfigError("training.metric_for_best_model: '" + best_.metric_for_best_model +
                      "' is not an evaluation metric (have: " + metrics.dump() + ")");
  const double value = metrics.at(best_.metric_for_best_model).get<double>();
  const bool better = state_.best_metric.is_null() ||
                      (best_.greater_is_better ? value > state_.best_metric.get<double>()
                                               : value < state_.best_metric.get<double>());
  if (better) {
    state_.best_metric = value;
    state_.best_global_step = state_.global_step;
  }
  return better;
}

void Trainer::load_best_model() {
  if (state_.best_model_checkpoint.is_null()) {
    log_warning("load_best_model_at_end: no best checkpoint was saved; keeping the final weights");
    return;
  }
  const std::string dir = state_.best_model_checkpoint.get<std::string>();
  log_info("loading best model from " + dir + " (" + best_.metric_for_best_model + " = " + state_.best_metric.dump() + ")");
  SafetensorsFile best = load_safetensors(dir + "/model.safetensors");
  loaded_best_checkpoint_ = dir;
  if (!engine_->partitions_parameters()) load_model_weights(best, dir + "/model.safetensors", *pipeline_.model);
  engine_->load_master_weights(best.tensors, dir + "/model.safetensors");
}

}  // namespace hftrain
