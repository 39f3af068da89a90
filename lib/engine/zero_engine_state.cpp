// The ZeroEngine's state as checkpoints and saved models see it (see zero_engine.h): the fp32 master
// weights gathered or streamed by name, this rank's shard (masters, optimizer state, loss scaler) with its
// partition map, and loading them back.
#include <iostream>

#include "engine/zero_checkpoint.h"
#include "engine/zero_engine.h"
#include "offload/swapped_optimizer.h"
#include "util/error.h"

namespace hftrain {

std::map<std::string, torch::Tensor> ZeroEngine::master_weights() {
  std::map<std::string, torch::Tensor> out;
  if (!masters_separate()) return out;
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    torch::Tensor full = masters_.gathered(g);
    for (const auto& p : info.params) out[p.name] = full.narrow(0, p.offset, p.numel).view(p.shape);
  }
  return out;
}

StreamedWeights ZeroEngine::stream_master_weights() {
  StreamedWeights out;
  // Masters resident in memory and every trained parameter whole on every rank: master_weights() serves.
  if (!partitions_params_ && !masters_.swapped() && !options_.expert_data_group) return out;
  for (const auto& info : map_.groups)
    for (const auto& p : info.params) out.names.push_back(p.name);
  out.produce = [this](const TensorSink& sink) {
    torch::NoGradGuard no_grad;
    for (std::size_t g = 0; g < masters_.size(); ++g) {
      const FlatGroupInfo& info = map_.groups[g];
      if (info.params.empty()) continue;
      if (masters_.swapped() && world_ == 1) {  // all on this rank, in the swap file: read each tensor alone
        for (const auto& p : info.params) sink(p.name, masters_.swap()->read_params(flat_group_key(g), p.offset, p.numel).view(p.shape));
        continue;
      }
      const torch::Tensor full = masters_.gathered(g);
      for (const auto& p : info.params) sink(p.name, full.narrow(0, p.offset, p.numel).view(p.shape));
    }
  };
  return out;
}

void ZeroEngine::load_master_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  if (!masters_separate()) return;
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    auto full = torch::zeros({info.padded_numel}, torch::kFloat32);
    for (const auto& p : info.params) {
      auto it = weights.find(p.name);
      if (it == weights.end() || it->second.numel() != p.numel)
        throw RuntimeFailure("'" + source + "': tensor '" + p.name + "' is missing or has the wrong size");
      full.narrow(0, p.offset, p.numel).copy_(it->second.reshape({-1}));
    }
    masters_.store(g, shards_optimizer_ ? full.narrow(0, info.partition_begin(rank_), info.partition_numel(rank_)) : full);
  }
  share_updated_parameters();
}

EngineShard ZeroEngine::export_shard() const {
  EngineShard shard;
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    // Padding is stripped, as DeepSpeed's single_partition_of_fp32_groups does.
    const int64_t real = map_.groups[g].partition_real(rank_);
    shard.tensors.emplace_back("fp32_flat_group_" + std::to_string(g), masters_.values(g).narrow(0, 0, real).clone());
  }
  for (const auto& [k, v] : optimizer_->state()) shard.tensors.emplace_back("optimizer_state." + k, v);
  if (scaler_.dynamic())
    for (const auto& [k, v] : scaler_.state()) shard.tensors.emplace_back(k, v);
  shard.metadata = zero_shard_metadata(stage_, precision_name(dtype_), rank_, map_);
  return shard;
}

void ZeroEngine::import_shard(const std::map<std::string, torch::Tensor>& tensors,
                                      const std::map<std::string, std::string>& metadata, const std::string& source) {
  auto meta = [&](const std::string& key) {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw RuntimeFailure("'" + source + "': shard metadata has no '" + key + "'");
    return it->second;
  };
  if (std::stoi(meta("rank")) != rank_)
    throw RuntimeFailure("'" + source + "': shard of rank " + meta("rank") + " offered to rank " + std::to_string(rank_));
  const auto saved_precision = metadata.count("precision") ? metadata.at("precision") : std::string("fp32");
  if (saved_precision != precision_name(dtype_) && rank_ == 0)
    std::cerr << "resuming a checkpoint trained in " << saved_precision << " as " << precision_name(dtype_)
              << ": training continues from its fp32 master weights and optimizer state" << std::endl;
  PartitionMap saved = PartitionMap::from_json(nlohmann::json::parse(meta("partition")), source);
  if (saved.to_json() != map_.to_json())  // load_zero_checkpoint cuts other layouts into this one first
    throw RuntimeFailure("'" + source + "': the shard's partition map differs from this engine's");
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> optim;
  for (const auto& [k, v] : tensors)
    if (k.rfind("optimizer_state.", 0) == 0) optim[k.substr(16)] = v;
  for (std::size_t g = 0; g < map_.groups.size(); ++g)  // a group held elsewhere has no optimizer state here
    if (!holds(g)) {
      const std::string prefix = flat_group_key(g) + ".";
      for (auto it = optim.lower_bound(prefix); it != optim.end() && it->first.rfind(prefix, 0) == 0;) it = optim.erase(it);
    }
  for (std::size_t g = 0; g < masters_.size(); ++g) {
    const std::string key = "fp32_flat_group_" + std::to_string(g);
    auto it = tensors.find(key);
    const int64_t real = map_.groups[g].partition_real(rank_);
    if (it == tensors.end() || it->second.numel() != real || it->second.scalar_type() != torch::kFloat32)
      throw RuntimeFailure("'" + source + "': tensor '" + key + "' is missing or has the wrong size");
    masters_.store(g, it->second);
  }
  optimizer_->load_state(state_on_device(optim, optimizer_device()));
  load_scaler_state(tensors, source);
  share_updated_parameters();  // the partitions are authoritative: rebuild the parameters from them
}

std::map<std::string, torch::Tensor> ZeroEngine::optimizer_state() const {
  auto state = optimizer_->state();
  if (scaler_.dynamic())
    for (const auto& [k, v] : scaler_.state()) state[k] = v;
  return state;
}

void ZeroEngine::load_optimizer_state(const std::map<std::string, torch::Tensor>& state) {
  std::map<std::string, torch::Tensor> optim;
  for (const auto& [k, v] : state)
    if (k.rfind("loss_scaler.", 0) != 0) optim[k] = v;
  optimizer_->load_state(state_on_device(optim, optimizer_device()));
  load_scaler_state(state, "optimizer state");
}

void ZeroEngine::load_scaler_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
  if (!scaler_.load_state(state, source))
    std::cerr << "warning: '" << source << "' holds no loss-scaler state (saved without fp16 loss scaling); the "
              << "dynamic loss scale starts again at " << scaler_.scale() << std::endl;
}

}  // namespace hftrain
