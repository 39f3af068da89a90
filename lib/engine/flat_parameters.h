// FlatParameters: the parameter-layout axis of the ZeRO engine. The trainable parameters of each flat
// group live in one padded buffer (layout and partitions: engine/partition.h) and the model's parameters
// become views of it. At ZeRO-3 the optimizer groups are first split per gather unit of the model, so a
// unit gathers only its own parameters (unit_layout), and the buffers of groups that are not persistent
// are released between gathers (engine/param_coordinator.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/comm.h"
#include "engine/partition.h"
#include "optim/optimizer.h"

namespace hftrain {

// Stage 3 sharded construction: a parameter's initial value as runs of its flat fp32 elements
// (begin, count), so that a rank reads only its partition (e.g. from the safetensors files).
using ValueReader = std::function<torch::Tensor(int64_t begin, int64_t count)>;
// Receives each parameter's initial value; returns true to keep the whole value in the model (a
// parameter this engine does not train, which stays whole).
using InitialValueVisitor = std::function<bool(const std::string& name, const ValueReader& read)>;
using InitialValues = std::function<void(const InitialValueVisitor&)>;

// The optimizer groups regrouped into flat groups per gather unit: each unit gets a flat group per
// weight-decay group for the parameters it uses first; parameters used by several units (tied weights)
// get their own flat groups; parameters under the persistence threshold share flat groups that stay whole.
struct UnitLayout {
  std::vector<ParamGroup> groups;
  std::vector<bool> persistent;
  std::vector<std::vector<std::size_t>> unit_groups;  // per unit, the non-persistent flat groups it uses
};
UnitLayout unit_layout(const std::vector<ParamGroup>& groups, const std::vector<std::vector<std::string>>& units,
                       int64_t persistence_threshold);

// The partition map of `groups` over `world` ranks; `model_order` (trainable names in the model's order)
// fixes each parameter's readiness order in backward. Every parameter must be fp32 on `device`, or released on
// the host by sharded construction (zero.Init: only its partitions reach `device`).
// `holders[g]` (when given) names the ranks that hold group g (empty: every rank; engine/expert_data_groups.h).
PartitionMap map_groups(const std::vector<ParamGroup>& groups, const std::vector<std::string>& model_order, int world,
                        torch::Device device, const std::vector<std::vector<int>>& holders = {});

struct FlatParameters {
  std::vector<std::vector<torch::Tensor>> params;  // per group, the model's parameters (views of flat)
  std::vector<torch::Tensor> flat;                 // per group, padded, in the parameter dtype
};

// Moves the parameters' values into flat buffers of `dtype` on `device` (the first holder's values win, broadcast
// over `comms[g]` as DDP does) and makes the parameters views of them. `take_values(g, values32, flat)` sees each
// group's fp32 values (the flat buffer itself when dtype is fp32) before the next group is built, so at most one
// group is held twice. A group this rank does not hold (`comms[g]` null) keeps no memory: its parameters become
// views of a released buffer (their shapes intact, not to be read), its flat buffer and params entry are empty.
using GroupValuesSink = std::function<void(std::size_t g, const torch::Tensor& values32, const torch::Tensor& flat)>;
FlatParameters adopt_parameters(std::vector<ParamGroup>& groups, const PartitionMap& map, torch::ScalarType dtype,
                                const std::vector<Comm*>& comms, const GroupValuesSink& take_values, torch::Device device);

// Sharded construction (zero.Init): the parameters hold no memory; `initial_values` hands each one's value
// in turn and only this rank's partition of it is kept, in the returned fp32 partitions (one per group,
// on `device`). The parameters become views of flat buffers on `device` that are released again unless
// `persistent[g]`.
std::vector<torch::Tensor> read_initial_partitions(const PartitionMap& map, int rank, const InitialValues& initial_values,
                                                   torch::Device device);
FlatParameters adopt_released_parameters(std::vector<ParamGroup>& groups, const PartitionMap& map, torch::ScalarType dtype,
                                         const std::vector<bool>& persistent, torch::Device device);

}  // namespace hftrain
