// The ZeroEngine's reports (see zero_engine.h): what one rank holds (EngineMemory, the figures
// `hftrain estimate` is tested against), the first step's memory and traffic of every rank, and the
// one-line description printed at start.
#include <iostream>

#include "engine/zero_engine.h"
#include "offload/swapped_optimizer.h"
#include "util/tensor_bytes.h"

namespace hftrain {

EngineMemory ZeroEngine::memory() const {
  EngineMemory m;
  if (partitions_params_) {  // shards (fp32: the masters themselves) and the groups that stay whole
    for (std::size_t g = 0; g < flat_.flat.size(); ++g) {
      const int64_t shard = tensor_bytes(device_shards_separate() ? shard16_[g] : masters_.tensor(g));
      if (coordinator_->persistent(g)) m.param_bytes += tensor_bytes(flat_.flat[g]);
      else if (swapped_shards_ && map_.groups[g].numel > 0) m.param_offloaded_bytes += shard;
      else m.param_bytes += shard;
    }
    m.param_gathered_peak = coordinator_->live_peak_bytes();
  } else {
    for (const auto& f : flat_.flat) m.param_bytes += tensor_bytes(f);
  }
  if (partitions_params_) {  // the frozen shards, and the small frozen tensors left whole
    m.frozen_param_bytes = frozen_.shard_bytes();
    for (const auto& [name, p] : options_.frozen)
      if (p.numel() < options_.persistence_threshold) m.frozen_param_bytes += tensor_bytes(p);
  } else {
    for (const auto& [name, p] : options_.frozen) m.frozen_param_bytes += tensor_bytes(p);
  }
  // (fp32 stage 3: the masters are the shards, counted above)
  if (params_copy_masters() || !partitions_params_) (masters_.swapped() ? m.master_offloaded_bytes : m.master_bytes) += masters_.bytes();
  m.grad_bytes = grads_->resident_bytes();
  m.grad_transient_peak = grads_->transient_peak();
  m.optimizer_state_bytes = optimizer_->state_bytes_in_memory();
  m.optimizer_state_offloaded_bytes =
      optimizer_->state_bytes_offloaded() -
      (masters_.swapped() ? masters_.swap()->params_bytes_offloaded() + masters_.swap()->params16_bytes_offloaded() : 0);
  return m;
}

void ZeroEngine::report_first_step() {
  const EngineMemory m = memory();
  std::vector<int64_t> mine = {m.param_bytes, m.master_bytes, m.grad_bytes, m.grad_transient_peak, m.optimizer_state_bytes,
                               m.param_gathered_peak, m.optimizer_state_offloaded_bytes, m.master_offloaded_bytes,
                               m.param_offloaded_bytes, m.frozen_param_bytes};
  for (const char* op : {"all_reduce", "reduce_scatter", "all_gather"}) {
    auto it = last_step_bytes_.find(op);
    mine.push_back(it == last_step_bytes_.end() ? 0 : static_cast<int64_t>(it->second));
  }
  auto all = comm_.all_gather_ints(mine, "memory report");
  if (rank_ != 0) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < world_; ++r) {
    const auto& v = all[static_cast<std::size_t>(r)];
    ranks.push_back({{"rank", r},
                     {"param_bytes", v[0]},
                     {"master_bytes", v[1]},
                     {"grad_bytes", v[2]},
                     {"grad_transient_peak_bytes", v[3]},
                     {"optimizer_state_bytes", v[4]},
                     {"param_gathered_peak_bytes", v[5]},
                     {"optimizer_state_offloaded_bytes", v[6]},
                     {"master_offloaded_bytes", v[7]},
                     {"param_offloaded_bytes", v[8]},
                     {"frozen_param_bytes", v[9]},
                     {"sent_bytes_first_step", {{"all_reduce", v[10]}, {"reduce_scatter", v[11]}, {"all_gather", v[12]}}}});
  }
  nlohmann::json report = {{"zero_stage", stage_}, {"world_size", world_}, {"numel", map_.total_numel()},
                           {"padded_numel", map_.total_padded()}, {"ranks", ranks}};
  std::cerr << "engine memory: " << report.dump() << std::endl;
}

std::string ZeroEngine::describe() const {
  std::string s = "zero stage " + std::to_string(stage_) + ", world size " + std::to_string(world_) + " (" +
                  comm_.backend() + "), " + std::to_string(map_.total_numel()) + " trainable elements in " +
                  std::to_string(map_.groups.size()) + " flat groups (padded to " + std::to_string(map_.total_padded()) +
                  "), " + std::to_string(grads_->bucket_count()) + " gradient buckets";
  if (shards_optimizer_) s += ", partition of " + std::to_string(map_.partition_numel(rank_)) + " elements per rank";
  if (options_.expert_data_group) {
    int64_t held = 0, experts = 0;
    for (std::size_t g = 0; g < map_.groups.size(); ++g)
      if (map_.groups[g].holders() < world_) {
        experts += map_.groups[g].numel;
        held += holds(g) ? map_.groups[g].numel : 0;
      }
    s += "; routed experts held by their members' " + std::to_string(options_.expert_data_group->world_size()) +
         " expert-data-parallel rank(s): " + std::to_string(held) + " of " + std::to_string(experts) + " expert elements here";
  }
  if (const auto* swapped = dynamic_cast<const SwappedOptimizer*>(optimizer_.get()))
    s += std::string(swapped_shards_ ? "; parameter shards, " : "; ") +
         (masters_.swapped() && mixed_ ? "fp32 master weights and optimizer state" : "optimizer state") +
         " offloaded to nvme: " + swapped->kernel_description();
  if (host_masters_)
    s += "; fp32 master weights, optimizer state and gradients of the partition offloaded to host memory (the update "
         "runs on the CPU)";
  if (partitions_params_)
    s += ", parameters gathered per module (" + std::to_string(coordinator_->unit_count()) +
         " gather units; flat groups kept whole: " + std::to_string(coordinator_->persistent_count()) + ")";
  if (mixed_) {
    s += "; " + precision_name(dtype_) + " parameters and gradients, fp32 master weights" +
         (shards_optimizer_ ? " of the partition" : "") + ", gradients reduced in " + precision_name(reduce_dtype_);
    s += scaler_.dynamic() ? ", dynamic loss scale from " + std::to_string(static_cast<int64_t>(scaler_.scale()))
                           : (scaler_.scale() != 1.0 ? ", static loss scale " + std::to_string(scaler_.scale()) : "");
  }
  return s;
}

}  // namespace hftrain
