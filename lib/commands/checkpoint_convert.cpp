// `hftrain checkpoint convert` (see checkpoint_convert.h). One target rank's state is cut and written at a
// time, so the command holds at most one new shard (plus the run being copied) in memory.
#include "commands/checkpoint_convert.h"

#include <filesystem>
#include <iostream>

#include <yaml-cpp/yaml.h>

#include "builtins/register_builtins.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/checkpoint_writer.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "config/issues.h"
#include "engine/factory.h"
#include "engine/partition.h"
#include "engine/universal_state.h"
#include "engine/zero_checkpoint.h"
#include "optim/optimizer.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

// The checkpoint's training.weight_decay (its run_spec.yaml), which decides the decay group's value.
double saved_weight_decay(const fs::path& dir) {
  const fs::path spec = dir / ckpt::kRunSpecFile;
  if (!fs::exists(spec)) return 0.0;
  try {
    const YAML::Node wd = lookup(lookup(YAML::LoadFile(spec.string()), "training"), "weight_decay");
    return wd.IsScalar() ? wd.as<double>() : 0.0;
  } catch (const YAML::Exception& e) {
    throw RuntimeFailure("'" + spec.string() + "': " + e.what());
  }
}

// Stages 1-2: HF's two parameter groups (decay, no decay) in the model's order, as the trainer builds them
// (optim/optimizer.h make_param_groups), partitioned for `world` workers as the engine does.
PartitionMap stage12_map(const SlabLayout& saved, double weight_decay, int world) {
  PartitionMap::GroupInput decay, no_decay;
  decay.weight_decay = weight_decay;
  for (std::size_t i = 0; i < saved.trainable.size(); ++i) {
    const std::string& name = saved.trainable[i];
    PartitionMap::GroupInput& g = is_no_decay_parameter(name) ? no_decay : decay;
    g.names.push_back(name);
    g.shapes.push_back(saved.shapes.at(name));
    g.model_index.push_back(static_cast<int64_t>(i));
  }
  return PartitionMap::build({decay, no_decay}, world);
}

bool is_optimizer_layout_file(const std::string& name, const std::string& tag) {
  return name == ckpt::kOptimizerFile || name == "latest" || name.rfind("rng_state", 0) == 0 ||
         (!tag.empty() && name.rfind(tag + "/", 0) == 0);
}

// mp_rank_00_model_states: the tensors of model.safetensors that no shard holds (buffers, frozen
// parameters) and the order of all of them, read from model.safetensors.
std::string model_states_bytes(const fs::path& dir, const SlabLayout& saved, int stage, int world, int64_t step) {
  const SafetensorsReader model((dir / ckpt::kModelFile).string());
  std::vector<SafetensorsHeader::Entry> entries = model.header().tensors;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::vector<std::string> order;
  NamedTensors kept;
  for (const auto& e : entries) {
    order.push_back(e.name);
    if (!saved.shapes.count(e.name) || std::find(saved.trainable.begin(), saved.trainable.end(), e.name) == saved.trainable.end())
      kept.emplace_back(e.name, model.read(e.name));
  }
  return serialize_safetensors(kept, zero_model_states_metadata(order, read_text_file((dir / ckpt::kConfigFile).string()),
                                                                  stage, world, step));
}

void check_request(const ConvertRequest& request) {
  if (request.stage < 0 || request.stage > 3)
    throw UsageError("checkpoint convert: --stage " + std::to_string(request.stage) + " is not a ZeRO stage (0 to 3)");
  if (request.stage == 3)
    throw UsageError("checkpoint convert: --stage 3 is not written offline: stage 3's layout follows the model's modules "
                     "and zero.stage3_param_persistence_threshold. Resume at stage 3 directly: `hftrain train --resume` "
                     "re-partitions any checkpoint into it as it loads");
  if (request.nproc_per_node < 1) throw UsageError("checkpoint convert: --nproc-per-node must be at least 1");
  if (!fs::is_directory(request.checkpoint_dir))
    throw UsageError("checkpoint convert: '" + request.checkpoint_dir + "' is not a directory");
}

// Only element-wise optimizer state can change layout (GaLore projections, 8-bit blocks, factored moments cannot).
void check_element_wise_optimizer(const Manifest& manifest, const ConvertRequest& request) {
  if (!manifest.layout.is_object() || !manifest.layout.contains("optimizer") || !manifest.layout["optimizer"].is_string())
    return;
  const std::string optimizer = manifest.layout["optimizer"].get<std::string>();
  const auto& optimizers = builtin_components().optimizers;
  if (optimizers.contains(optimizer) && optimizers.traits(optimizer).element_wise) return;
  std::string names;
  for (const auto& n : optimizers.names_where([](const OptimizerTraits& t) { return t.element_wise; }))
    names += (names.empty() ? "" : ", ") + n;
  throw UsageError("checkpoint convert: '" + request.checkpoint_dir + "' was written by optimizer '" + optimizer +
                   "', whose state is not one value per parameter element, so it cannot be re-partitioned "
                   "(that works for " + names + ")");
}

// The manifest of a complete checkpoint that holds optimizer state this command can re-partition.
Manifest read_convertible_manifest(const fs::path& dir, const ConvertRequest& request) {
  if (const std::string problem = verify_checkpoint(dir.string()); !problem.empty())
    throw RuntimeFailure("checkpoint convert: '" + request.checkpoint_dir + "' is not complete: " + problem);
  Manifest manifest = read_manifest(dir.string());
  if (manifest.save_only_model)
    throw RuntimeFailure("checkpoint convert: '" + request.checkpoint_dir +
                         "' holds only the model (save_only_model): there is no optimizer state to re-partition");
  check_element_wise_optimizer(manifest, request);
  return manifest;
}

// Every file but the optimizer layout's, copied as it is, and each new rank's RNG state: rank r continues
// saved rank r mod W's random stream.
void copy_run_files(CheckpointWriter& writer, const fs::path& dir, const Manifest& manifest, const SlabLayout& saved,
                    int world) {
  const std::string old_tag = read_zero_tag(dir.string());
  for (const auto& f : manifest.files) {
    if (is_optimizer_layout_file(f.name, old_tag)) continue;
    const fs::path to = fs::path(writer.tmp_dir()) / f.name;
    fs::create_directories(to.parent_path());
    fs::copy_file(dir / f.name, to, fs::copy_options::overwrite_existing);
    writer.adopt(f.name);
  }
  for (int r = 0; r < world; ++r)
    writer.add(ckpt::rng_state_file(r, world),
               read_text_file((dir / ckpt::rng_state_file(r % saved.world_size, saved.world_size)).string()));
}

// Stage 0: one optimizer.safetensors of per-parameter state.
void write_unsharded_state(CheckpointWriter& writer, const SlabLayout& saved) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  for (const auto& name : saved.trainable) params.emplace_back(name, saved.shapes.at(name));
  const CutState cut = cut_state(saved, per_parameter_state_layout(params));
  NamedTensors state(cut.state.begin(), cut.state.end());
  writer.add(ckpt::kOptimizerFile, serialize_safetensors(state));
}

// Stages 1-2: one shard per rank (cut and written one at a time), the model states and `latest`.
void write_zero_shards(CheckpointWriter& writer, const fs::path& dir, const SlabLayout& saved, const PartitionMap& map,
                       int stage, int world, int64_t step) {
  const std::string tag = zero_tag(step);
  const std::string precision = saved.precision.empty() ? "fp32" : saved.precision;
  for (int r = 0; r < world; ++r) {
    CutState cut = cut_state(saved, shard_state_layout(map, r, stage));
    NamedTensors shard;
    for (const auto& [k, v] : cut.masters) shard.emplace_back(k, v);
    for (const auto& [k, v] : cut.state) shard.emplace_back(k, v);
    std::map<std::string, std::string> meta = zero_shard_metadata(stage, precision, r, map);
    meta["global_step"] = std::to_string(step);
    const std::string name = tag + "/" + zero_shard_file_name(r);
    fs::create_directories(fs::path(writer.tmp_dir()) / tag);
    write_safetensors_streamed((fs::path(writer.tmp_dir()) / name).string(), shard, meta);
    writer.adopt(name);
  }
  writer.add(tag + "/" + kZeroModelStatesFile, model_states_bytes(dir, saved, stage, world, step));
  writer.add("latest", tag);
}

nlohmann::json converted_layout(const Manifest& manifest, const SlabLayout& saved, const PartitionMap& map, int stage,
                                int world) {
  nlohmann::json layout = manifest.layout.is_object() ? manifest.layout : nlohmann::json::object();
  layout["world_size"] = world;
  layout["zero_stage"] = stage;
  layout["optimizer_state"] = stage == 0 ? ckpt::kOptimizerFile : "ZeRO shards (latest)";
  layout["converted_from"] = saved.describe();
  layout.erase("partition");
  if (stage > 0) layout["partition"] = map.to_json();
  return layout;
}

}  // namespace

int run_checkpoint_convert(const ConvertRequest& request) {
  const fs::path dir(request.checkpoint_dir);
  check_request(request);
  const Manifest manifest = read_convertible_manifest(dir, request);
  const SlabLayout saved = saved_state_layout(dir.string());
  const int world = request.nproc_per_node, stage = request.stage;
  const int64_t step = manifest.global_step;
  std::cerr << "converting " << dir.string() << " (step " << step << ", " << saved.describe() << ") to "
            << workers_text(world) << " at ZeRO stage " << stage << std::endl;

  CheckpointWriter writer(request.out_dir, step);
  copy_run_files(writer, dir, manifest, saved, world);
  const PartitionMap map = stage12_map(saved, saved_weight_decay(dir), world);  // used at stages 1-2
  if (stage == 0) write_unsharded_state(writer, saved);
  else write_zero_shards(writer, dir, saved, map, stage, world, step);
  writer.set_layout(converted_layout(manifest, saved, map, stage, world));
  const std::string out = writer.commit(false);
  std::cout << "wrote " << out << " (" << workers_text(world) << " at ZeRO stage " << stage
            << "); resume it with --nproc-per-node " << world << " --set zero.stage=" << stage << " --resume " << out
            << std::endl;
  return 0;
}

}  // namespace hftrain
