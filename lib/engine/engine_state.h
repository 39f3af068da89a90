// The engine as a stateful part of a checkpoint (checkpoint/stateful.h). Saving: an unsharded engine's
// optimizer state (optimizer.safetensors; a sharded engine's ZeRO shards are written by every rank while the
// checkpoint commits, engine/zero_checkpoint.h). Loading: the model weights and the optimizer state from
// any saved layout -- its own, ZeRO shards of another world size or stage, or a stage-0 checkpoint.
#pragma once

#include "checkpoint/safetensors.h"
#include "checkpoint/stateful.h"
#include "distributed/comm.h"
#include "engine/engine.h"
#include "models/model.h"

namespace hftrain {

// Trained weights (a checkpoint's model.safetensors, `path` in errors) into the model's parameters, unless the
// engine partitions them, and into the engine's fp32 master weights. Collective.
void load_trained_weights(Engine& engine, Model& model, const SafetensorsFile& weights, const std::string& path);

class EngineState : public Stateful {
 public:
  // `with_optimizer` false (training.ignore_optimizer_state): load only the weights.
  EngineState(Engine& engine, Model& model, Comm& comm, bool with_optimizer)
      : engine_(engine), model_(model), comm_(comm), with_optimizer_(with_optimizer) {}
  void save(CheckpointContents& out) override;
  void load(const CheckpointReader& in) override;

 private:
  Engine& engine_;
  Model& model_;
  Comm& comm_;
  bool with_optimizer_;
};

}  // namespace hftrain
