// ZeRO shards inside an HF checkpoint directory. DeepSpeed's layout (file names, `latest`, one optimizer
// shard per data-parallel rank), with safetensors instead of pickles so that no code needs to be
// unpickled to read them:
//   checkpoint-N/latest                                                    "global_stepN" (written last)
//   checkpoint-N/global_stepN/zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors   one per rank:
//       fp32_flat_group_<g>        this rank's fp32 master partition of group g, padding stripped
//       optimizer_state.<key>      this rank's optimizer state (over its padded partition)
//       metadata: zero_stage, rank, world_size, partition (the PartitionMap as JSON)
//   checkpoint-N/global_stepN/mp_rank_00_model_states.safetensors          rank 0:
//       buffers and frozen parameters (full), metadata: tensor_order (the model's save order), config,
//       zero_stage, world_size, global_step
// `hftrain zero-to-fp32` rebuilds model.safetensors from these files alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "distributed/comm.h"
#include "engine/engine.h"
#include "models/model.h"

namespace hftrain {

std::string zero_tag(int64_t global_step);  // "global_step<N>"
std::string zero_shard_file_name(int rank);  // "zero_pp_rank_<r>_mp_rank_00_optim_states.safetensors"
extern const char* const kZeroModelStatesFile;  // "mp_rank_00_model_states.safetensors"

struct PartitionMap;

// The metadata of rank `rank`'s shard (the engine's export and `hftrain checkpoint convert` write it).
std::map<std::string, std::string> zero_shard_metadata(int zero_stage, const std::string& precision, int rank,
                                                       const PartitionMap& map);
// The metadata of mp_rank_00_model_states: `tensor_order` lists every tensor of model.safetensors.
std::map<std::string, std::string> zero_model_states_metadata(const std::vector<std::string>& tensor_order,
                                                              const std::string& config_json, int zero_stage,
                                                              int world_size, int64_t global_step);

// Collective, run while a checkpoint is being committed: `tmp_dir` (the checkpoint's temporary
// directory) exists -- rank 0 created it and calls this from its commit hook, the other ranks call it
// directly. Every rank writes `own_files` (name -> bytes, e.g. its RNG state) and, for a sharded engine,
// its ZeRO shard under global_step<N>/; rank 0 also the model states and, once every rank has succeeded,
// `latest`. A failure on any rank throws RuntimeFailure on every rank, naming the rank. Returns on rank 0
// every file now under tmp_dir (relative names), so it can record the other ranks' files in the manifest.
std::vector<std::string> write_rank_checkpoint_files(const std::string& tmp_dir, int64_t global_step,
                                                     const EngineCheckpointState& engine, Model& model,
                                                     const std::vector<std::pair<std::string, std::string>>& own_files,
                                                     Comm& comm);

// True when <dir>/latest exists (the shards of that checkpoint are complete).
bool has_zero_checkpoint(const std::string& checkpoint_dir);
// The tag <dir>/latest names ("global_stepN", trailing whitespace removed); "" when there is no such file.
std::string read_zero_tag(const std::string& checkpoint_dir);
// The ZeRO stage a checkpoint was saved at (its rank-0 shard's metadata), 0 when it has no shards.
int saved_zero_stage(const std::string& checkpoint_dir);

struct RunSpec;
// "resuming a checkpoint of 2 workers at stage 2 as 3 workers at stage 1" when the checkpoint's world size or
// ZeRO stage differs from this run's (`spec`'s stage), "" when both are the same.
std::string layout_change(int64_t saved_world_size, int saved_stage, int64_t world_size, const RunSpec& spec);

// Loads this rank's shard into a sharded engine. Collective (the engine all-gathers the restored
// partitions). A checkpoint of the same layout gives each rank its own saved shard; any other (another
// world size, stage 3 <-> 1/2, a stage-0 checkpoint) is cut into this engine's layout by parameter name
// (engine/universal_state.h). A missing or inconsistent file throws RuntimeFailure naming it; a different
// parameter set, ConfigError naming the parameter.
void load_zero_checkpoint(const std::string& checkpoint_dir, Engine& engine, Comm& comm);

}  // namespace hftrain
