// Engine: owns everything between "the loss of a micro-batch" and "updated parameters": backward,
// gradient reduction across workers, global-norm clipping and the optimizer step. One interface for
// every ZeRO stage; this file holds the single-process stage-0 engine the trainer uses today, and the
// data-parallel / ZeRO engines plug in behind the same interface.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/streamed_weights.h"
#include "optim/optimizer.h"
#include "util/device_scalar.h"

namespace hftrain {

class BackwardStepper;
class GatherHooks;
struct PartitionMap;

// Bytes one rank holds for the training state (the memory model of the ZeRO paper, Rajbhandari et al. 2020).
struct EngineMemory {
  int64_t param_bytes = 0;            // model parameters (full on every rank for stages 0-2)
  int64_t master_bytes = 0;           // fp32 master weights this rank owns (a view of the parameters in fp32)
  int64_t grad_bytes = 0;             // gradients kept between backward and step
  int64_t grad_transient_peak = 0;    // peak of in-flight reduction buffers (stage 2)
  int64_t optimizer_state_bytes = 0;  // optimizer state this rank holds in memory
  int64_t optimizer_state_offloaded_bytes = 0;  // ... and in swap files (NVMe offload)
  int64_t master_offloaded_bytes = 0;  // fp32 master weights in swap files (NVMe offload with mixed precision)
  int64_t param_offloaded_bytes = 0;   // stage 3 parameter shards in swap files (offload_param nvme)
  int64_t param_gathered_peak = 0;    // stage 3: peak bytes of parameters gathered whole at one time
  int64_t frozen_param_bytes = 0;     // parameters not trained (an adapter's base): whole, or a stage-3 partition
};

// One rank's share of a sharded checkpoint: tensors plus string metadata (written as safetensors).
struct EngineShard {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

struct StepResult {
  // The global L2 norm of the gradients before clipping: on the gradients' device until a logging step reads it.
  DeviceScalar grad_norm;
  bool skipped = false;  // the step was skipped (e.g. fp16 overflow); the schedule must not advance
  double loss_scale = 0;       // fp16 loss scaling: the scale after this step (0 = no loss scaling)
  double prev_loss_scale = 0;  // the scale this step's gradients were computed with
};

// The engine's roles, each an interface of its own: stepping (a micro-batch's loss to updated parameters), the
// checkpoint state (optimizer state, master weights and shards as checkpoints and saved models see them), and,
// at stage 3 only, access to the sharded parameters. `Engine` is all of them; a caller that needs one role
// takes that one.

// Stepping: backward, gradient reduction, clipping and the optimizer step.
class EngineStepping {
 public:
  virtual ~EngineStepping() = default;
  // Backpropagates one micro-batch's (already window-scaled) loss. `is_last_micro_step` marks the end
  // of the accumulation window, where gradient synchronisation happens.
  virtual void backward(const torch::Tensor& loss, bool is_last_micro_step) = 0;
  // Called before a step's first backward with the learning rate that step() will get (a layer-wise optimizer
  // applies it inside backward).
  virtual void begin_step(double /*lr*/) {}
  // Clips to max_grad_norm (when > 0), applies the optimizer at `lr`, clears the gradients.
  virtual StepResult step(double lr) = 0;
  virtual EngineMemory memory() const { return {}; }
  // One line for the log: stage, world size, layout; empty for the single-process fp32 engine.
  virtual std::string describe() const { return ""; }
};

// The training state as checkpoints and saved models see it.
class EngineCheckpointState {
 public:
  virtual ~EngineCheckpointState() = default;
  // Named tensors for checkpoints (optimizer state) and their restoration.
  virtual std::map<std::string, torch::Tensor> optimizer_state() const = 0;
  virtual void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) = 0;
  // Sharded engines (ZeRO stage >= 1) keep optimizer state and master weights per rank: checkpoints then
  // hold one shard per rank (see engine/zero_checkpoint.h) instead of a full optimizer file.
  virtual bool sharded() const { return false; }
  virtual EngineShard export_shard() const { return {}; }
  // The layout of the shards (sharded engines), which a checkpoint of another layout is cut into.
  virtual const PartitionMap* partition_map() const { return nullptr; }
  // `source` names the file in errors.
  virtual void import_shard(const std::map<std::string, torch::Tensor>& tensors,
                            const std::map<std::string, std::string>& metadata, const std::string& source) {}
  // Mixed precision: the fp32 master weights of the trainable parameters by name (collective: sharded
  // engines gather them), for saving; empty when the model's parameters are themselves fp32 and whole
  // (stage 3 always returns them: its parameters are partitioned). At stage 0 and on one rank the
  // tensors may be views of the live masters: copy them to keep a snapshot.
  virtual std::map<std::string, torch::Tensor> master_weights() { return {}; }
  // Stage 3, and masters offloaded to NVMe: the fp32 master weights as a stream, one flat group gathered
  // (or read) at a time, never all of them at once; collective: every rank runs produce. Empty (no names)
  // for engines that keep them in memory.
  virtual StreamedWeights stream_master_weights() { return {}; }
  // Sets the master weights (and the 16-bit parameters) from full fp32 tensors, e.g. a checkpoint's
  // model.safetensors; no-op for fp32 engines, whose parameters were loaded directly. Collective.
  virtual void load_master_weights(const std::map<std::string, torch::Tensor>& /*weights*/, const std::string& /*source*/) {}
  // The trained model stays in its shards at the end (stage 3 with zero.stage3_gather_16bit_weights_on_model_save
  // false): the final save writes a checkpoint of them instead of gathering model.safetensors.
  virtual bool keeps_model_in_shards() const { return false; }
  // False when some of the model's parameters hold no memory on this rank at stages 0-2 (expert data parallelism:
  // other members' experts); loading weights skips those.
  virtual bool holds_every_parameter() const { return true; }
  // What a checkpoint's manifest records of the state's layout: zero_stage, dtypes, where the optimizer state
  // is, and the partition map of sharded engines.
  virtual nlohmann::json layout() const { return layout_of(0, "fp32"); }

 protected:
  nlohmann::json layout_of(int stage, const std::string& parameter_dtype) const;
};

// ZeRO stage 3: the model's parameters hold memory only while gathered, so they must not be read or written
// directly (load weights through load_master_weights, save master_weights()).
class ShardedParameters {
 public:
  virtual ~ShardedParameters() = default;
  // The hooks the model runs around its gather units.
  virtual GatherHooks* gather_hooks() = 0;
  // Makes every parameter whole on this rank for good (end of training). Collective.
  virtual void gather_full_parameters() = 0;
};

class Engine : public EngineStepping, public EngineCheckpointState {
 public:
  // Stage 3's access to the sharded parameters; nullptr while every rank holds the model's parameters whole.
  virtual ShardedParameters* sharded_parameters() const { return nullptr; }
  // Shorthands over sharded_parameters().
  bool partitions_parameters() const { return sharded_parameters() != nullptr; }
  GatherHooks* gather_hooks() const { return partitions_parameters() ? sharded_parameters()->gather_hooks() : nullptr; }
  void gather_full_parameters() const {
    if (ShardedParameters* sharded = sharded_parameters()) sharded->gather_full_parameters();
  }
};

// Stage 0, one process: plain backward, torch-identical clipping, optimizer over all parameters.
class LocalEngine : public Engine {
 public:
  // A layer-wise optimizer (steps_in_backward) is run from hooks inside backward (engine/backward_stepper.h).
  LocalEngine(std::vector<torch::Tensor> params, std::unique_ptr<Optimizer> optimizer, double max_grad_norm);
  ~LocalEngine() override;
  void begin_step(double lr) override;
  void backward(const torch::Tensor& loss, bool is_last_micro_step) override;
  StepResult step(double lr) override;
  std::map<std::string, torch::Tensor> optimizer_state() const override { return optimizer_->state(); }
  void load_optimizer_state(const std::map<std::string, torch::Tensor>& state) override;
  EngineMemory memory() const override;

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Optimizer> optimizer_;
  double max_grad_norm_;
  std::unique_ptr<BackwardStepper> stepper_;
  bool reported_ = false;
};

// Optimizer state as a checkpoint gives it (host tensors) moved to `device`, where the optimizer keeps its
// state beside the parameters (nothing moves on the host).
std::map<std::string, torch::Tensor> state_on_device(const std::map<std::string, torch::Tensor>& state, torch::Device device);

// torch.nn.utils.clip_grad_norm_'s (1.13) coefficient for a float32 0-dim `total_norm`, with its rounding:
// min(1, (1 / (norm + 1e-6)) * max_norm) -- the reciprocal first, then the scale. Every engine clips with it.
torch::Tensor clip_coefficient(const torch::Tensor& total_norm, double max_norm);

// The global L2 norm of `grads` as torch.nn.utils.clip_grad_norm_ (1.13) computes it: each tensor's norm, then
// the norm of those (float32, 0-dim); undefined when `grads` is empty.
torch::Tensor global_grad_norm(const std::vector<torch::Tensor>& grads);

// Global L2 norm of all gradients; when max_norm > 0 the gradients are scaled by clip_coefficient, exactly as
// torch.nn.utils.clip_grad_norm_ (1.13) does, on the gradients' device (nothing is read to the host).
DeviceScalar clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace hftrain
