// The engine's checkpoint hooks (see engine_state.h).
#include "engine/engine_state.h"

#include <iostream>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "engine/universal_state.h"
#include "engine/zero_checkpoint.h"

namespace hftrain {

void load_trained_weights(Engine& engine, Model& model, const SafetensorsFile& weights, const std::string& path) {
  // (stage 3: its shards are the parameters; another member's experts: the ranks that hold them load them)
  if (!engine.partitions_parameters()) load_model_weights(weights, path, model, !engine.holds_every_parameter());
  engine.load_master_weights(weights.tensors, path);
}

void EngineState::save(CheckpointContents& out) {
  if (engine_.sharded()) return;  // its shards: write_rank_checkpoint_files, while the checkpoint commits
  NamedTensors optim;
  for (const auto& [k, v] : engine_.optimizer_state()) optim.emplace_back(k, v);
  out.add(ckpt::kOptimizerFile, serialize_safetensors(optim));
}

void EngineState::load(const CheckpointReader& ckpt) {
  const std::string& dir = ckpt.dir();
  const std::string weights_name = weights_file_name(model_);
  const SafetensorsFile model_file = in_model_names(model_, ckpt.safetensors(weights_name));
  // Stage 3's parameters are its shards; without optimizer state they come from the consolidated weights.
  if (!engine_.partitions_parameters())
    load_model_weights(model_file, ckpt.path(weights_name), model_, !engine_.holds_every_parameter());
  if (!with_optimizer_) {
    std::cerr << "warning: training.ignore_optimizer_state: the weights, schedule and data position of '" + dir +
                     "' are restored, its optimizer state is not: the optimizer starts from zero moments"
              << std::endl;
    engine_.load_master_weights(model_file.tensors, ckpt.path(weights_name));
    return;
  }
  if (engine_.sharded()) {  // ZeRO: this rank's shard, cut from any saved layout (engine/zero_checkpoint.h)
    load_zero_checkpoint(dir, engine_, comm_);
    return;
  }
  // Mixed precision: the checkpoint's fp32 weights become the master weights.
  engine_.load_master_weights(model_file.tensors, ckpt.path(weights_name));
  if (!has_zero_checkpoint(dir)) {
    engine_.load_optimizer_state(ckpt.safetensors(ckpt::kOptimizerFile).tensors);
    return;
  }
  // A ZeRO checkpoint resumed at stage 0: every parameter's state consolidated from the shards.
  std::vector<std::pair<std::string, std::vector<int64_t>>> trainable;
  for (const auto& np : model_.named_parameters())
    if (np.value().requires_grad()) trainable.emplace_back(np.key(), np.value().sizes().vec());
  const SlabLayout saved = saved_state_layout(dir);
  if (comm_.rank() == 0) std::cerr << "consolidating the optimizer state of " << saved.describe() << " for stage 0" << std::endl;
  engine_.load_optimizer_state(cut_state(saved, per_parameter_state_layout(trainable)).state);
}

}  // namespace hftrain
