// Writing and reading ZeRO checkpoint shards (see zero_checkpoint.h).
#include "engine/zero_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;

const char* const kZeroModelStatesFile = "mp_rank_00_model_states.safetensors";

std::string zero_tag(int64_t global_step) { return "global_step" + std::to_string(global_step); }

std::string zero_shard_file_name(int rank) {
  return "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.safetensors";
}

std::vector<std::string> write_rank_checkpoint_files(const std::string& tmp_dir, int64_t global_step,
                                                     const Engine& engine, Model& model,
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
        nlohmann::json order = nlohmann::json::array();
        for (const auto& np : model.named_parameters()) {
          order.push_back(np.key());
          if (!np.value().requires_grad()) full.emplace_back(np.key(), np.value());
        }
        for (const auto& nb : model.named_buffers()) {
          order.push_back(nb.key());
          full.emplace_back(nb.key(), nb.value());
        }
        std::map<std::string, std::string> meta = {{"format", "hftrain-zero-model-states"},
                                                   {"version", "1"},
                                                   {"tensor_order", order.dump()},
                                                   {"config", model.config_json().dump()},
                                                   {"zero_stage", shard.metadata["zero_stage"]},
                                                   {"world_size", std::to_string(comm.world_size())},
                                                   {"global_step", std::to_string(global_step)}};
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

namespace {

// "optimizer_state.flat_group_<g>.<slot>" -> g, or -1 for any other name.
int state_group(const std::string& key) {
  static const std::string prefix = "optimizer_state.flat_group_";
  if (key.rfind(prefix, 0) != 0) return -1;
  const std::size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos) return -1;
  try {
    return std::stoi(key.substr(prefix.size(), dot - prefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

// Copies the elements of flat range [begin, end) that both `from` (covering flat [from_begin, ...)) and
// `to` (covering flat [to_begin, ...)) hold.
void copy_overlap(const torch::Tensor& from, int64_t from_begin, torch::Tensor& to, int64_t to_begin, int64_t begin,
                  int64_t end) {
  const int64_t b = std::max({begin, from_begin, to_begin});
  const int64_t e = std::min({end, from_begin + from.numel(), to_begin + to.numel()});
  if (e > b) to.narrow(0, b - to_begin, e - b).copy_(from.narrow(0, b - from_begin, e - b));
}

// The shard `rank` of `world` workers would have saved, cut out of the saved shards of another world size:
// each group's fp32 master partition and every partition-shaped optimizer state take the elements of the
// old partitions that overlap the new one (one old shard in memory at a time); step counters, the loss
// scaler and the metadata come from rank 0's shard. The new partition map is the saved one rebuilt for
// `world` (same groups, order and alignment), which the engine then checks against its own.
SafetensorsFile repartitioned_shard(const fs::path& tag_dir, const PartitionMap& saved, int rank, int world) {
  std::vector<PartitionMap::GroupInput> inputs;
  for (const auto& g : saved.groups) {
    PartitionMap::GroupInput in;
    in.weight_decay = g.weight_decay;
    for (const auto& p : g.params) {
      in.names.push_back(p.name);
      in.shapes.push_back(p.shape);
      in.model_index.push_back(p.model_index);
    }
    inputs.push_back(std::move(in));
  }
  const PartitionMap now = PartitionMap::build(inputs, world, saved.alignment);
  SafetensorsFile out;
  for (int old_rank = 0; old_rank < saved.world_size; ++old_rank) {
    const fs::path file = tag_dir / zero_shard_file_name(old_rank);
    if (!fs::exists(file))
      throw RuntimeFailure("missing ZeRO shard '" + file.string() + "' (the checkpoint was saved by " +
                           std::to_string(saved.world_size) + " workers)");
    const SafetensorsFile old = load_safetensors(file.string());
    if (old_rank == 0) {  // the new shard's tensors, shaped for this rank
      out.metadata = old.metadata;
      out.metadata["rank"] = std::to_string(rank);
      out.metadata["world_size"] = std::to_string(world);
      out.metadata["partition"] = now.to_json().dump();
      for (const auto& [key, t] : old.tensors) {
        const int g = key.rfind("fp32_flat_group_", 0) == 0 ? std::stoi(key.substr(16)) : state_group(key);
        if (g < 0 || (t.numel() == 1 && key.rfind("fp32_flat_group_", 0) != 0)) {
          out.tensors[key] = t.clone();  // step counters, the loss scaler: the same on every rank
        } else if (g >= static_cast<int>(saved.groups.size())) {
          throw RuntimeFailure("'" + file.string() + "': tensor '" + key + "' names a flat group the partition map lacks");
        } else if (key.rfind("fp32_flat_group_", 0) == 0) {
          out.tensors[key] = torch::zeros({now.groups[g].partition_real(rank)}, t.options());
        } else if (t.numel() == saved.groups[g].partition_size) {
          out.tensors[key] = torch::zeros({now.groups[g].partition_size}, t.options());
        } else {
          throw RuntimeFailure("'" + file.string() + "': optimizer state '" + key + "' has " + std::to_string(t.numel()) +
                               " elements, neither one nor the partition's " +
                               std::to_string(saved.groups[g].partition_size) + ", so it cannot be re-partitioned");
        }
      }
    }
    for (auto& [key, t] : out.tensors) {
      const bool master = key.rfind("fp32_flat_group_", 0) == 0;
      const int g = master ? std::stoi(key.substr(16)) : state_group(key);
      if (g < 0) continue;
      auto it = old.tensors.find(key);
      if (it == old.tensors.end())
        throw RuntimeFailure("'" + file.string() + "': tensor '" + key + "' is missing (rank 0's shard has it)");
      if (!master && it->second.numel() == 1) continue;  // a step counter, taken from rank 0
      const FlatGroupInfo &was = saved.groups[g], &is = now.groups[g];
      // Only real elements move; padding stays zero, as a fresh partition's would be.
      copy_overlap(it->second, was.partition_begin(old_rank), t, is.partition_begin(rank), 0, was.numel);
    }
  }
  return out;
}

}  // namespace

bool has_zero_checkpoint(const std::string& checkpoint_dir) { return fs::exists(fs::path(checkpoint_dir) / "latest"); }

std::string read_zero_tag(const std::string& checkpoint_dir) {
  const fs::path latest = fs::path(checkpoint_dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string tag = read_text_file(latest.string());
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  return tag;
}

void load_zero_checkpoint(const std::string& checkpoint_dir, Engine& engine, Comm& comm) {
  const std::string tag = read_zero_tag(checkpoint_dir);
  if (tag.empty())
    throw RuntimeFailure("'" + checkpoint_dir + "' holds no ZeRO shards (no 'latest' file): it was saved with zero.stage 0; "
                         "resume it with zero.stage 0");
  const fs::path tag_dir = fs::path(checkpoint_dir) / tag;
  const fs::path first = tag_dir / zero_shard_file_name(0);
  if (!fs::exists(first)) throw RuntimeFailure("missing ZeRO shard '" + first.string() + "'");
  const SafetensorsHeader header = read_safetensors_header(first.string());
  auto meta = [&](const std::string& key) {
    auto it = header.metadata.find(key);
    if (it == header.metadata.end()) throw RuntimeFailure("'" + first.string() + "': shard metadata has no '" + key + "'");
    return it->second;
  };
  const int saved_world = std::stoi(meta("world_size"));
  if (saved_world == comm.world_size()) {
    const fs::path file = tag_dir / zero_shard_file_name(comm.rank());
    if (!fs::exists(file))
      throw RuntimeFailure("missing ZeRO shard '" + file.string() + "' for rank " + std::to_string(comm.rank()));
    SafetensorsFile shard = load_safetensors(file.string());
    engine.import_shard(shard.tensors, shard.metadata, file.string());
    return;
  }
  // Another world size: this rank's partition is cut out of the saved ones (universal resume).
  const PartitionMap saved = PartitionMap::from_json(nlohmann::json::parse(meta("partition")), first.string());
  if (comm.rank() == 0)
    std::cerr << "re-partitioning the ZeRO stage-" << meta("zero_stage") << " shards of " << saved_world << " workers for "
              << comm.world_size() << " workers (fp32 master weights and optimizer state, one saved shard at a time)"
              << std::endl;
  SafetensorsFile shard = repartitioned_shard(tag_dir, saved, comm.rank(), comm.world_size());
  engine.import_shard(shard.tensors, shard.metadata,
                      tag_dir.string() + " (re-partitioned from " + std::to_string(saved_world) + " workers)");
}

}  // namespace hftrain
