// Writing and reading ZeRO checkpoint shards (see zero_checkpoint.h).
#include "engine/zero_checkpoint.h"

#include <filesystem>

#include "checkpoint/safetensors.h"
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

bool has_zero_checkpoint(const std::string& checkpoint_dir) { return fs::exists(fs::path(checkpoint_dir) / "latest"); }

void load_zero_checkpoint(const std::string& checkpoint_dir, Engine& engine, Comm& comm) {
  const fs::path latest = fs::path(checkpoint_dir) / "latest";
  if (!fs::exists(latest))
    throw RuntimeFailure("'" + checkpoint_dir + "' holds no ZeRO shards (no 'latest' file): it was saved with zero.stage 0; "
                         "resume it with zero.stage 0");
  std::string tag = read_text_file(latest.string());
  while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
  const fs::path file = fs::path(checkpoint_dir) / tag / zero_shard_file_name(comm.rank());
  if (!fs::exists(file))
    throw RuntimeFailure("missing ZeRO shard '" + file.string() + "' for rank " + std::to_string(comm.rank()) +
                         " (was the checkpoint saved by fewer workers?)");
  SafetensorsFile shard = load_safetensors(file.string());
  engine.import_shard(shard.tensors, shard.metadata, file.string());
}

}  // namespace hftrain
