// ParameterPublisher: the last part of the ZeRO engine's step -- how the parameters every rank computes with
// learn the values this rank's optimizer step wrote. Chosen once, by the stage, when the engine is built:
// nothing to share (stage 0: every rank updated everything), an all-gather of each group's updated range
// (stages 1-2), or a refresh of the groups stage 3 keeps whole (its shards are the parameters).
#pragma once

#include <memory>
#include <vector>

#include "distributed/comm.h"
#include "engine/param_coordinator.h"

namespace hftrain {

class ParameterPublisher {
 public:
  virtual ~ParameterPublisher() = default;
  virtual void publish() = 0;
};

// Stage 0.
std::unique_ptr<ParameterPublisher> publish_nothing();
// Stages 1-2: `own[g]` (this rank's range of `full[g]`, the values it updated) all-gathered into `full[g]` over
// `comms[g]` (the group's holders; an empty `full[g]`: not held here, nothing to gather).
std::unique_ptr<ParameterPublisher> all_gather_partitions(std::vector<Comm*> comms, std::vector<torch::Tensor> own,
                                                          std::vector<torch::Tensor> full);
// Stage 3: the coordinator gathers the persistent groups again; the others are gathered when next used.
std::unique_ptr<ParameterPublisher> refresh_persistent(ParamCoordinator& coordinator);

}  // namespace hftrain
