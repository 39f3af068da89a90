// Trainer: the training loop (epochs -> accumulation windows -> micro-batches -> engine step ->
// schedule -> callbacks deciding log / evaluate / save / stop). Semantics follow HF
// Trainer._inner_training_loop; features plug in as callbacks or engine parts.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <memory>
#include <optional>

#include "checkpoint/checkpoint_manager.h"
#include "checkpoint/model_io.h"
#include "distributed/comm.h"
#include "distributed/parallel_layout.h"
#include "engine/engine.h"
#include "train/callbacks.h"
#include "train/checkpoint_parts.h"
#include "train/model_and_data.h"
#include "train/resume_plan.h"
#include "train/saved_run.h"
#include "train/trainer_state.h"
#include "train/training_plan.h"

namespace hftrain {

class MemoryTracker;
class CheckpointReader;
class DataLoader;

class Trainer {
 public:
  // `comm`: the ranks the run trains over (the process group of this worker by default).
  Trainer(const RunSpec& spec, const Components& components, ModelAndData& pipeline, Comm& comm = world());

  // Trains to max_steps; writes checkpoints as the save strategy says. Returns the train metrics.
  nlohmann::json train();
  const TrainerState& state() const { return state_; }
  // The weights to save as the model (collective on every rank): mixed precision saves the fp32 master
  // weights (converted to precision.save_dtype unless `for_checkpoint`).
  SavedWeights weights_to_save(bool for_checkpoint = false);
  // Writes the trained model into `dir` (model.safetensors + config.json); collective, rank 0 writes.
  // ZeRO-3 streams the weights from the shards one parameter group at a time, or, with
  // zero.stage3_gather_16bit_weights_on_model_save false, writes a final checkpoint of the shards instead
  // and logs how to consolidate it. Returns whether model.safetensors was written.
  bool save_final_model(const std::string& dir);
  // ZeRO-3: the model's parameters exist whole only inside its gather units, so anything that runs it
  // (the final evaluation) must run on every rank.
  bool model_partitioned() const { return pipeline_.parameters_sharded; }
  // Tracks the train stage's memory (HF TrainerMemoryTracker); train metrics then carry its figures.
  void set_memory_tracker(MemoryTracker* tracker) { memory_ = tracker; }
  // training.deepspeed with every "auto" filled by the value this run uses (JSON text; "" without one).
  // Known once training has started (on_init_end onwards).
  const std::string& resolved_deepspeed_config() const { return deepspeed_resolved_; }
  // Adds a callback after the built-in ones (HF Trainer.add_callback).
  void add_callback(std::unique_ptr<TrainerCallback> callback) { extra_callbacks_.push_back(std::move(callback)); }

 private:
  // The loop's parts (trainer.cpp): a run's data, plan and accounting; each epoch's start; one accumulation
  // window of forward/backward passes; the optimizer step; the data position after it; the end of the run.
  struct TrainingRun;
  std::unique_ptr<TrainingRun> start_run();
  EpochSpan begin_epoch(TrainingRun& run, int64_t epoch);
  void accumulate_gradients(TrainingRun& run, int64_t window);
  StepResult optimizer_step();
  void record_data_position(const TrainingRun& run, int64_t epoch, const EpochSpan& span, int64_t micro_step,
                            int64_t seen_before);
  nlohmann::json finish_run(const TrainingRun& run, double runtime);
  void setup(const TrainingPlan& plan, const ParallelLayout& layout);
  void maybe_log_save_evaluate(const StepResult& step);
  // The schedule's step: optimizer steps actually applied (skipped ones do not advance it, as in HF).
  int64_t schedule_step() const { return state_.global_step - loop_.skipped_steps; }
  void note_skipped_step(const StepResult& step);
  void log(nlohmann::json entry);
  // Evaluates, logs and tells the callbacks; a metric-driven schedule steps on it when `step_schedule`.
  nlohmann::json run_evaluation(bool step_schedule = true);
  static bool tracks_best_metric(const RunSpec& spec);
  bool update_best_metric(const nlohmann::json& metrics);
  // Checkpoints and resume (trainer_checkpoint.cpp). `for_resume` forces a full checkpoint even
  // with save_only_model (the one written when a stop signal arrives).
  void save_checkpoint(bool for_resume = false);
  // HF store_flos: adds every worker's unstored FLOPs to total_flos (a collective: all ranks call it, before
  // each checkpoint and at the run's end).
  void store_flos();
  // Where the run starts in its data and the step it ends at (trainer_resume.cpp): a fresh start, or the
  // resumed checkpoint's position whatever its batch layout. Refuses (ConfigError) a resume that would end
  // below the step of the model output_dir holds; lists what changed against the checkpoint.
  ResumePlan plan_resume(const TrainingPlan& plan, const DataLoader& loader);
  // Creates the checkpoint manager and the stateful parts; when resuming, loads each part (the RNG stream
  // is restored later, after the consumed batches were skipped).
  void prepare_checkpointing(const TrainingPlan& plan);
  // A fresh run with overwrite_output_dir moves the previous run's checkpoints and model aside (rank 0).
  void set_aside_previous_run();
  // A run that ends before plan.max_steps says why (a callback stopped it, or its data ran out).
  void report_short_end(const TrainingPlan& plan, bool nothing_to_train);
  // What the manifest records of the state's layout (world size, stage, dtypes, partition map).
  nlohmann::json checkpoint_layout() const;
  [[noreturn]] void stop_for_signal(int signal);
  void finish_checkpointing();
  void load_best_model();

  const RunSpec& spec_;
  const Components& components_;
  ModelAndData& pipeline_;
  Comm& comm_;
  TrainerState state_;
  CallbackHandler callbacks_;
  std::vector<std::unique_ptr<TrainerCallback>> extra_callbacks_;
  CallbackContext best_;
  bool tracks_best_metric_;  // tracks_best_metric(spec): whether evaluations update best_metric
  MemoryTracker* memory_ = nullptr;
  int64_t last_logged_step_ = 0;
  double unstored_flos_ = 0;  // this process's FLOPs not yet in state_.total_flos (HF current_flos)
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Schedule> schedule_;
  std::string deepspeed_resolved_;
  LoopState loop_;  // the data position and loss accounting (train/checkpoint_parts.h)
  std::map<std::string, double> reported_sums_;  // Model::reported_scalars per step since the last log, summed
  std::optional<SavedRun> resumed_;  // the checkpoint this run resumes, if any
  std::unique_ptr<CheckpointManager> checkpoints_;
  int64_t last_resumable_save_step_ = -1;
  std::string loaded_best_checkpoint_;  // load_best_model_at_end: the checkpoint whose weights the model holds
  // What a checkpoint holds, part by part (checkpoint/stateful.h), made by prepare_checkpointing: the
  // engine, schedule, RNG stream and data position (saved unless save_only_model), and the trainer state.
  std::vector<std::unique_ptr<Stateful>> resumable_parts_;
  RngState* rng_state_ = nullptr;  // one of resumable_parts_, restored after the skipped batches
  std::unique_ptr<TrainerStateFile> trainer_state_file_;
};

}  // namespace hftrain
