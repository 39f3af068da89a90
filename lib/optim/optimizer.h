// Optimizers over parameter groups of plain tensors (so a ZeRO shard is just another tensor).
// The learning rate is passed to step() by the trainer from the schedule; hyperparameters shared
// across optimizers (betas, eps, weight decay) come from the training section as HF defines them,
// and each optimizer's own options come from the run spec's `optimizer:` section (HF optim_args).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

struct ParamGroup {
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  double weight_decay = 0.0;
  // Mixed precision, set by the engine for an optimizer that fuses_low_precision(): per parameter, the 16-bit
  // gradient read in place of params[i].grad(), and the 16-bit parameter written with the updated value in the
  // same pass. Empty otherwise.
  std::vector<torch::Tensor> grads16, params16;
};

// Factors folded into the step as the gradients are read.
struct StepScaling {
  double grad_scale = 1.0;  // clip coefficient / loss scale
};

// training.adam_beta1 / adam_beta2 / adam_epsilon (HF TrainingArguments).
// training.optim_target_modules, resolved by the trainer to the parameter names of the weights it selects
// (optim/target_modules.h): the weights GaLore updates in low rank.
struct OptimizerHyper {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::set<std::string> low_rank_params;
};

// What an optimizer can do, declared once by each optimizer class (its kTraits) and kept by its registry
// entry (Registry::traits), where the engine builder, the launcher and checkpoint convert read it.
struct OptimizerTraits {
  // The update is element by element, so stepping a flat slice of the parameters equals stepping the whole
  // tensors, and the state is one value per element: it can be sharded (ZeRO 1-3) and re-partitioned.
  bool element_wise = false;
  // Updates each parameter inside backward (layer-wise GaLore, LOMO): no gradient accumulation, one process.
  bool steps_in_backward = false;
  // Of those, clips by a second backward (LOMO's scheme); the others cannot clip.
  bool clips_with_second_backward = false;
};

class Optimizer {
 public:
  using Traits = OptimizerTraits;
  static constexpr OptimizerTraits kTraits{};  // an optimizer class declares its own to differ
  virtual ~Optimizer() = default;
  // One update of every parameter with a defined gradient, at learning rate `lr`.
  void step(double lr) { step(lr, StepScaling{}); }
  // The same with every gradient multiplied by scaling.grad_scale as it is read.
  virtual void step(double lr, const StepScaling& scaling) = 0;
  // True when step() honours ParamGroup::grads16 / params16 (otherwise the caller gives fp32 gradients and
  // copies the parameters itself).
  virtual bool fuses_low_precision() const { return false; }
  // How the update runs, for the run-start block: the kernel's instruction set and threads, or "op-by-op".
  virtual std::string kernel_description() const { return "op-by-op"; }
  // Layer-wise optimizers (galore_*_layerwise) update each parameter from inside backward as soon as its
  // gradient is complete (engine/backward_stepper.h hooks them in), so whole-model gradients never exist.
  virtual bool steps_in_backward() const { return false; }
  // The parameters such an optimizer steps, by name.
  virtual std::vector<std::pair<std::string, torch::Tensor>> backward_parameters() const { return {}; }
  // One parameter's update with its complete gradient `grad` at learning rate lr (layer-wise optimizers).
  virtual void step_parameter(const std::string& /*name*/, const torch::Tensor& /*grad*/, double /*lr*/) {}
  // Named state tensors (for checkpoints): "<param name>.<slot>".
  virtual std::map<std::string, torch::Tensor> state() const = 0;
  // Restores state() output. Parameters without saved state start fresh (they were never stepped);
  // a saved tensor whose shape does not match its parameter's is a RuntimeFailure naming it.
  virtual void load_state(const std::map<std::string, torch::Tensor>& state) = 0;
  // Bytes of state held in memory, and in swap files (NVMe offload).
  virtual int64_t state_bytes_in_memory() const;
  virtual int64_t state_bytes_offloaded() const { return 0; }
};

// Splits parameters into HF's decay / no-decay groups: biases and normalisation weights get no decay.
std::vector<ParamGroup> make_param_groups(const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
                                          double weight_decay);
bool is_no_decay_parameter(const std::string& name);

// Checkpoint helpers for optimizers. find_state: the tensor "<name>.<slot>", or an undefined tensor
// when absent; with `shape` given, a size mismatch throws RuntimeFailure naming the tensor.
torch::Tensor find_state(const std::map<std::string, torch::Tensor>& state, const std::string& name,
                         const std::string& slot, c10::optional<torch::IntArrayRef> shape = c10::nullopt);
// The step counter "<name>.step" as an integer (0 when absent).
int64_t find_step(const std::map<std::string, torch::Tensor>& state, const std::string& name);

}  // namespace hftrain
