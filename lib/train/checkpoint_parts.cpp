// The trainer's stateful parts (see checkpoint_parts.h).
#include "train/checkpoint_parts.h"

#include <cmath>
#include <iostream>
#include <limits>
#include <mutex>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/safetensors.h"
#include "log/logger.h"
#include "util/error.h"
#include "util/fault_injection.h"

namespace hftrain {
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

void warn(const std::string& message) { std::cerr << "warning: " << message << std::endl; }

}  // namespace

void ScheduleState::save(CheckpointContents& out) {
  const int64_t step = step_();
  const nlohmann::json sched = {
      {"type", type_}, {"last_step", step}, {"last_lr", schedule_.lr(step)}, {"state", schedule_.state()}};
  out.add(ckpt::kSchedulerFile, sched.dump(2) + "\n");
}

void ScheduleState::load(const CheckpointReader& in) {
  const std::string path = in.path(ckpt::kSchedulerFile);
  try {
    const nlohmann::json sched = in.json(ckpt::kSchedulerFile);
    if (sched.at("type").get<std::string>() != type_)
      warn("'" + path + "' is a '" + sched.at("type").get<std::string>() + "' schedule but the run spec asks for '" +
           type_ + "'; its state is not restored");
    else
      schedule_.load_state(sched.at("state"));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path + "' is malformed: " + e.what());
  }
}

void DataPositionState::save(CheckpointContents& out) {
  const nlohmann::json loop = {
      {"sampler",
       {{"epoch", loop_.epoch},
        {"batches_consumed", loop_.batches_consumed},
        {"batches_per_epoch", loop_.batches_per_epoch},
        {"samples_consumed", loop_.samples_consumed},
        {"samples_seen", loop_.samples_seen},
        {"world_size", comm_.world_size()},
        {"batch_size", args_.per_device_train_batch_size},
        {"seed", args_.data_seed >= 0 ? args_.data_seed : args_.seed},
        {"shuffle", true}}},
      {"loss",
       {{"tr_loss", exact_double(loop_.loss.since_log())},
        {"total_loss", exact_double(loop_.loss.total())},
        {"last_logged_step", last_logged_step_}}},
      {"skipped_steps", loop_.skipped_steps}};
  out.add(ckpt::kLoopStateFile, loop.dump(2) + "\n");
}

void DataPositionState::load(const CheckpointReader& in) {
  const std::string path = in.path(ckpt::kLoopStateFile);
  try {
    const nlohmann::json loop = in.json(ckpt::kLoopStateFile);
    loop_.loss.restore(read_exact_double(loop.at("loss").at("tr_loss"), path),
                       read_exact_double(loop.at("loss").at("total_loss"), path));
    last_logged_step_ = loop.at("loss").at("last_logged_step").get<int64_t>();
    loop_.skipped_steps = loop.value("skipped_steps", int64_t{0});  // absent in checkpoints of older versions
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + path + "' is malformed: " + e.what());
  }
  if (!resumed_) return;
  loop_.epoch = resumed_->position.epoch;
  loop_.samples_consumed = resumed_->position.samples_consumed;
  loop_.samples_seen = resumed_->position.samples_seen;
}

namespace {

// The generator of a GPU worker's device (CUDA's default generator of that index).
at::Generator device_generator(torch::Device device) { return at::globalContext().defaultGenerator(device); }

}  // namespace

void RngState::save(CheckpointContents& out) {
  NamedTensors states{{"cpu", at::detail::getDefaultCPUGenerator().get_state()}};
  if (device_.is_cuda()) states.emplace_back("cuda", device_generator(device_).get_state());
  out.add_own(ckpt::rng_state_file(comm_.rank(), comm_.world_size()), serialize_safetensors(states));
}

void RngState::load(const CheckpointReader& in) {
  const int64_t world_size = comm_.world_size();
  std::string name = ckpt::rng_state_file(comm_.rank(), world_size);
  if (saved_world_size_ != world_size) name = ckpt::rng_state_file(comm_.rank() % saved_world_size_, saved_world_size_);
  SafetensorsFile rng = in.safetensors(name);
  if (!rng.tensors.count("cpu")) throw RuntimeFailure("'" + in.path(name) + "': tensor 'cpu' is missing");
  state_ = rng.tensors.at("cpu");
  source_ = in.path(name);
  device_state_ = torch::Tensor();
  if (!device_.is_cuda()) return;  // a GPU run's "cuda" state means nothing to a CPU worker
  if (rng.tensors.count("cuda")) device_state_ = rng.tensors.at("cuda");
  else if (comm_.rank() == 0)
    warn("'" + source_ + "' holds no CUDA generator state (saved by a run on the CPU): random draws on " + device_.str() +
         " (dropout) continue from this run's seed, not from the saved run's");
}

void RngState::restore() {
  if (!state_.defined()) return;
  if (fault::skip_rng_restore()) {
    warn("HFTRAIN_FAULT_INJECT=skip_rng_restore: the RNG state is not restored");
  } else {
    try {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle sharing the default generator
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state_);
    } catch (const c10::Error& e) {
      throw RuntimeFailure("'" + source_ + "': tensor 'cpu' is not a CPU generator state: " + e.what_without_backtrace());
    }
    if (device_state_.defined()) {
      try {
        at::Generator gen = device_generator(device_);
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(device_state_);
      } catch (const c10::Error& e) {
        throw RuntimeFailure("'" + source_ + "': tensor 'cuda' is not a CUDA generator state: " + e.what_without_backtrace());
      }
    }
  }
  state_ = torch::Tensor();
  device_state_ = torch::Tensor();
}

void TrainerStateFile::save(CheckpointContents& out) {
  state_.stateful_callbacks = callbacks_.export_states();
  out.add(ckpt::kTrainerStateFile, state_.to_json_text());
}

void TrainerStateFile::load(const CheckpointReader&) {
  if (!resumed_) return;
  const TrainerState& saved = resumed_->state;  // read from this checkpoint when the resume was planned
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
  if (restore_callback_states_) callbacks_.import_states(saved.stateful_callbacks);
  else if (!saved.stateful_callbacks.empty() && log_skipped_)
    log_info("callback states of the checkpoint not restored (training.restore_callback_states_from_checkpoint: "
             "false, HF's default): " + saved.stateful_callbacks.dump());
}

}  // namespace hftrain
