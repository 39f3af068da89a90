// The trainer's stateful parts (checkpoint/stateful.h) besides the engine (engine/engine_state.h): the
// schedule (scheduler.json), the RNG stream (rng_state_<rank>_<world>), the data position and loss
// accounting (loop_state.json) and the trainer state (trainer_state.json). docs/checkpoints.md describes
// every file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "checkpoint/stateful.h"
#include "distributed/comm.h"
#include "optim/schedule.h"
#include "runspec/sections.h"
#include "train/callbacks.h"
#include "train/loss_tally.h"
#include "train/saved_run.h"
#include "train/trainer_state.h"

namespace hftrain {

// Position in the data and loss accounting between logs: saved in checkpoints so a resumed run logs
// exactly what an uninterrupted one does.
struct LoopState {
  int64_t epoch = 0;
  int64_t batches_consumed = 0;  // micro-batches of `epoch` consumed so far (counted at this run's layout)
  int64_t batches_per_epoch = 0;
  int64_t samples_consumed = 0;  // samples of `epoch`'s order consumed by every rank together
  int64_t samples_seen = 0;      // samples consumed over the whole run (every epoch, resumes included)
  LossTally loss;                // step losses since the last log and in all (train_loss)
  int64_t skipped_steps = 0;     // optimizer steps skipped for gradient overflow (mixed precision)
};

// scheduler.json: the schedule's type, step, learning rate and state. A checkpoint of another schedule
// type is not restored (a warning says so).
class ScheduleState : public Stateful {
 public:
  ScheduleState(Schedule& schedule, std::string type, std::function<int64_t()> step)
      : schedule_(schedule), type_(std::move(type)), step_(std::move(step)) {}
  void save(CheckpointContents& out) override;
  void load(const CheckpointReader& in) override;

 private:
  Schedule& schedule_;
  std::string type_;
  std::function<int64_t()> step_;
};

// loop_state.json: the sampler's position and the loss accounting. On load, the position is the one the
// resume plan took to this run's batch layout (`resumed`), the loss accounting the file's.
class DataPositionState : public Stateful {
 public:
  DataPositionState(LoopState& loop, int64_t& last_logged_step, const TrainingArgs& args, Comm& comm,
                    const SavedRun* resumed)
      : loop_(loop), last_logged_step_(last_logged_step), args_(args), comm_(comm), resumed_(resumed) {}
  void save(CheckpointContents& out) override;
  void load(const CheckpointReader& in) override;

 private:
  LoopState& loop_;
  int64_t& last_logged_step_;
  const TrainingArgs& args_;
  Comm& comm_;
  const SavedRun* resumed_;
};

// rng_state_<rank>_<world>: torch's CPU generator, one file per rank. A resume reads it at load() and
// restores it at restore(), after the consumed batches were skipped (as HF does); on another world size
// rank r continues the stream of saved rank r mod W (dropout then differs from an uninterrupted run).
class RngState : public Stateful {
 public:
  // `device`: the worker's; on a GPU its generator (dropout's masks there) is saved as "cuda" beside "cpu",
  // as HF's rng_state.pth holds both.
  RngState(Comm& comm, int64_t saved_world_size, torch::Device device = torch::kCPU)
      : comm_(comm), saved_world_size_(saved_world_size), device_(device) {}
  void save(CheckpointContents& out) override;
  void load(const CheckpointReader& in) override;
  // Restores the loaded state once (nothing when none was loaded).
  void restore();

 private:
  Comm& comm_;
  int64_t saved_world_size_;
  torch::Device device_;
  torch::Tensor state_, device_state_;
  std::string source_;
};

// trainer_state.json (HF's TrainerState, the stateful callbacks included). On load, the state the resume
// plan read (`resumed`); the callbacks get their saved states back only with `restore_callback_states`
// (HF's restore_callback_states_from_checkpoint), otherwise `log_skipped` logs what was not restored.
class TrainerStateFile : public Stateful {
 public:
  TrainerStateFile(TrainerState& state, CallbackHandler& callbacks, const SavedRun* resumed,
                   bool restore_callback_states, bool log_skipped)
      : state_(state),
        callbacks_(callbacks),
        resumed_(resumed),
        restore_callback_states_(restore_callback_states),
        log_skipped_(log_skipped) {}
  void save(CheckpointContents& out) override;
  void load(const CheckpointReader& in) override;

 private:
  TrainerState& state_;
  CallbackHandler& callbacks_;
  const SavedRun* resumed_;
  bool restore_callback_states_, log_skipped_;
};

}  // namespace hftrain
