// `hftrain checkpoint inspect` (see checkpoint_inspect.h). Reads only headers and small JSON files to
// describe the layout; the manifest check reads every byte once.
#include "commands/checkpoint_inspect.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "engine/zero_checkpoint.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

std::string human_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// The layout line: ZeRO shards (stage, world size, groups, elements) or a single optimizer file.
std::string describe_layout(const fs::path& dir, const Manifest& manifest) {
  if (const std::string tag = read_zero_tag(dir.string()); !tag.empty()) {
    const fs::path shard = dir / tag / zero_shard_file_name(0);
    if (!fs::exists(shard)) return "ZeRO shards under " + tag + "/, but " + shard.filename().string() + " is missing";
    const SafetensorsHeader header = read_safetensors_header(shard.string());
    auto meta = [&](const std::string& key) {
      auto it = header.metadata.find(key);
      return it == header.metadata.end() ? std::string("?") : it->second;
    };
    std::string text = "ZeRO stage " + meta("zero_stage") + ", " + meta("world_size") + " workers (" + tag + "/)";
    if (auto it = header.metadata.find("partition"); it != header.metadata.end()) {
      const PartitionMap map = PartitionMap::from_json(nlohmann::json::parse(it->second), shard.string());
      int64_t least = map.partition_numel(0), most = least;  // groups held by some ranks only make them differ
      for (int r = 1; r < map.world_size; ++r) {
        least = std::min(least, map.partition_numel(r));
        most = std::max(most, map.partition_numel(r));
      }
      std::ostringstream o;
      o << "; " << map.groups.size() << " flat groups, " << map.total_numel() << " trainable elements (padded to "
        << map.total_padded() << "), " << (least == most ? "" : std::to_string(least) + " to ") << most << " per worker";
      text += o.str();
    }
    return text;
  }
  int rng_files = 0;
  for (const auto& f : manifest.files)
    if (f.name.rfind("rng_state_", 0) == 0) ++rng_files;
  if (manifest.find("optimizer.safetensors"))
    return std::string("no ZeRO shards: the whole optimizer state in optimizer.safetensors (stage 0), ") +
           (rng_files > 0 ? std::to_string(rng_files) + " workers" : "1 worker");
  return manifest.save_only_model ? "model weights only (save_only_model)" : "no optimizer state";
}

// The precision the run used, from the checkpoint's run_spec.yaml.
std::string describe_precision(const fs::path& dir) {
  const fs::path spec = dir / "run_spec.yaml";
  if (!fs::exists(spec)) return "unknown (no run_spec.yaml)";
  try {
    const YAML::Node root = YAML::LoadFile(spec.string());
    const YAML::Node p = root["precision"];
    if (p && p["bf16"] && p["bf16"].as<bool>()) return "bf16 parameters and gradients, fp32 master weights";
    if (p && p["fp16"] && p["fp16"].as<bool>()) return "fp16 parameters and gradients, fp32 master weights";
    return "fp32";
  } catch (const YAML::Exception& e) {
    return std::string("unknown (run_spec.yaml: ") + e.what() + ")";
  }
}

}  // namespace

int run_checkpoint_inspect(const std::string& checkpoint_dir) {
  const fs::path dir(checkpoint_dir);
  if (!fs::is_directory(dir)) throw UsageError("checkpoint inspect: '" + checkpoint_dir + "' is not a directory");
  if (!fs::exists(dir / "manifest.json"))
    throw RuntimeFailure("checkpoint inspect: '" + checkpoint_dir +
                         "' has no manifest.json: not a complete hftrain checkpoint (an interrupted save leaves "
                         "a .checkpoint-N.partial directory; resume from the previous checkpoint)");
  const Manifest manifest = read_manifest(dir.string());
  std::ostringstream o;
  o << "checkpoint: " << dir.string() << "\n";
  o << "step: " << manifest.global_step;
  if (fs::exists(dir / "trainer_state.json")) {
    const nlohmann::json state = nlohmann::json::parse(read_text_file((dir / "trainer_state.json").string()));
    if (state.contains("epoch") && state["epoch"].is_number()) o << " (epoch " << state["epoch"].get<double>() << ")";
    if (state.contains("max_steps")) o << " of " << state["max_steps"];
  }
  o << "; " << (manifest.save_only_model ? "model only: cannot be resumed from (start a new run with model.from_pretrained)"
                                         : "resumable")
    << "\n";
  o << "layout: " << describe_layout(dir, manifest) << "\n";
  if (manifest.layout.is_object()) {  // as the manifest records it (the partition map summarised above)
    nlohmann::json recorded = manifest.layout;
    recorded.erase("partition");
    o << "recorded layout: " << recorded.dump() << "\n";
  }
  o << "precision: " << describe_precision(dir) << "\n";
  uint64_t total = 0;
  for (const auto& f : manifest.files) total += f.size;
  o << "files (" << manifest.files.size() << ", " << human_size(total) << "):\n";
  for (const auto& f : manifest.files) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-64s %12s\n", f.name.c_str(), human_size(f.size).c_str());
    o << line;
  }
  const std::string problem = verify_checkpoint(dir.string());
  if (problem.empty())
    o << "manifest: complete: " << manifest.files.size() << " files match their recorded size and xxh64\n";
  else
    o << "manifest: NOT complete: " << problem << "\n";
  std::cout << o.str() << std::flush;
  return problem.empty() ? 0 : 1;
}

}  // namespace hftrain
