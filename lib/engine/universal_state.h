// Universal checkpoints: the training state of a checkpoint addressed by parameter name, whatever layout
// saved it -- stage 0's per-parameter files (model.safetensors + optimizer.safetensors) or the ZeRO shards
// of any world size and stage -- cut into the layout of the run that resumes it (or of a conversion).
//
// A layout is a list of slabs. A slab is one flat run of fp32 master values with its optimizer slot
// tensors (exp_avg, exp_avg_sq, ... of the same length) and a "step" counter; it holds pieces of one or
// more parameters: a ZeRO shard has one slab per flat group (this rank's partition), stage 0 one slab per
// parameter. Cutting copies, for every piece of every saved slab, the elements that a piece of a target
// slab holds, reading from the files only the runs it needs, one saved slab at a time: no process ever
// holds more than its own share of the new layout plus one run being copied.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

struct PartitionMap;

// "1 worker", "3 workers" (for the messages that describe layouts).
std::string workers_text(int64_t n);

struct StateSlab {
  struct Piece {
    std::string param;
    int64_t param_begin = 0;  // first element of the parameter this piece holds
    int64_t count = 0;
    int64_t offset = 0;  // where it sits in the slab
  };
  std::string master_file, master_key;  // saved layouts: where the fp32 masters are; targets: the output key
  std::string state_file, state_prefix;  // optimizer slots are <state_prefix><slot> (e.g. "flat_group_0.exp_avg")
  int64_t master_numel = 0;  // elements of the master tensor (ZeRO shards strip the padding)
  int64_t state_numel = 0;   // elements of each slot tensor (ZeRO shards keep it)
  bool stepped = false;  // ZeRO targets: the optimizer steps this slab even when it holds only padding
  bool held = true;  // false: the rank does not hold this flat group (no pieces, empty tensors, step counter only)
  bool whole_parameter = false;  // stage 0: the slab is one parameter, its tensors are saved in its shape
  std::vector<int64_t> shape;
  std::vector<Piece> pieces;
};

struct SlabLayout {
  int world_size = 1;
  int zero_stage = 0;
  std::string precision;  // "fp32", "bf16", "fp16"; "" when the files do not say (stage 0)
  std::vector<StateSlab> slabs;
  std::map<std::string, std::vector<int64_t>> shapes;  // every parameter the layout holds
  std::vector<std::string> trainable;  // the parameters with optimizer state, in the model's order
  std::string scaler_file;  // the file holding the loss scaler's "loss_scaler.*" tensors ("" = none)
  std::string describe() const;  // "2 workers at ZeRO stage 2 (bf16)"
};

// The layout a checkpoint directory was saved in (its `latest` shards, else stage 0's files). A missing
// shard, metadata that disagrees between shards or a malformed partition map throws RuntimeFailure naming
// the file.
SlabLayout saved_state_layout(const std::string& checkpoint_dir);

// Target layouts: rank `rank`'s partition of a ZeRO engine's map (keys as its shard: fp32_flat_group_<g>,
// optimizer_state.flat_group_<g>.<slot>), and stage 0's per-parameter state (keys <name>, <name>.<slot>).
// A group the rank does not hold (held by a subset of ranks) is a slab of no elements: in a saved layout it has
// no pieces (its tensors, empty, need not be in the file); a target gets empty tensors under its keys.
SlabLayout shard_state_layout(const PartitionMap& map, int rank, int zero_stage);
SlabLayout per_parameter_state_layout(const std::vector<std::pair<std::string, std::vector<int64_t>>>& params);

// The saved state cut into `target`: fp32 masters under the target slabs' master keys, optimizer slots
// (and the loss scaler's tensors) under their state keys, per-parameter slots in the parameter's shape.
// A parameter the target holds that the checkpoint lacks, or holds with another shape, and a parameter
// the checkpoint trains that the target lacks, throw ConfigError naming it and both shapes.
struct CutState {
  std::map<std::string, torch::Tensor> masters;
  std::map<std::string, torch::Tensor> state;
};
CutState cut_state(const SlabLayout& saved, const SlabLayout& target);

}  // namespace hftrain
