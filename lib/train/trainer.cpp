// The training loop (see trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "data/batch_placement.h"
#include "data/batch_prefetcher.h"
#include "data/loader.h"
#include "data/saved_tokenizer.h"
#include "distributed/comm.h"
#include "engine/engine_builder.h"
#include "engine/engine_state.h"
#include "log/logger.h"
#include "log/memory_tracker.h"
#include "log/run_summary.h"
#include "log/speed_metrics.h"
#include "models/checkpointing.h"
#include "models/parameter_counts.h"
#include "optim/optimizer_fit.h"
#include "optim/target_modules.h"
#include "train/evaluation.h"
#include "train/loss_normaliser.h"
#include "train/parallelism.h"
#include "train/reporting.h"
#include "train/step_metrics.h"
#include "train/training_loss.h"
#include "util/device_clock.h"
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
int agreed_stop_signal(Comm& comm) {
  if (comm.world_size() == 1) return pending_stop_signal();
  return static_cast<int>(comm.all_reduce_scalar(pending_stop_signal(), ReduceOp::kMax, "stop-signal vote"));
}

// The model's reported scalars since the last log (sums over steps) as their mean over the ranks, in one
// all-reduce (an MoE model reports one per expert); each rank's own sums go to its debug log first.
std::map<std::string, double> mean_over_ranks(const std::map<std::string, double>& sums, Comm& comm) {
  if (sums.empty()) return sums;
  std::string line = "this rank's reported scalars since the last log (summed over steps):";
  for (const auto& [name, sum] : sums) line += " " + name + " " + std::to_string(sum);
  log_debug(line);
  if (comm.world_size() == 1) return sums;
  std::vector<double> values;
  for (const auto& entry : sums) values.push_back(entry.second);
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  comm.all_reduce(t, ReduceOp::kSum, "reported scalars");  // every rank reports the same names (one model)
  std::map<std::string, double> means;
  int64_t i = 0;
  for (const auto& entry : sums) means[entry.first] = t[i++].item<double>() / comm.world_size();
  return means;
}

}  // namespace

Trainer::Trainer(const RunSpec& spec, const Components& components, ModelAndData& pipeline, Comm& comm)
    : spec_(spec), components_(components), pipeline_(pipeline), comm_(comm), best_(best_metric_context(spec.training)),
      tracks_best_metric_(tracks_best_metric(spec)) {
  loop_.loss.set_nan_inf_filter(spec.training.logging_nan_inf_filter);
}

void Trainer::setup(const TrainingPlan& plan, const ParallelLayout& layout) {
  const TrainingArgs& args = spec_.training;
  if (spec_.deepspeed.present())  // HF's trainer_config_finalize: the step counts are known now
    deepspeed_resolved_ = resolve_deepspeed_config(spec_, comm_.world_size(), plan.max_steps, plan.warmup_steps);
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
  OptimizerHyper hyper;
  hyper.beta1 = args.adam_beta1;
  hyper.beta2 = args.adam_beta2;
  hyper.eps = args.adam_epsilon;
  hyper.low_rank_params = low_rank_targets(*pipeline_.model, args.optim_target_modules, spec_.optimizer.type);
  const OptimizerTraits& traits = components_.optimizers.traits(spec_.optimizer.type);
  check_optimizer_fits(spec_, traits, components_.optimizers.names_where([](const OptimizerTraits& t) { return t.element_wise; }));
  auto build_optimizer = [&](std::vector<ParamGroup> groups) {
    auto optimizer = components_.optimizers.build(spec_.optimizer.type, spec_.optimizer.options, std::move(groups), hyper);
    optimizer_kernel = optimizer->kernel_description();
    return optimizer;
  };
  engine_ = build_engine({spec_, pipeline_.precision, pipeline_.model, pipeline_.deferred_weights, traits, build_optimizer,
                          comm_, pipeline_.device, layout.expert_data_group});
  if (const std::string engine = engine_->describe(); !engine.empty()) log_info("engine: " + engine);
  log_info("optimizer: " + spec_.optimizer.type + ", " + optimizer_kernel);
  schedule_ = components_.schedulers.build(spec_.scheduler.type, spec_.scheduler.options,
                                           ScheduleContext{args.learning_rate, plan.warmup_steps, plan.max_steps});
  if (!schedule_->steps_per_optimizer_step() && args.eval_strategy == "no")  // as HF's TrainingArguments
    throw ConfigError("scheduler.type: '" + spec_.scheduler.type +
                      "' steps after each evaluation, so training.eval_strategy must be 'steps' or 'epoch'");
}

// What one train() call holds besides the trainer's own state: the data, the plan it resumes into, and the
// step accounting.
struct Trainer::TrainingRun {
  ParallelLayout layout;  // the sequence-parallel groups and data-parallel replicas (train/parallelism.h)
  std::unique_ptr<DataLoader> loader;
  ResumePlan start;
  std::unique_ptr<BatchPrefetcher> batches;
  std::unique_ptr<StepMetrics> metrics;
  std::unique_ptr<LossNormaliser> loss;
  int64_t first_step = 0, first_samples = 0;  // where this process started (speed counts only its own work)
};

// The loop: epochs -> accumulation windows -> micro-batches -> engine step -> callbacks (HF
// Trainer._inner_training_loop). One step's walk: docs/design.md.
nlohmann::json Trainer::train() {
  if (memory_) memory_->start("train");
  std::unique_ptr<TrainingRun> run = start_run();
  const TrainingPlan& plan = run->start.plan;
  const int64_t ga = spec_.training.gradient_accumulation_steps;
  TrainerControl& control = callbacks_.control();
  const auto start_time = std::chrono::steady_clock::now();
  pipeline_.model->train();
  // SIGINT / SIGTERM: finish the step, save, stop (stop_for_signal); rank 0 says so for the job.
  StopSignalGuard stop_guard(kStopAfterStep, /*announce=*/comm_.rank() == 0);
  callbacks_.on_train_begin(state_);
  if (spec_.training.eval_on_start) run_evaluation(/*step_schedule=*/false);  // HF: a sanity check before step 1
  for (int64_t epoch = run->start.epoch; epoch < plan.num_epochs && !control.should_training_stop; ++epoch) {
    const EpochSpan span = begin_epoch(*run, epoch);
    const int64_t windows = windows_for(span.batches, ga), seen_before = loop_.samples_seen;
    int64_t micro_step = 0;  // batches of the span read
    for (int64_t w = 0; w < windows && !control.should_training_stop && !control.should_epoch_stop; ++w) {
      const int64_t window = window_size_for(span.batches, w, ga);
      accumulate_gradients(*run, window);
      micro_step += window;
      const StepResult step = optimizer_step();
      record_data_position(*run, epoch, span, micro_step, seen_before);
      loop_.loss.end_step();
      callbacks_.on_step_end(state_);
      maybe_log_save_evaluate(step);
      if (w + 1 == windows) {  // HF: on_epoch_end, then a second log/save/evaluate pass
        callbacks_.on_epoch_end(state_);
        maybe_log_save_evaluate(step);
      }
      fault::after_optimizer_step();
      if (const int sig = agreed_stop_signal(comm_)) stop_for_signal(sig);
    }
  }
  return finish_run(*run, seconds_since(start_time, pipeline_.device));
}

std::unique_ptr<Trainer::TrainingRun> Trainer::start_run() {
  const TrainingArgs& args = spec_.training;
  auto run = std::make_unique<TrainingRun>();
  run->layout = apply_parallelism(spec_, *pipeline_.model, comm_);
  // Each data-parallel replica (a sequence-parallel group, or one rank) reads its DistributedSampler shard.
  const int64_t world_size = run->layout.data_parallel_size;
  run->loader = std::make_unique<DataLoader>(pipeline_.data->split("train"), pipeline_.data->task(),
                                             args.per_device_train_batch_size, /*shuffle=*/true,
                                             args.data_seed >= 0 ? args.data_seed : args.seed,
                                             args.dataloader_drop_last, world_size, run->layout.data_parallel_rank);
  DataLoader& loader = *run->loader;
  loader.slice_sequences(run->layout.sequence_parallel_size, run->layout.sequence_rank);
  if (args.group_by_length)  // HF LengthGroupedSampler(train_batch_size * gradient_accumulation_steps)
    loader.group_by_length(args.per_device_train_batch_size * args.gradient_accumulation_steps, args.length_column_name);
  // Sortish batches of the global batch size: the distributed shard deals each one out to the ranks, so every
  // rank's batch comes from one run of similar lengths.
  if (args.sortish_sampler) loader.sortish(args.per_device_train_batch_size * world_size, args.length_column_name);
  if (args.padding_free) loader.flatten_batches();
  // A resumed run continues from the checkpoint's data position to the end this run asks for (resume_plan.h).
  run->start = plan_resume(make_training_plan(args, loader.batches_per_epoch(), world_size), loader);
  const TrainingPlan& plan = run->start.plan;
  run->batches = std::make_unique<BatchPrefetcher>(
      loader, args.dataloader_num_workers > 0 ? static_cast<int>(args.dataloader_prefetch_factor) : 0, plan.num_epochs,
      pin_stage(pipeline_.device, pipeline_.pin_memory));
  const ParameterCounts parameters = count_parameters(*pipeline_.model);
  run->metrics = std::make_unique<StepMetrics>(args, parameters);
  run->loss = std::make_unique<LossNormaliser>(*pipeline_.model, args.average_tokens_across_devices, comm_,
                                               run->layout.sequence_group.get());
  log_info(format_training_summary({loader.num_examples(), plan.num_epochs, world_size,
                                    args.per_device_train_batch_size, args.gradient_accumulation_steps,
                                    plan.global_batch_size, plan.batches_per_epoch, plan.updates_per_epoch,
                                    plan.max_steps, plan.warmup_steps, parameters, describe_compute()}));
  setup(plan, run->layout);
  prepare_checkpointing(plan);
  set_aside_previous_run();  // everything is accepted: the output_dir is this run's now
  run->first_step = state_.global_step;
  run->first_samples = loop_.samples_seen;
  callbacks_.on_init_end(state_);
  return run;
}

EpochSpan Trainer::begin_epoch(TrainingRun& run, int64_t epoch) {
  const EpochSpan span =
      epoch == run.start.epoch ? run.start.first : EpochSpan{0, run.start.plan.batches_per_epoch, 0};
  run.batches->start_epoch(epoch, span.skip_samples);
  if (epoch == run.start.epoch && rng_state_) rng_state_->restore();
  callbacks_.on_epoch_begin(state_);
  return span;
}

void Trainer::accumulate_gradients(TrainingRun& run, int64_t window) {
  callbacks_.on_step_begin(state_);
  engine_->begin_step(schedule_->lr(schedule_step()));
  // HF get_batch_samples: the step's micro-batches are read first, so that their label tokens can be
  // counted (and summed over the workers) before any loss is computed (loss_normaliser.h).
  std::vector<Batch> batches(static_cast<std::size_t>(window));
  int64_t tokens_seen = 0;
  for (Batch& batch : batches) tokens_seen += run.metrics->next_batch(*run.batches, batch, unstored_flos_);
  const LossScale scale = run.loss->prepare(batches, tokens_seen, spec_.training.include_num_input_tokens_seen.on());
  state_.num_input_tokens_seen += tokens_seen;
  for (int64_t m = 0; m < window; ++m) {
    torch::Tensor loss;
    {
      AutocastScope autocast(pipeline_.compute_dtype);  // forward in the run's 16-bit dtype, if any
      ActivationOffloadScope offload(pipeline_.offload_checkpoints);  // checkpointed block inputs to host memory
      const Batch placed = batch_on(batches[m], pipeline_.device, pipeline_.pin_memory);
      loss = compute_loss(*pipeline_.model, placed, spec_.training.label_smoothing_factor).loss * scale.multiplier /
             scale.divisor;
    }
    batches[m] = Batch();  // its tensors are not needed any more
    for (const auto& [name, value] : pipeline_.model->reported_scalars()) reported_sums_[name] += value / static_cast<double>(window);
    engine_->backward(loss, m + 1 == window);
    loop_.loss.add_micro_batch(loss, state_.global_step - last_logged_step_);  // read back only when logged
    if (m + 1 < window) callbacks_.on_substep_end(state_);
  }
}

StepResult Trainer::optimizer_step() {
  callbacks_.on_pre_optimizer_step(state_);
  StepResult step = engine_->step(schedule_->lr(schedule_step()));
  callbacks_.on_optimizer_step(state_);
  state_.global_step += 1;
  if (step.skipped) note_skipped_step(step);
  return step;
}

void Trainer::record_data_position(const TrainingRun& run, int64_t epoch, const EpochSpan& span, int64_t micro_step,
                                   int64_t seen_before) {
  state_.epoch = epoch_progress(epoch, span, micro_step, run.start.plan.batches_per_epoch);
  loop_.epoch = epoch;
  loop_.batches_consumed = span.first_batch + micro_step;
  loop_.samples_consumed = run.loader->samples_consumed_after(span.skip_samples, micro_step);
  loop_.samples_seen = seen_before + loop_.samples_consumed - span.skip_samples;
}

nlohmann::json Trainer::finish_run(const TrainingRun& run, double runtime) {
  report_short_end(run.start.plan, run.start.done);
  if (spec_.training.load_best_model_at_end) load_best_model();
  store_flos();
  // Speed over what this process ran (a resumed run does not count the steps and samples of the checkpoint).
  nlohmann::json metrics = run.metrics->train_metrics(runtime, loop_.samples_seen - run.first_samples,
                                                      state_.global_step - run.first_step, state_);
  // HF: the mean over ranks (_nested_gather(tr_loss).mean()).
  const int64_t world_size = comm_.world_size();
  const double total_loss = loop_.loss.total();
  const double mean_total_loss =
      world_size == 1 ? total_loss : comm_.all_reduce_scalar(total_loss, ReduceOp::kSum, "train_loss") / world_size;
  metrics["train_loss"] = mean_total_loss / static_cast<double>(std::max<int64_t>(1, state_.global_step));
  if (memory_) memory_->stop_and_update_metrics("train", metrics);
  log(metrics);
  finish_checkpointing();
  callbacks_.on_train_end(state_);
  metrics["epoch"] = state_.epoch;
  return metrics;
}

void Trainer::maybe_log_save_evaluate(const StepResult& step) {
  TrainerControl& control = callbacks_.control();
  if (control.should_log && state_.global_step > last_logged_step_) {
    const double tr_loss = loop_.loss.since_log();
    const auto steps = static_cast<double>(state_.global_step - last_logged_step_);
    // HF logs the mean over ranks of the loss since the last log.
    const double loss_sum = comm_.world_size() == 1
                                ? tr_loss
                                : comm_.all_reduce_scalar(tr_loss, ReduceOp::kSum, "logged loss") / comm_.world_size();
    nlohmann::json entry = {
        {"loss", round_to(loss_sum / steps, 4)}, {"grad_norm", step.grad_norm.value()}, {"learning_rate", schedule_->lr(schedule_step())}};
    if (step.loss_scale > 0) entry["loss_scale"] = step.loss_scale;  // fp16: the scale after this step
    for (const auto& [name, mean] : mean_over_ranks(reported_sums_, comm_)) entry[name] = round_to(mean / steps, 4);
    reported_sums_.clear();
    log(entry);
    loop_.loss.clear_since_log();
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

SavedWeights Trainer::weights_to_save(bool for_checkpoint) {
  SavedWeights w;
  w.replacements = engine_->master_weights();
  if (!for_checkpoint) w.dtype = pipeline_.precision.saved_dtype;  // checkpoints keep fp32 so that resume is exact
  return w;
}

bool Trainer::save_final_model(const std::string& dir) {
  const StreamedWeights streamed = engine_->stream_master_weights();
  const bool main_rank = comm_.rank() == 0;
  // HF Trainer.save_model saves the processing_class beside the model: the directory is a whole model directory
  // (with the chat template and eos token the run's data changed, data/saved_tokenizer.h).
  if (const Tokenizer* tokenizer = pipeline_.data->tokenizer(); tokenizer && main_rank && !tokenizer->files().empty()) {
    std::filesystem::create_directories(dir);
    for (const auto& f : tokenizer_files_to_save(*tokenizer, pipeline_.data->tokenizer_changes()))
      write_file_atomic(dir + "/" + f.name, f.text);
  }
  if (streamed.names.empty()) {  // stages 0-2 with masters in memory: every rank holds the whole model
    const SavedWeights weights = weights_to_save();  // collective: mixed precision gathers the fp32 masters
    if (main_rank) save_model_dir(dir, *pipeline_.model, kDefaultMaxShardBytes, weights);
    return true;
  }
  // (An adapter is small: it is always gathered and written, as PEFT's save_pretrained under ZeRO-3 does.)
  if (engine_->keeps_model_in_shards() && !pipeline_.model->adapter()) {
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
  if (main_rank) save_model_dir(dir, *pipeline_.model, kDefaultMaxShardBytes, SavedWeights{{}, pipeline_.precision.saved_dtype}, &streamed);
  else streamed.produce([](const std::string&, const torch::Tensor&) {});
  return true;
}

void Trainer::log(nlohmann::json entry) {
  entry["epoch"] = state_.epoch;
  entry["step"] = state_.global_step;
  if (spec_.training.include_num_input_tokens_seen.on()) entry["num_input_tokens_seen"] = state_.num_input_tokens_seen;
  state_.log_history.push_back(entry);
  callbacks_.on_log(state_, entry);
}

nlohmann::json Trainer::run_evaluation(bool step_schedule) {
  nlohmann::json metrics = evaluate(pipeline_, components_, "eval", spec_.training.per_device_eval_batch_size, "eval");
  log(metrics);
  callbacks_.on_evaluate(state_, metrics);
  // HF _evaluate: a metric-driven schedule (ReduceLROnPlateau) steps on metric_for_best_model.
  if (step_schedule && !schedule_->steps_per_optimizer_step()) {
    if (!metrics.contains(best_.metric_for_best_model))
      throw ConfigError("training.metric_for_best_model: '" + best_.metric_for_best_model + "' (needed by scheduler " +
                        spec_.scheduler.type + ") is not an evaluation metric (have: " + metrics.dump() + ")");
    schedule_->observe_metric(metrics.at(best_.metric_for_best_model).get<double>());
  }
  return metrics;
}

// HF _determine_best_metric only runs with metric_for_best_model set, which TrainingArguments sets to "loss"
// for load_best_model_at_end and save_strategy "best"; otherwise best_metric and best_model_checkpoint stay
// null. Early stopping compares against best_metric, so it tracks too (HF requires the metric there;
// hftrain's default is the loss, as for the other two).
bool Trainer::tracks_best_metric(const RunSpec& spec) {
  const TrainingArgs& t = spec.training;
  bool early_stopping = false;
  for (const auto& c : spec.callbacks) early_stopping = early_stopping || c.type == "early_stopping";
  return !t.metric_for_best_model.empty() || t.load_best_model_at_end || t.save_strategy == "best" || early_stopping;
}

// HF _determine_best_metric: a strictly better metric_for_best_model becomes the best.
bool Trainer::update_best_metric(const nlohmann::json& metrics) {
  if (!tracks_best_metric_) return false;
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
  const std::string path = dir + "/" + weights_file_name(*pipeline_.model);
  SafetensorsFile best = read_weights_file(path, *pipeline_.model);
  loaded_best_checkpoint_ = dir;
  load_trained_weights(*engine_, *pipeline_.model, best, path);
}

}  // namespace hftrain
