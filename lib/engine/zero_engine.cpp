// ZeroEngine construction and the backward / step driver (see zero_engine.h). The stage is read here
// once: it chooses the gradient reduction, whether masters and optimizer state are sharded, and whether
// the parameters are partitioned; everything after asks those parts.
#include "engine/zero_engine.h"

#include "engine/expert_data_groups.h"
#include "util/error.h"

namespace hftrain {
namespace {

// An fp32 host tensor for offloaded state, pinned beside a CUDA device so that copies to and from it are DMA.
torch::Tensor host_buffer(int64_t numel, torch::Device beside) {
  return torch::empty({numel}, torch::TensorOptions().dtype(torch::kFloat).pinned_memory(beside.is_cuda()));
}

GradientReduction reduction_for_stage(int stage) {
  if (stage == 0) return GradientReduction::kAllReduce;
  if (stage == 1) return GradientReduction::kReduceScatterAtBoundary;
  return GradientReduction::kReduceScatterEveryMicroStep;  // stages 2-3 keep no full-size gradient
}

std::map<std::string, uint64_t> bytes_since(const CommStats& now, const CommStats& before) {
  std::map<std::string, uint64_t> d;
  for (const auto& [op, b] : now.bytes_sent) {
    auto it = before.bytes_sent.find(op);
    d[op] = b - (it == before.bytes_sent.end() ? 0 : it->second);
  }
  return d;
}

}  // namespace

ZeroEngine::ZeroEngine(std::vector<ParamGroup> groups, const std::vector<std::string>& model_order,
                       const OptimizerFactory& build_optimizer, const EngineSettings& options, Comm& comm)
    : comm_(comm), stage_(options.stage), rank_(comm.rank()), world_(comm.world_size()), options_(options),
      shards_optimizer_(options.stage >= 1), partitions_params_(options.stage == 3), mixed_(options.precision.enabled()),
      dtype_(options.precision.param_dtype), reduce_dtype_(options.precision.reduce_dtype),
      masters_(comm, map_, /*whole_groups=*/options.stage == 0), scaler_(options.precision.scaler) {
  choose_master_home();
  torch::NoGradGuard no_grad;
  UnitLayout layout;
  if (partitions_params_) {
    layout = unit_layout(groups, options.gather_units, options.persistence_threshold);
    groups = layout.groups;
  }
  const std::vector<std::vector<int>> holders = hold_experts_apart(groups);
  map_ = map_groups(groups, model_order, world_, options_.device, holders);
  choose_group_comms();
  adopt_flat_parameters(groups, layout.persistent);
  if (params_copy_masters())  // a stored master refreshes the copy the model (or the stage-3 gather) reads
    masters_.on_store([this](std::size_t g, const torch::Tensor& values) {
      if (swapped_shards_) masters_.swap()->write_params16(flat_group_key(g), values.to(dtype_));
      else if (flat_.flat[g].numel() > 0) own_flat_params(g).copy_(values);
    });
  grads_ = std::make_unique<GradientSync>(comm_, map_, flat_.params, reduction_for_stage(stage_), options_.device, dtype_, reduce_dtype_,
                                          options_.bucket_cap_mb, group_comms_);
  for (std::size_t g = 0; g < masters_.size() && host_masters_; ++g)
    host_grads_.push_back(host_buffer(masters_.tensor(g).numel(), options_.device));
  this->build_optimizer(groups, build_optimizer);
  if (partitions_params_) build_coordinator(layout.persistent, layout.unit_groups);
  if (partitions_params_) partition_frozen_parameters();
  choose_step_parts();
  stats_at_window_start_ = comm_.stats();
}

ZeroEngine::~ZeroEngine() { grads_.reset(); }  // the gradient hooks go first, as the parameters outlive us

void ZeroEngine::choose_master_home() {
  if (stage_ < 0 || stage_ > 3)
    throw ConfigError("zero.stage: the data-parallel engine implements stages 0 to 3 (got " + std::to_string(stage_) + ")");
  swapped_shards_ = options_.nvme_offload && options_.nvme_offload->parameter_shards;
  if (swapped_shards_ && !partitions_params_)
    throw ConfigError("zero.offload_param: offloading parameters needs zero.stage 3 (got stage " + std::to_string(stage_) + ")");
  host_masters_ = options_.offload_to_host;
  if (host_masters_ && (!shards_optimizer_ || options_.nvme_offload))
    throw ConfigError("zero.offload_optimizer: host offload needs zero.stage 1, 2 or 3 and excludes nvme offload (stage " +
                      std::to_string(stage_) + ")");
  const bool swapped_masters = options_.nvme_offload && shards_optimizer_ && (mixed_ || swapped_shards_);
  master_home_ = host_masters_                  ? MasterHome::kHost
                 : swapped_masters              ? MasterHome::kSwapFile
                 : mixed_ || partitions_params_ ? MasterHome::kDevice
                                                : MasterHome::kParameters;
}

std::vector<std::vector<int>> ZeroEngine::hold_experts_apart(std::vector<ParamGroup>& groups) {
  if (!options_.expert_data_group) return {};
  if (stage_ != 1 && stage_ != 2)
    throw ConfigError("distributed.expert_parallel_size: the experts are held by their members' ranks at zero.stage 1 "
                      "and 2 only (got stage " + std::to_string(stage_) + ")");
  HeldGroups held = split_expert_groups(groups, options_.member_of, options_.expert_parallel_size, world_);
  groups = std::move(held.groups);
  return held.holders;
}

void ZeroEngine::choose_group_comms() {
  for (const FlatGroupInfo& info : map_.groups) {
    if (info.holders() == world_) {
      group_comms_.push_back(&comm_);
      continue;
    }
    Comm* holders = info.held_by(rank_) ? options_.expert_data_group.get() : nullptr;
    if (holders && (holders->world_size() != info.holders() || holders->rank() != info.member(rank_)))
      throw RuntimeFailure("expert data parallelism: rank " + std::to_string(rank_) + "'s expert-data-parallel group has " +
                           std::to_string(holders->world_size()) + " ranks but its experts' flat group is held by " +
                           std::to_string(info.holders()));
    group_comms_.push_back(holders);
  }
}

void ZeroEngine::adopt_flat_parameters(std::vector<ParamGroup>& groups, const std::vector<bool>& persistent) {
  // Flat parameter buffers; the model's parameters become views of them. Rank 0's fp32 values win (DDP);
  // with mixed precision they become the masters and the 16-bit buffer holds them rounded.
  const bool sharded_init = partitions_params_ && options_.initial_values;
  if (options_.initial_values && !sharded_init)
    throw RuntimeFailure("data-parallel engine: sharded construction needs ZeRO stage 3 (got stage " + std::to_string(stage_) + ")");
  if (sharded_init) {  // each initial value in turn; only this rank's partition of it is kept
    for (auto& partition : read_initial_partitions(map_, rank_, options_.initial_values, optimizer_device()))
      masters_.add(host_masters_ ? host_buffer(partition.numel(), options_.device).copy_(partition) : partition);
    options_.initial_values = nullptr;  // the model (and pretrained files) it holds are not needed any more
    for (std::size_t g = 0; g < masters_.size() && device_shards_separate(); ++g)
      shard16_.push_back(masters_.tensor(g).to(torch::TensorOptions().device(options_.device).dtype(dtype_), false, /*copy=*/true));
    flat_ = adopt_released_parameters(groups, map_, dtype_, persistent, options_.device);
  } else {
    flat_ = adopt_parameters(groups, map_, dtype_, group_comms_,
                             [this](std::size_t g, const torch::Tensor& values32, const torch::Tensor& flat) {
                               adopt_masters(g, values32, flat);
                             },
                             options_.device);
  }
  for (std::size_t g = 0; g < flat_.flat.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    own_params_.push_back(partitions_params_ ? (g < shard16_.size() ? shard16_[g] : torch::Tensor())
                          : shards_optimizer_ ? flat_.flat[g].narrow(0, info.partition_begin(rank_), info.partition_numel(rank_))
                                              : flat_.flat[g]);
  }
}

void ZeroEngine::adopt_masters(std::size_t g, const torch::Tensor& values32, const torch::Tensor& flat) {
  const FlatGroupInfo& info = map_.groups[g];
  auto partition_of = [&](const torch::Tensor& t) { return t.narrow(0, info.partition_begin(rank_), info.partition_numel(rank_)); };
  // (fp32: values32 is the flat buffer of the parameters itself)
  if (torch::Tensor masters = masters_from(values32, flat, partition_of(values32)); masters.defined()) masters_.add(masters);
  if (device_shards_separate()) shard16_.push_back(partition_of(flat).clone());
}

torch::Tensor ZeroEngine::masters_from(const torch::Tensor& values32, const torch::Tensor& flat,
                                       const torch::Tensor& partition) const {
  switch (master_home_) {
    case MasterHome::kParameters:  // stage 0: the optimizer steps the parameters; stages 1-2: this rank's part of them
      return shards_optimizer_ ? partition : torch::Tensor();
    case MasterHome::kDevice:  // a copy: the partition outlives the full buffer (released at stage 3)
      return shards_optimizer_ ? partition.clone() : values32;
    case MasterHome::kHost:
      return host_buffer(partition.numel(), options_.device).copy_(partition);
    case MasterHome::kSwapFile:  // a view of the fp32 values until the swap file takes them and releases the buffer;
      return values32.is_same(flat) ? partition.clone() : partition;  // fp32 shards: the parameters', so a copy
  }
  return {};
}

std::vector<ParamGroup> ZeroEngine::optimizer_groups(const std::vector<ParamGroup>& model_groups) {
  std::vector<ParamGroup> out;
  for (std::size_t g = 0; g < map_.groups.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    if (!shards_optimizer_ && mixed_) {
      // The optimizer steps per-parameter fp32 views, under the parameters' names (as fp32 stage 0 does).
      std::vector<torch::Tensor> views;
      ParamGroup pg;
      pg.weight_decay = info.weight_decay;
      for (std::size_t i = 0; i < info.params.size(); ++i) {
        const auto& at = info.params[i];
        const auto shape = flat_.params[g][i].sizes();
        views.push_back(masters_.tensor(g).narrow(0, at.offset, at.numel).view(shape));
        pg.names.push_back(at.name);
        pg.params.push_back(views.back());
        // An optimizer that fuses the 16-bit side reads these and writes the parameters in its pass.
        pg.grads16.push_back(grads_->flat_grads()[g].narrow(0, at.offset, at.numel).view(shape));
        pg.params16.push_back(flat_.flat[g].narrow(0, at.offset, at.numel).view(shape));
      }
      master_views_.push_back(std::move(views));
      if (!pg.params.empty()) out.push_back(pg);
    }
    if (shards_optimizer_) {
      const torch::Tensor& grad = grads_->step_grads()[g];
      // mixed precision and host offload attach an fp32 copy at the step
      if (!params_copy_masters()) masters_.tensor(g).mutable_grad() = grad;
      if (info.numel > 0 && holds(g)) {
        ParamGroup pg;
        pg.names = {flat_group_key(g)};
        pg.params = {masters_.tensor(g)};
        pg.weight_decay = info.weight_decay;
        if (mixed_ && !host_masters_) {  // an optimizer that fuses the 16-bit side may read and write these
          pg.grads16 = {grad};
          pg.params16 = {own_flat_params(g)};
        }
        out.push_back(pg);
      }
    }
  }
  return out;
}

void ZeroEngine::build_optimizer(const std::vector<ParamGroup>& model_groups, const OptimizerFactory& build) {
  std::vector<ParamGroup> groups = optimizer_groups(model_groups);
  if (!(options_.nvme_offload && shards_optimizer_)) {
    optimizer_ = build(!shards_optimizer_ && !mixed_ ? model_groups : groups);
    return;
  }
  // The optimizer state lives in this rank's swap file. The fp32 masters are separate from the parameters
  // with mixed precision: they move to the file too; so do stage 3's shards with offload_param (fp32: the
  // masters are the shards; mixed: their 16-bit copies).
  SwapOptions swap = *options_.nvme_offload;
  swap.swap_dir = swap.swap_dir + "/hftrain-swap-rank" + std::to_string(rank_);
  swap.swap_params = master_home_ == MasterHome::kSwapFile;
  swap.swap_params16 = mixed_ && swapped_shards_;
  auto swapped = std::make_unique<SwappedOptimizer>(groups, build, swap);
  if (swap.swap_params) masters_.move_to(swapped.get());
  optimizer_ = std::move(swapped);
}

void ZeroEngine::build_coordinator(const std::vector<bool>& persistent, const std::vector<std::vector<std::size_t>>& unit_groups) {
  ShardReader read_shard;
  if (swapped_shards_)
    read_shard = [this](std::size_t g) -> torch::Tensor {
      if (map_.groups[g].numel == 0) return mixed_ ? shard16_[g] : masters_.tensor(g);  // empty: not in the file
      return mixed_ ? masters_.swap()->read_params16(flat_group_key(g)) : masters_.swap()->read_params(flat_group_key(g));
    };
  coordinator_ = std::make_unique<ParamCoordinator>(comm_, flat_.flat, device_shards_separate() ? shard16_ : masters_.tensors(), persistent,
                                                    unit_groups, options_.gather_limits, read_shard);
  grads_->on_group_done([this](std::size_t g) { coordinator_->gradients_done(g); });
}

void ZeroEngine::partition_frozen_parameters() {
  std::map<std::string, torch::Tensor> by_name(options_.frozen.begin(), options_.frozen.end());
  std::vector<NamedTensorList> units(options_.frozen_gather_units.size());
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const std::string& name : options_.frozen_gather_units[u]) {
      auto it = by_name.find(name);
      if (it == by_name.end())
        throw RuntimeFailure("ZeRO-3 engine: frozen parameter '" + name + "' of gather unit " + std::to_string(u) +
                             " is not among the model's frozen parameters");
      units[u].emplace_back(name, it->second);
    }
  frozen_ = partition_frozen(units, options_.persistence_threshold, rank_, world_);
  coordinator_->add_frozen(frozen_.full, frozen_.shard, frozen_.unit_groups);
}

void ZeroEngine::backward(const torch::Tensor& loss, bool is_last_micro_step) {
  const double scale = scaler_.scale();
  if (coordinator_) coordinator_->begin_backward();
  grads_->backward(scale == 1.0 ? loss : loss * scale, is_last_micro_step);
  if (coordinator_) coordinator_->end_backward();
}

StepResult ZeroEngine::step(double lr) {
  torch::NoGradGuard no_grad;
  StepResult r = update_parameters(lr);
  grads_->zero();
  ++steps_;
  last_step_bytes_ = bytes_since(comm_.stats(), stats_at_window_start_);
  stats_at_window_start_ = comm_.stats();
  if (steps_ == 1 && options_.report_memory) report_first_step();
  return r;
}

}  // namespace hftrain
