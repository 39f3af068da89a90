// Writing and reading ZeRO checkpoint shards (see zero_checkpoint.h).
#include "engine/zero_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "engine/universal_state.h"
#include "runspec/run_spec.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;

const char* const kZeroModelStatesFile = "mp_rank_00_model_states.safetensors";

std::string zero_tag(int64_t global_step) { return "global_step" + std::to_string(global_step); }

std::string zero_shard_file_name(int rank) {
  return "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.safetensors";
}

std::map<std::string, std::string> zero_shard_metadata(int zero_stage, const std::string& precision, int rank,
                                                       const PartitionMap& map) {
  return {{"format", "hftrain-zero-shard"},
          {"version", "1"},
          {"zero_stage", std::to_string(zero_stage)},
          {"precision", precision},
          {"rank", std::to_string(rank)},
          {"world_size", std::to_string(map.world_size)},
          {"partition", map.to_json().dump()}};
}

std::map<std::string, std::string> zero_model_states_metadata(const std::vector<std::string>& tensor_order,
                                                              const std::string& config_json, int zero_stage,
                                                              int world_size, int64_t global_step) {
  return {{"format", "hftrain-zero-model-states"},
          {"version", "1"},
          {"tensor_order", nlohmann::json(tensor_order).dump()},
          {"config", config_json},
          {"zero_stage", std::to_string(zero_stage)},
          {"world_size", std::to_string(world_size)},
          {"global_step", std::to_string(global_step)}};
}

std::vector<std::string> write_rank_checkpoint_files(const std::string& tmp_dir, int64_t global_step,
                                                     const EngineCheckpointState& engine, Model& model,
                                                     const std::vector<std::pair<std::string, std::string>>& own_files,
                                                     Comm& comm) {
  comm.barrier("checkpoint directory created");
  const std::string tag = zero_tag(global_step);
  const fs::path dir = fs::path(tmp_dir) / tag;
  std::string error;
  try {
    for (const auto& [name, bytes] : own_files) write_file_atomic((fs::path(tmp_dir) / name).string(), bytes);
    if (engine.sharded()) {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (!fs::is_directory(dir)) throw RuntimeFailure("cannot create '" + dir.string() + "': " + ec.message());
      EngineShard shard = engine.export_shard();
      shard.metadata["global_step"] = std::to_string(global_step);
      save_safetensors((dir / zero_shard_file_name(comm.rank())).string(), shard.tensors, shard.metadata);
      if (comm.rank() == 0) {
        NamedTensors full;
        std::vector<std::string> order;
        // An adapter model's frozen base is never copied into its checkpoints (it is the base model's).
        const bool whole = model.adapter() == nullptr;
        for (const auto& np : model.named_parameters()) {
          order.push_back(np.key());
          if (np.value().requires_grad() || !whole) continue;
          if (np.value().storage().nbytes() == 0)  // a stage-3 shard view: only adapter models have frozen parameters
            throw RuntimeFailure("checkpoint: frozen parameter '" + np.key() +
                                 "' is partitioned at ZeRO-3 and cannot be written whole into " + kZeroModelStatesFile);
          full.emplace_back(np.key(), np.value());
        }
        for (const auto& nb : model.named_buffers()) {
          order.push_back(nb.key());
          if (whole) full.emplace_back(nb.key(), nb.value());
        }
        const auto meta = zero_model_states_metadata(order, model.config_json().dump(), std::stoi(shard.metadata["zero_stage"]),
                                                     comm.world_size(), global_step);
        save_safetensors((dir / kZeroModelStatesFile).string(), full, meta);
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Everyone learns whether every rank succeeded (the highest failing rank + 1, or 0).
  const double failed =
      comm.all_reduce_scalar(error.empty() ? 0.0 : comm.rank() + 1.0, ReduceOp::kMax, "checkpoint files vote");
  if (failed > 0) {
    const int bad = static_cast<int>(failed) - 1;
    throw RuntimeFailure("checkpoint: rank " + std::to_string(bad) + " could not write its files into '" + tmp_dir + "'" +
                         (error.empty() ? std::string() : ": " + error));
  }
  std::vector<std::string> names;
  if (comm.rank() != 0) return names;
  if (engine.sharded()) write_file_atomic((fs::path(tmp_dir) / "latest").string(), tag);
  for (const auto& entry : fs::recursive_directory_iterator(tmp_dir))
    if (entry.is_regular_file()) names.push_back(fs::relative(entry.path(), tmp_dir).string());
  return names;
}

bool has_zero_checkpoint(const std::string& checkpoint_dir) { return fs::exists(fs::path(checkpoint_dir) / "latest"); }

std::string read_zero_tag(const std::string& checkpoint_dir) {
  const fs::path latest = fs::path(checkpoint_dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string tag = read_text_file(latest.string());
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  return tag;
}

int saved_zero_stage(const std::string& checkpoint_dir) {
  const std::string tag = read_zero_tag(checkpoint_dir);
  if (tag.empty()) return 0;
  const std::string first = (fs::path(checkpoint_dir) / tag / zero_shard_file_name(0)).string();
  const SafetensorsHeader header = read_safetensors_header(first);
  auto it = header.metadata.find("zero_stage");
  try {
    if (it != header.metadata.end()) return std::stoi(it->second);
  } catch (const std::logic_error&) {
  }
  throw RuntimeFailure("'" + first + "': shard metadata has no valid 'zero_stage'");
}

std::string layout_change(int64_t saved_world_size, int saved_stage, int64_t world_size, const RunSpec& spec) {
  if (saved_world_size == world_size && saved_stage == spec.zero.stage) return "";
  return "resuming a checkpoint of " + workers_text(saved_world_size) + " at stage " + std::to_string(saved_stage) + " as " +
         workers_text(world_size) + " at stage " + std::to_string(spec.zero.stage);
}

void load_zero_checkpoint(const std::string& checkpoint_dir, Engine& engine, Comm& comm) {
  const PartitionMap* map = engine.partition_map();
  if (!map) throw RuntimeFailure("load_zero_checkpoint: the engine is not sharded");
  const std::string tag = read_zero_tag(checkpoint_dir);
  if (!tag.empty()) {  // the same layout: this rank's own shard, as saved
    const fs::path file = fs::path(checkpoint_dir) / tag / zero_shard_file_name(comm.rank());
    if (fs::exists(file)) {
      const SafetensorsHeader header = read_safetensors_header(file.string());
      auto it = header.metadata.find("partition");
      if (it != header.metadata.end() && nlohmann::json::parse(it->second, nullptr, false) == map->to_json()) {
        SafetensorsFile shard = load_safetensors(file.string());
        engine.import_shard(shard.tensors, shard.metadata, file.string());
        return;
      }
    }
  }
  // Another world size, stage or a stage-0 checkpoint: this rank's partition is cut out of the saved state.
  const SlabLayout saved = saved_state_layout(checkpoint_dir);
  const int stage = engine.partitions_parameters() ? 3 : saved.zero_stage;  // 1 and 2 share a layout
  if (comm.rank() == 0)
    std::cerr << "re-partitioning the training state of " << saved.describe() << " for " << workers_text(comm.world_size())
              << " (fp32 master weights and optimizer state, only the runs each rank needs)" << std::endl;
  CutState cut = cut_state(saved, shard_state_layout(*map, comm.rank(), stage));
  std::map<std::string, torch::Tensor> tensors = std::move(cut.state);
  for (auto& [k, v] : cut.masters) tensors[k] = std::move(v);
  std::map<std::string, std::string> metadata = {{"rank", std::to_string(comm.rank())},
                                                 {"world_size", std::to_string(comm.world_size())},
                                                 {"partition", map->to_json().dump()}};
  if (!saved.precision.empty()) metadata["precision"] = saved.precision;
  engine.import_shard(tensors, metadata, checkpoint_dir + " (re-partitioned from " + saved.describe() + ")");
}

}  // namespace hftrain
