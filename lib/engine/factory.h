// Engine construction keyed by zero.stage: the single-process engine (stage 0, one worker, fp32) or the
// ZeRO engine (stages 0-3 over the world's ranks, and every mixed-precision run: it owns the 16-bit buffers
// and fp32 masters). Mixed precision also turns the frozen floating-point parameters into the 16-bit dtype
// here, so the whole model computes in it. engine/engine_builder.h fills the EngineSettings from a run spec.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/comm.h"
#include "engine/zero_engine.h"

namespace hftrain {

// `named_params` in the model's order (all of them; frozen ones are skipped), `groups` the optimizer
// parameter groups over the trainable ones.
std::unique_ptr<Engine> make_engine(const EngineSettings& config,
                                    const std::vector<std::pair<std::string, torch::Tensor>>& named_params,
                                    std::vector<ParamGroup> groups, const OptimizerFactory& build_optimizer, Comm& comm);

}  // namespace hftrain
