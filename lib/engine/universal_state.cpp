// Reading any checkpoint layout by parameter name and cutting it into another (see universal_state.h).
#include "engine/universal_state.h"

#include <algorithm>
#include <functional>
#include <filesystem>
#include <memory>
#include <set>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "engine/partition.h"
#include "engine/zero_checkpoint.h"
#include "util/error.h"

namespace hftrain {
namespace fs = std::filesystem;

namespace {

const char* const kScalerPrefix = "loss_scaler.";
const char* const kStepSlot = "step";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Stage 0: every parameter of model.safetensors is a slab of its own; its slots are in optimizer.safetensors.
SlabLayout stage0_layout(const fs::path& dir) {
  SlabLayout layout;
  layout.world_size = 0;  // one RNG state file per worker
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("rng_state", 0) == 0) ++layout.world_size;
  layout.world_size = std::max(1, layout.world_size);
  // A PEFT adapter run's checkpoint holds adapter_model.safetensors (PEFT's names) instead of model.safetensors.
  const bool adapter = !fs::exists(dir / ckpt::kModelFile) && fs::exists(dir / kAdapterWeightsFile);
  const std::string model = (dir / (adapter ? kAdapterWeightsFile : ckpt::kModelFile)).string(),
                    optim = (dir / ckpt::kOptimizerFile).string();
  if (!fs::exists(optim))
    throw RuntimeFailure("'" + dir.string() + "' holds neither ZeRO shards ('latest') nor '" + ckpt::kOptimizerFile +
                         "': it was saved without optimizer state (save_only_model?) and cannot be resumed");
  const SafetensorsHeader weights = read_safetensors_header(model);
  const SafetensorsHeader state = read_safetensors_header(optim);
  std::set<std::string> with_state;
  for (const auto& e : state.tensors) {
    const std::size_t dot = e.name.rfind('.');
    if (dot != std::string::npos) with_state.insert(e.name.substr(0, dot));
    if (e.name.rfind(kScalerPrefix, 0) == 0) layout.scaler_file = optim;
  }
  std::vector<SafetensorsHeader::Entry> in_file_order = weights.tensors;  // the model's order (written so)
  std::sort(in_file_order.begin(), in_file_order.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (const auto& e : in_file_order) {
    if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16") continue;
    const std::string name = adapter ? model_tensor_name(e.name) : e.name;  // the parameter's name in the model
    layout.shapes[name] = e.shape;
    if (!with_state.count(name)) continue;  // a buffer, a frozen parameter or one never stepped
    StateSlab slab;
    slab.master_file = model;
    slab.master_key = e.name;
    slab.state_file = optim;
    slab.state_prefix = name + ".";
    slab.master_numel = slab.state_numel = numel_of(e.shape);
    slab.shape = e.shape;
    slab.whole_parameter = true;
    slab.pieces.push_back({name, 0, slab.master_numel, 0});
    layout.slabs.push_back(std::move(slab));
    layout.trainable.push_back(name);
  }
  return layout;
}

std::vector<std::string> in_model_order(const PartitionMap& map) {
  std::vector<const FlatParamInfo*> params;
  for (const auto& g : map.groups)
    for (const auto& p : g.params) params.push_back(&p);
  std::stable_sort(params.begin(), params.end(), [](auto* a, auto* b) { return a->model_index < b->model_index; });
  std::vector<std::string> names;
  for (auto* p : params) names.push_back(p->name);
  return names;
}

// The slabs of one rank's partition of `map`: group g's real elements from partition_begin(rank) (none of a
// group the rank does not hold).
std::vector<StateSlab> partition_slabs(const PartitionMap& map, int rank) {
  std::vector<StateSlab> slabs;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    const FlatGroupInfo& info = map.groups[g];
    StateSlab slab;
    slab.master_key = "fp32_flat_group_" + std::to_string(g);
    slab.state_prefix = "optimizer_state.flat_group_" + std::to_string(g) + ".";
    slab.held = info.held_by(rank);
    slab.master_numel = info.partition_real(rank);
    slab.state_numel = info.partition_numel(rank);
    slab.stepped = slab.held && info.numel > 0;
    const int64_t begin = info.partition_begin(rank), end = begin + info.partition_numel(rank);
    for (const auto& p : info.params) {
      const int64_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel);
      if (e > b) slab.pieces.push_back({p.name, b - p.offset, e - b, b - begin});
    }
    slabs.push_back(std::move(slab));
  }
  return slabs;
}

SlabLayout sharded_layout(const fs::path& dir, const std::string& tag) {
  const fs::path tag_dir = dir / tag;
  const std::string first = (tag_dir / zero_shard_file_name(0)).string();
  if (!fs::exists(first)) throw RuntimeFailure("missing ZeRO shard '" + first + "'");
  const SafetensorsHeader header = read_safetensors_header(first);
  auto meta = [&](const std::string& key) {
    auto it = header.metadata.find(key);
    if (it == header.metadata.end()) throw RuntimeFailure("'" + first + "': shard metadata has no '" + key + "'");
    return it->second;
  };
  SlabLayout layout;
  PartitionMap map;
  try {
    layout.world_size = std::stoi(meta("world_size"));
    layout.zero_stage = std::stoi(meta("zero_stage"));
    map = PartitionMap::from_json(nlohmann::json::parse(meta("partition")), first);
  } catch (const std::logic_error& e) {  // stoi
    throw RuntimeFailure("'" + first + "': malformed shard metadata (world_size, zero_stage or partition): " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure("'" + first + "': malformed shard metadata (world_size, zero_stage or partition): " + e.what());
  }
  layout.precision = header.metadata.count("precision") ? header.metadata.at("precision") : "fp32";
  if (map.world_size != layout.world_size)
    throw RuntimeFailure("'" + first + "': its partition map is for " + std::to_string(map.world_size) +
                         " workers but the shard says " + std::to_string(layout.world_size));
  for (const auto& g : map.groups)
    for (const auto& p : g.params) layout.shapes[p.name] = p.shape;
  layout.trainable = in_model_order(map);
  for (const auto& e : header.tensors)
    if (e.name.rfind(kScalerPrefix, 0) == 0) layout.scaler_file = first;
  for (int r = 0; r < layout.world_size; ++r) {
    const std::string file = (tag_dir / zero_shard_file_name(r)).string();
    if (!fs::exists(file))
      throw RuntimeFailure("missing ZeRO shard '" + file + "' (the checkpoint was saved by " +
                           std::to_string(layout.world_size) + " workers)");
    if (r > 0) {  // every shard must belong to the same save
      const SafetensorsHeader h = read_safetensors_header(file);
      for (const char* key : {"world_size", "zero_stage", "partition"}) {
        auto it = h.metadata.find(key);
        if (it == h.metadata.end() || it->second != meta(key))
          throw RuntimeFailure("'" + file + "': its '" + key + "' differs from rank 0's shard '" + first +
                               "' (a shard of another run or save?)");
      }
      if (h.metadata.count("rank") && h.metadata.at("rank") != std::to_string(r))
        throw RuntimeFailure("'" + file + "' says it is rank " + h.metadata.at("rank") + "'s shard");
    }
    for (StateSlab& slab : partition_slabs(map, r)) {
      slab.master_file = slab.state_file = file;
      layout.slabs.push_back(std::move(slab));
    }
  }
  return layout;
}

// Open readers, one per file.
class Readers {
 public:
  const SafetensorsReader& get(const std::string& path) {
    auto it = readers_.find(path);
    if (it == readers_.end()) it = readers_.emplace(path, std::make_unique<SafetensorsReader>(path)).first;
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers_;
};

// A target piece: which slab, and where the parameter's elements sit in it.
struct Destination {
  std::size_t slab;
  const StateSlab::Piece* piece;
};

// The slot names a saved slab has (its state tensors are <state_prefix><slot>).
std::vector<std::string> slots_of(const SafetensorsReader& reader, const std::string& prefix) {
  std::vector<std::string> slots;
  for (const auto& e : reader.header().tensors)
    if (e.name.rfind(prefix, 0) == 0 && e.name.find('.', prefix.size()) == std::string::npos)
      slots.push_back(e.name.substr(prefix.size()));
  return slots;
}

void check_parameter_sets(const SlabLayout& saved, const SlabLayout& target) {
  for (const auto& slab : target.slabs)
    for (const auto& piece : slab.pieces) {
      auto it = saved.shapes.find(piece.param);
      const auto& want = target.shapes.at(piece.param);
      if (it == saved.shapes.end())
        throw ConfigError("the checkpoint (" + saved.describe() + ") has no parameter '" + piece.param + "' " +
                          shape_text(want) + " that this run trains; resume with training.ignore_optimizer_state: "
                          "true to take only what matches, or start from the weights");
      if (it->second != want)
        throw ConfigError("parameter '" + piece.param + "' is " + shape_text(it->second) + " in the checkpoint but " +
                          shape_text(want) + " in this model; its optimizer state cannot be carried over");
    }
  for (const auto& slab : saved.slabs)
    for (const auto& piece : slab.pieces)
      if (!target.shapes.count(piece.param))
        throw ConfigError("the checkpoint (" + saved.describe() + ") trains parameter '" + piece.param + "' " +
                          shape_text(saved.shapes.at(piece.param)) +
                          " that this run does not train (another model, or frozen now); resume with "
                          "training.ignore_optimizer_state: true to keep only the weights and schedule");
}

}  // namespace

std::string workers_text(int64_t n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); }

std::string SlabLayout::describe() const {
  return workers_text(world_size) + " at ZeRO stage " +
         std::to_string(zero_stage) + (precision.empty() ? "" : " (" + precision + ")");
}

SlabLayout saved_state_layout(const std::string& checkpoint_dir) {
  const std::string tag = read_zero_tag(checkpoint_dir);
  return tag.empty() ? stage0_layout(checkpoint_dir) : sharded_layout(checkpoint_dir, tag);
}

SlabLayout shard_state_layout(const PartitionMap& map, int rank, int zero_stage) {
  SlabLayout layout;
  layout.world_size = map.world_size;
  layout.zero_stage = zero_stage;
  layout.slabs = partition_slabs(map, rank);
  for (const auto& g : map.groups)
    for (const auto& p : g.params) layout.shapes[p.name] = p.shape;
  layout.trainable = in_model_order(map);
  return layout;
}

SlabLayout per_parameter_state_layout(const std::vector<std::pair<std::string, std::vector<int64_t>>>& params) {
  SlabLayout layout;
  for (const auto& [name, shape] : params) {
    StateSlab slab;
    slab.master_key = name;
    slab.state_prefix = name + ".";
    slab.master_numel = slab.state_numel = numel_of(shape);
    slab.shape = shape;
    slab.whole_parameter = true;
    slab.pieces.push_back({name, 0, slab.master_numel, 0});
    layout.shapes[name] = shape;
    layout.trainable.push_back(name);
    layout.slabs.push_back(std::move(slab));
  }
  return layout;
}

namespace {

// Cuts saved slabs into the target slabs by parameter name: each saved slab's masters and optimizer slots are
// read once, as the run of elements some target piece needs, and scattered into the target slabs.
class StateCutter {
 public:
  explicit StateCutter(const SlabLayout& target) : target_(target), masters_(target.slabs.size()), slots_(target.slabs.size()) {
    for (std::size_t s = 0; s < target.slabs.size(); ++s) {
      for (const auto& piece : target.slabs[s].pieces) destinations_[piece.param].push_back({s, &piece});
      masters_[s] = torch::zeros({target.slabs[s].master_numel}, torch::kFloat32);
    }
  }

  void take(const StateSlab& from, Readers& readers) {
    const auto [lo, hi] = needed_run(from);
    if (hi <= lo) return;
    // One tensor's run at a time: the master, then each optimizer slot.
    scatter(from, lo, readers.get(from.master_file).read_range(from.master_key, lo, hi - lo).to(torch::kFloat32),
            [&](std::size_t slab) -> torch::Tensor& { return masters_[slab]; });
    const SafetensorsReader& state_reader = readers.get(from.state_file);
    for (const std::string& slot : slots_of(state_reader, from.state_prefix)) take_slot(from, state_reader, slot, lo, hi);
  }

  CutState result() {
    fill_padding_slabs();
    CutState out;
    for (std::size_t s = 0; s < target_.slabs.size(); ++s) {
      const StateSlab& to = target_.slabs[s];
      out.masters[to.master_key] = to.whole_parameter ? masters_[s].view(to.shape) : masters_[s];
      for (auto& [slot, t] : slots_[s])
        out.state[to.state_prefix + slot] = (slot != kStepSlot && to.whole_parameter) ? t.view(to.shape) : t;
    }
    return out;
  }

 private:
  // The run [lo, hi) of this saved slab that any target piece needs (hi <= lo: none).
  std::pair<int64_t, int64_t> needed_run(const StateSlab& from) {
    int64_t lo = INT64_MAX, hi = 0;
    for (const auto& piece : from.pieces)
      for (const Destination& d : destinations_[piece.param]) {
        const int64_t b = std::max(piece.param_begin, d.piece->param_begin);
        const int64_t e = std::min(piece.param_begin + piece.count, d.piece->param_begin + d.piece->count);
        if (e > b) {
          lo = std::min(lo, piece.offset + b - piece.param_begin);
          hi = std::max(hi, piece.offset + e - piece.param_begin);
        }
      }
    return {lo, hi};
  }

  void scatter(const StateSlab& from, int64_t lo, const torch::Tensor& run,
               const std::function<torch::Tensor&(std::size_t)>& target_of) {
    for (const auto& piece : from.pieces)
      for (const Destination& d : destinations_[piece.param]) {
        const int64_t b = std::max(piece.param_begin, d.piece->param_begin);
        const int64_t e = std::min(piece.param_begin + piece.count, d.piece->param_begin + d.piece->count);
        if (e > b)
          target_of(d.slab).narrow(0, d.piece->offset + b - d.piece->param_begin, e - b)
              .copy_(run.narrow(0, piece.offset + b - piece.param_begin - lo, e - b));
      }
  }

  void take_slot(const StateSlab& from, const SafetensorsReader& reader, const std::string& slot, int64_t lo, int64_t hi) {
    const std::string key = from.state_prefix + slot;
    if (slot == kStepSlot) {  // a counter: the same for every slab the run reaches
      const torch::Tensor step = reader.read(key);
      for (const auto& piece : from.pieces)
        for (const Destination& d : destinations_[piece.param])
          if (!slots_[d.slab][slot].defined()) slots_[d.slab][slot] = step.clone();
      return;
    }
    const SafetensorsHeader::Entry* e = reader.find(key);
    if (numel_of(e->shape) != from.state_numel)
      throw RuntimeFailure("'" + from.state_file + "': optimizer state '" + key + "' is " + shape_text(e->shape) +
                           ", not one value per element (" + std::to_string(from.state_numel) +
                           "), so it cannot be re-partitioned (only element-wise optimizers can change layout)");
    const torch::Tensor run = reader.read_range(key, lo, hi - lo);
    scatter(from, lo, run, [&](std::size_t slab) -> torch::Tensor& {
      torch::Tensor& out = slots_[slab][slot];
      if (!out.defined()) out = torch::zeros({target_.slabs[slab].state_numel}, run.options());
      return out;
    });
  }

  // A partition of only padding has state all the same (zeros, the common step counter), as the engine
  // would have created it; a group the rank does not hold gets empty slots and the step counter.
  void fill_padding_slabs() {
    std::map<std::string, torch::Tensor> any_slot;
    for (const auto& m : slots_)
      for (const auto& [slot, t] : m) any_slot.emplace(slot, t);
    for (std::size_t s = 0; s < target_.slabs.size(); ++s)
      if (target_.slabs[s].stepped || !target_.slabs[s].held)
        for (const auto& [slot, t] : any_slot)
          if (!slots_[s].count(slot))
            slots_[s][slot] = slot == kStepSlot ? t.clone() : torch::zeros({target_.slabs[s].state_numel}, t.options());
  }

  const SlabLayout& target_;
  std::map<std::string, std::vector<Destination>> destinations_;
  std::vector<torch::Tensor> masters_;
  std::vector<std::map<std::string, torch::Tensor>> slots_;
};

}  // namespace

CutState cut_state(const SlabLayout& saved, const SlabLayout& target) {
  check_parameter_sets(saved, target);
  Readers readers;
  StateCutter cutter(target);
  for (const StateSlab& from : saved.slabs) cutter.take(from, readers);
  CutState out = cutter.result();
  if (!saved.scaler_file.empty()) {
    const SafetensorsReader& reader = readers.get(saved.scaler_file);
    for (const auto& e : reader.header().tensors)
      if (e.name.rfind(kScalerPrefix, 0) == 0) out.state[e.name] = reader.read(e.name);
  }
  return out;
}

}  // namespace hftrain
