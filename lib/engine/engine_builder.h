// The engine of a run, built from its spec in ordered steps (as torchtitan applies its parallelisms):
// the device, precision and clipping, the optimizer's capabilities, ZeRO-3 gather units, sharded construction
// (zero.Init), NVMe offload, then the engine itself (engine/factory.h), whose gather hooks are installed
// in the model. The trainer asks for "the engine of this run" and knows none of these settings.
#pragma once

#include <memory>
#include <string>

#include "distributed/comm.h"
#include "engine/engine.h"
#include "engine/factory.h"
#include "models/model.h"
#include "runspec/run_spec.h"

namespace hftrain {

struct PretrainedPlan;

struct EngineRequest {
  const RunSpec& spec;
  const PrecisionPolicy& precision;  // the run's (precision_policy(spec), decided once)
  std::shared_ptr<Model> model;
  // model.from_pretrained read rank by rank at ZeRO-3 with zero.Init (null otherwise).
  std::shared_ptr<const PretrainedPlan> deferred_weights;
  OptimizerTraits optimizer_traits;  // the registry entry's traits of spec.optimizer.type
  OptimizerFactory build_optimizer;
  Comm& comm;
  torch::Device device = torch::kCPU;  // where the model was placed (train/model_and_data.h place_on_device)
  // This rank's expert-data-parallel group (distributed/parallel_layout.h); null without expert parallelism.
  std::shared_ptr<Comm> expert_data_group = nullptr;
};

// The EngineSettings of the run, each step of engine_builder.cpp applied in order (no tensor is touched).
EngineSettings engine_config_for(const EngineRequest& request);

// Builds the engine over the model's parameters (HF decay / no-decay groups) and installs its gather hooks.
std::unique_ptr<Engine> build_engine(const EngineRequest& request);

}  // namespace hftrain
