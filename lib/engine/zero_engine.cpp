// Data-parallel / ZeRO stage 0-2 engine (see data_parallel.h).
#include "engine/zero_engine.h"
#include "engine/zero_checkpoint.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <set>
#include <unordered_set>

#include "util/fault_injection.h"
#include "util/tensor_storage.h"
#include "util/error.h"

namespace hftrain {
namespace {

std::string group_key(std::size_t g) { return "flat_group_" + std::to_string(g); }

int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

std::map<std::string, uint64_t> bytes_since(const CommStats& now, const CommStats& before) {
  std::map<std::string, uint64_t> d;
  for (const auto& [op, b] : now.bytes_sent) {
    auto it = before.bytes_sent.find(op);
    d[op] = b - (it == before.bytes_sent.end() ? 0 : it->second);
  }
  return d;
}

// Stage 3 layout: the optimizer groups split into flat groups per gather unit, so that a unit gathers
// only its own parameters. Each unit gets a flat group per weight-decay group for the parameters it
// uses first; parameters used by several units (tied weights) get their own flat groups; parameters under
// the persistence threshold share flat groups that stay whole.
struct Stage3Layout {
  std::vector<ParamGroup> groups;
  std::vector<bool> persistent;
  std::vector<std::vector<std::size_t>> unit_groups;  // per unit, the non-persistent flat groups it uses
};

Stage3Layout stage3_layout(const std::vector<ParamGroup>& groups, const std::vector<std::vector<std::string>>& units,
                           int64_t persistence_threshold) {
  struct Where {
    std::size_t group, index;
  };
  std::map<std::string, Where> where;
  for (std::size_t w = 0; w < groups.size(); ++w)
    for (std::size_t i = 0; i < groups[w].names.size(); ++i) where[groups[w].names[i]] = {w, i};
  std::map<std::string, std::vector<std::size_t>> used_by;
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) used_by[name].push_back(u);

  Stage3Layout layout;
  std::map<std::tuple<std::size_t, std::size_t, int>, std::size_t> flat_of;  // (unit or -1, wd group, kind) -> flat group
  std::map<std::string, std::size_t> group_of_param;
  auto place = [&](std::size_t key_unit, std::size_t w, int kind, const std::string& name) {
    auto key = std::make_tuple(key_unit, w, kind);
    auto it = flat_of.find(key);
    if (it == flat_of.end()) {
      it = flat_of.emplace(key, layout.groups.size()).first;
      ParamGroup g;
      g.weight_decay = groups[w].weight_decay;
      layout.groups.push_back(g);
      layout.persistent.push_back(kind == 2);
    }
    const Where at = where.at(name);
    layout.groups[it->second].names.push_back(name);
    layout.groups[it->second].params.push_back(groups[at.group].params[at.index]);
    group_of_param[name] = it->second;
  };
  const std::size_t no_unit = units.size();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) {
      auto found = where.find(name);
      if (found == where.end() || group_of_param.count(name) || used_by[name].front() != u) continue;
      const torch::Tensor& p = groups[found->second.group].params[found->second.index];
      const bool persistent = p.numel() < persistence_threshold;
      place(persistent ? no_unit : u, found->second.group, persistent ? 2 : used_by[name].size() > 1 ? 1 : 0, name);
    }
  for (const auto& [name, at] : where)
    if (!group_of_param.count(name))
      throw RuntimeFailure("ZeRO-3 engine: parameter '" + name + "' is used by none of the model's gather units");
  layout.unit_groups.assign(units.size(), {});
  for (std::size_t u = 0; u < units.size(); ++u)
    for (const auto& name : units[u]) {
      auto it = group_of_param.find(name);
      if (it == group_of_param.end() || layout.persistent[it->second]) continue;
      auto& list = layout.unit_groups[u];
      if (std::find(list.begin(), list.end(), it->second) == list.end()) list.push_back(it->second);
    }
  return layout;
}

}  // namespace

ZeroEngine::ZeroEngine(std::vector<ParamGroup> groups, const std::vector<std::string>& model_order,
                                       const OptimizerFactory& build_optimizer, const DataParallelOptions& options,
                                       Comm& comm)
    : comm_(comm), stage_(options.stage), rank_(comm.rank()), world_(comm.world_size()), options_(options),
      dtype_(options.precision.param_dtype), reduce_dtype_(options.precision.reduce_dtype),
      mixed_(options.precision.enabled()), scaler_(options.precision.scaler) {
  if (stage_ < 0 || stage_ > 3)
    throw ConfigError("zero.stage: the data-parallel engine implements stages 0 to 3 (got " + std::to_string(stage_) + ")");
  swapped_shards_ = options_.nvme_offload && options_.nvme_offload->parameter_shards;
  if (swapped_shards_ && stage_ != 3)
    throw ConfigError("zero.offload_param: offloading parameters needs zero.stage 3 (got stage " + std::to_string(stage_) + ")");
  torch::NoGradGuard no_grad;
  Stage3Layout layout;
  if (stage_ == 3) {
    layout = stage3_layout(groups, options.gather_units, options.persistence_threshold);
    groups = layout.groups;
  }
  std::map<std::string, int64_t> index_of;
  for (std::size_t i = 0; i < model_order.size(); ++i) index_of[model_order[i]] = static_cast<int64_t>(i);
  std::unordered_set<const void*> seen;
  std::vector<PartitionMap::GroupInput> inputs;
  for (const auto& g : groups) {
    PartitionMap::GroupInput in;
    in.weight_decay = g.weight_decay;
    for (std::size_t i = 0; i < g.params.size(); ++i) {
      const auto& p = g.params[i];
      if (p.scalar_type() != torch::kFloat32 || !p.device().is_cpu())
        throw RuntimeFailure("data-parallel engine: parameter '" + g.names[i] + "' is not an fp32 CPU tensor");
      if (!seen.insert(p.unsafeGetTensorImpl()).second)
        throw RuntimeFailure("data-parallel engine: parameter '" + g.names[i] + "' appears twice in the parameter groups");
      in.names.push_back(g.names[i]);
      in.shapes.push_back(p.sizes().vec());
      auto it = index_of.find(g.names[i]);
      in.model_index.push_back(it == index_of.end() ? static_cast<int64_t>(index_of.size() + i) : it->second);
    }
    inputs.push_back(std::move(in));
  }
  map_ = PartitionMap::build(inputs, world_);

  // Flat parameter buffers; the model's parameters become views of them. Rank 0's fp32 values win (DDP);
  // with mixed precision they become the masters and the 16-bit buffer holds them rounded.
  const bool sharded_init = stage_ == 3 && options_.initial_values;
  if (options_.initial_values && !sharded_init)
    throw RuntimeFailure("data-parallel engine: sharded construction needs ZeRO stage 3 (got stage " + std::to_string(stage_) + ")");
  if (sharded_init) {  // each initial value in turn; only this rank's partition of it is kept
    for (const auto& info : map_.groups) master_.push_back(torch::zeros({info.partition_size}, torch::kFloat32));
    std::map<std::string, std::pair<std::size_t, std::size_t>> where;  // name -> (group, index)
    for (std::size_t g = 0; g < map_.groups.size(); ++g)
      for (std::size_t i = 0; i < map_.groups[g].params.size(); ++i) where[map_.groups[g].params[i].name] = {g, i};
    std::set<std::string> received;
    options_.initial_values([&](const std::string& name, const ValueReader& read) {
      auto it = where.find(name);
      if (it == where.end()) return true;  // not trained here: it stays whole in the model
      received.insert(name);
      const FlatGroupInfo& info = map_.groups[it->second.first];
      const auto& at = info.params[it->second.second];
      const int64_t begin = info.partition_begin(rank_), end = begin + info.partition_size;
      const int64_t lo = std::max(begin, at.offset), hi = std::min(end, at.offset + at.numel);
      if (lo < hi) master_[it->second.first].narrow(0, lo - begin, hi - lo).copy_(read(lo - at.offset, hi - lo));
      return false;
    });
    options_.initial_values = nullptr;  // the model (and pretrained files) it holds are not needed any more
    for (const auto& [name, at] : where)
      if (!received.count(name))
        throw RuntimeFailure("ZeRO-3 sharded construction: no initial value arrived for parameter '" + name + "'");
    for (std::size_t g = 0; g < master_.size() && mixed_; ++g) shard16_.push_back(master_[g].to(dtype_));
  }
  for (std::size_t g = 0; g < groups.size() && sharded_init; ++g) {
    // The full buffer exists just long enough for the parameters (released since construction) to become
    // views of it; the persistent groups keep it (they are gathered whole from the shards).
    const FlatGroupInfo& info = map_.groups[g];
    auto flat = torch::empty({info.padded_numel}, dtype_);
    std::vector<torch::Tensor> ps;
    for (std::size_t i = 0; i < info.params.size(); ++i) {
      auto& p = groups[g].params[i];
      p.set_data(flat.narrow(0, info.params[i].offset, info.params[i].numel).view(p.sizes()));
      ps.push_back(p);
    }
    if (!layout.persistent[g]) release_storage(flat);
    flat_params_.push_back(flat);
    params_.push_back(std::move(ps));
  }
  for (std::size_t g = 0; g < groups.size() && !sharded_init; ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    auto full32 = torch::zeros({info.padded_numel}, torch::kFloat32);
    for (std::size_t i = 0; i < info.params.size(); ++i) {
      const torch::Tensor& p = groups[g].params[i];
      full32.narrow(0, info.params[i].offset, info.params[i].numel).copy_(p.detach().reshape({-1}));
      // The values are in the flat buffer now: free the parameter's own memory at once rather than when it
      // becomes a view below, so that construction never holds the model twice over (unless shared).
      if (p.storage().use_count() == 1) release_storage(p);
    }
    if (world_ > 1 && info.padded_numel > 0) comm_.broadcast(full32, 0, "initial parameters of group " + std::to_string(g));
    auto flat = mixed_ ? full32.to(dtype_) : full32;
    std::vector<torch::Tensor> ps;
    for (std::size_t i = 0; i < info.params.size(); ++i) {
      auto& p = groups[g].params[i];
      p.set_data(flat.narrow(0, info.params[i].offset, info.params[i].numel).view(p.sizes()));
      ps.push_back(p);
    }
    flat_params_.push_back(flat);
    params_.push_back(std::move(ps));
    // Masters bound for the swap file stay a view: it releases the whole fp32 buffer once they are written.
    const bool masters_to_swap = options_.nvme_offload && stage_ >= 1;
    if (mixed_)
      master_.push_back(stage_ == 0 ? full32
                                    : masters_to_swap ? full32.narrow(0, info.partition_begin(rank_), info.partition_size)
                                                      : full32.narrow(0, info.partition_begin(rank_), info.partition_size).clone());
    else if (stage_ == 3)  // the partition outlives the (released) full buffer
      master_.push_back(flat.narrow(0, info.partition_begin(rank_), info.partition_size).clone());
    else if (stage_ >= 1)
      master_.push_back(flat.narrow(0, info.partition_begin(rank_), info.partition_size));
    if (stage_ == 3 && mixed_) shard16_.push_back(flat.narrow(0, info.partition_begin(rank_), info.partition_size).clone());
  }

  std::vector<ParamGroup> optimizer_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    if (stage_ <= 1) {
      auto grads = torch::zeros({info.padded_numel}, dtype_);
      for (std::size_t i = 0; i < info.params.size(); ++i)
        params_[g][i].mutable_grad() = grads.narrow(0, info.params[i].offset, info.params[i].numel).view(params_[g][i].sizes());
      flat_grads_.push_back(grads);
    }
    if (stage_ == 0 && mixed_) {
      // The optimizer steps per-parameter fp32 views, under the parameters' names (as fp32 stage 0 does).
      std::vector<torch::Tensor> views;
      ParamGroup pg;
      pg.weight_decay = info.weight_decay;
      for (std::size_t i = 0; i < info.params.size(); ++i) {
        const auto& at = info.params[i];
        views.push_back(master_[g].narrow(0, at.offset, at.numel).view(params_[g][i].sizes()));
        pg.names.push_back(at.name);
        pg.params.push_back(views.back());
        // An optimizer that fuses the 16-bit side reads these and writes the parameters in its pass.
        pg.grads16.push_back(flat_grads_[g].narrow(0, at.offset, at.numel).view(params_[g][i].sizes()));
        pg.params16.push_back(flat_params_[g].narrow(0, at.offset, at.numel).view(params_[g][i].sizes()));
      }
      master_views_.push_back(std::move(views));
      if (!pg.params.empty()) optimizer_groups.push_back(pg);
    }
    if (stage_ >= 1) {
      auto grad = stage_ == 1 ? flat_grads_[g].narrow(0, info.partition_begin(rank_), info.partition_size)
                              : torch::zeros({info.partition_size}, dtype_);
      if (!mixed_) master_[g].mutable_grad() = grad;  // mixed: an fp32 copy is attached at the step
      partition_grads_.push_back(grad);
      if (info.numel > 0) {
        ParamGroup pg;
        pg.names = {group_key(g)};
        pg.params = {master_[g]};
        pg.weight_decay = info.weight_decay;
        if (mixed_) {
          pg.grads16 = {grad};
          pg.params16 = {own_flat_params(g)};
        }
        optimizer_groups.push_back(pg);
      }
    }
  }
  if (options_.nvme_offload && stage_ >= 1) {  // the optimizer state lives in this rank's swap file
    SwapOptions swap = *options_.nvme_offload;
    swap.swap_dir = swap.swap_dir + "/hftrain-swap-rank" + std::to_string(rank_);
    // The fp32 masters are separate from the parameters with mixed precision: they move to the file too; so
    // do stage 3's shards with offload_param (fp32: the masters themselves; mixed: their 16-bit copies).
    swap.swap_params = mixed_ || swapped_shards_;
    swap.swap_params16 = mixed_ && swapped_shards_;
    auto swapped = std::make_unique<SwappedOptimizer>(optimizer_groups, build_optimizer, swap);
    if (swap.swap_params) swapped_masters_ = swapped.get();
    optimizer_ = std::move(swapped);
  } else {
    optimizer_ = build_optimizer(stage_ == 0 && !mixed_ ? groups : optimizer_groups);
  }
  build_buckets(static_cast<int64_t>(options_.bucket_cap_mb * 1024 * 1024));
  install_hooks();
  if (stage_ == 3) {
    for (const auto& info : map_.groups) group_pending_.push_back(static_cast<int>(info.params.size()));
    ShardReader read_shard;
    if (swapped_shards_)
      read_shard = [this](std::size_t g) -> torch::Tensor {
        if (map_.groups[g].numel == 0) return mixed_ ? shard16_[g] : master_[g];  // empty: not in the file
        return mixed_ ? swapped_masters_->read_params16(group_key(g)) : swapped_masters_->read_params(group_key(g));
      };
    coordinator_ = std::make_unique<ParamCoordinator>(comm_, flat_params_, mixed_ ? shard16_ : master_, layout.persistent,
                                                      layout.unit_groups, options_.gather_limits, read_shard);
  }
  stats_at_window_start_ = comm_.stats();
}

ZeroEngine::~ZeroEngine() {
  for (std::size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  for (auto& group : params_)
    for (auto& p : group) p.mutable_grad() = torch::Tensor();
}

void ZeroEngine::build_buckets(int64_t cap_bytes) {
  const int64_t cap = std::max<int64_t>(cap_bytes / dtype_bytes(dtype_), 1);
  bucket_of_.assign(map_.groups.size(), {});
  std::vector<Bucket> all;
  std::vector<int64_t> ready_key;  // smallest model index in the bucket: the last of its members backward reaches
  for (std::size_t g = 0; g < map_.groups.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    bucket_of_[g].assign(info.params.size(), 0);
    if (info.params.empty()) continue;
    int64_t end = info.padded_numel;
    Bucket cur;
    for (int i = static_cast<int>(info.params.size()) - 1; i >= 0; --i) {
      cur.members.push_back(i);
      const int64_t begin = info.params[static_cast<std::size_t>(i)].offset;
      if (end - begin >= cap || i == 0) {
        cur.group = static_cast<int>(g);
        cur.begin = i == 0 ? 0 : begin;
        cur.end = end;
        int64_t key = INT64_MAX;
        for (int m : cur.members) key = std::min(key, info.params[static_cast<std::size_t>(m)].model_index);
        all.push_back(std::move(cur));
        ready_key.push_back(key);
        cur = Bucket();
        end = begin;
      }
    }
  }
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ready_key[a] > ready_key[b]; });
  for (std::size_t k = 0; k < order.size(); ++k) {
    Bucket& b = all[order[k]];
    for (int m : b.members) bucket_of_[static_cast<std::size_t>(b.group)][static_cast<std::size_t>(m)] = k;
    buckets_.push_back(std::move(b));
  }
}

void ZeroEngine::install_hooks() {
  for (std::size_t g = 0; g < params_.size(); ++g)
    for (std::size_t i = 0; i < params_[g].size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params_[g][i]);
      if (!acc) throw RuntimeFailure("data-parallel engine: parameter '" + map_.groups[g].params[i].name + "' has no gradient accumulator");
      const int gi = static_cast<int>(g), ii = static_cast<int>(i);
      hook_keys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, gi, ii](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            on_gradient(gi, ii);
            return outputs;
          })));
      accumulators_.push_back(std::move(acc));
    }
}

std::string ZeroEngine::bucket_name(std::size_t k) const {
  return "gradient bucket " + std::to_string(k + 1) + "/" + std::to_string(buckets_.size()) + " (group " +
         std::to_string(buckets_[k].group) + ", elements " + std::to_string(buckets_[k].begin) + "-" +
         std::to_string(buckets_[k].end) + ")";
}

void ZeroEngine::backward(const torch::Tensor& loss, bool is_last_micro_step) {
  // Stage 2 reduces every micro-step (its gradients live only in the partition); stages 0-1 only at
  // the accumulation boundary and accumulate locally before it.
  sync_ = stage_ >= 2 || is_last_micro_step;
  for (auto& b : buckets_) b.pending = static_cast<int>(b.members.size());
  for (std::size_t g = 0; g < group_pending_.size(); ++g)
    group_pending_[g] = static_cast<int>(map_.groups[g].params.size());
  next_launch_ = 0;
  const double scale = scaler_.scale();
  if (coordinator_) coordinator_->begin_backward();
  (scale == 1.0 ? loss : loss * scale).backward();
  if (sync_) finish_pass();
  if (coordinator_) coordinator_->end_backward();
}

void ZeroEngine::on_gradient(int group, int index) {
  if (!sync_) return;
  const std::size_t k = bucket_of_[static_cast<std::size_t>(group)][static_cast<std::size_t>(index)];
  Bucket& b = buckets_[k];
  if (stage_ >= 2) {
    torch::NoGradGuard no_grad;
    if (!b.staging.defined()) {
      b.staging = torch::zeros({b.end - b.begin}, dtype_);
      transient_bytes_ += tensor_bytes(b.staging);
    }
    auto& p = params_[static_cast<std::size_t>(group)][static_cast<std::size_t>(index)];
    auto& grad = p.mutable_grad();
    if (grad.defined()) {
      const auto& info = map_.groups[static_cast<std::size_t>(group)].params[static_cast<std::size_t>(index)];
      b.staging.narrow(0, info.offset - b.begin, info.numel).copy_(grad.reshape({-1}));
      grad = torch::Tensor();  // stage 2 keeps no full-size gradient
    }
  }
  if (--b.pending == 0) launch_ready();
  if (coordinator_ && --group_pending_[static_cast<std::size_t>(group)] == 0)
    coordinator_->gradients_done(static_cast<std::size_t>(group));
}

void ZeroEngine::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(next_launch_++);
}

void ZeroEngine::launch(std::size_t k) {
  Bucket& b = buckets_[k];
  const FlatGroupInfo& info = map_.groups[static_cast<std::size_t>(b.group)];
  const int64_t len = b.end - b.begin;
  torch::Tensor input;
  if (stage_ <= 1) {
    input = flat_grads_[static_cast<std::size_t>(b.group)].narrow(0, b.begin, len);
  } else {
    if (!b.staging.defined()) {
      b.staging = torch::zeros({len}, dtype_);
      transient_bytes_ += tensor_bytes(b.staging);
    }
    input = b.staging;
  }
  if (reduce_dtype_ != dtype_) {  // zero.reduce_dtype: a transient copy in the reduction dtype
    torch::NoGradGuard no_grad;
    b.wire = input.to(reduce_dtype_);
    transient_bytes_ += tensor_bytes(b.wire);
    input = b.wire;
  }
  if (stage_ == 0) {
    b.op = comm_.all_reduce_async(input, ReduceOp::kSum, bucket_name(k));
  } else {
    std::vector<int64_t> counts;
    for (int r = 0; r < world_; ++r)
      counts.push_back(overlap(b.begin, b.end, info.partition_begin(r), info.partition_begin(r) + info.partition_size));
    b.received = torch::empty({counts[static_cast<std::size_t>(rank_)]}, reduce_dtype_);
    transient_bytes_ += tensor_bytes(b.received);
    b.op = comm_.reduce_scatter_async(input, counts, b.received, bucket_name(k));
  }
  transient_peak_ = std::max(transient_peak_, transient_bytes_);
  in_flight_.push_back(k);
  // Stage 2 bounds its transient memory: at most two buckets in flight.
  while (stage_ >= 2 && in_flight_.size() > 2) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
}

void ZeroEngine::complete(std::size_t k) {
  Bucket& b = buckets_[k];
  b.op->wait();
  b.op.reset();
  torch::NoGradGuard no_grad;
  const auto g = static_cast<std::size_t>(b.group);
  const FlatGroupInfo& info = map_.groups[g];
  if (stage_ == 0) {
    auto grads = flat_grads_[g].narrow(0, b.begin, b.end - b.begin);
    if (b.wire.defined()) grads.copy_(b.wire.div_(world_));
    else grads.div_(world_);
    transient_bytes_ -= tensor_bytes(b.wire);
    b.wire = torch::Tensor();
    return;
  }
  const int64_t part_begin = info.partition_begin(rank_);
  const int64_t lo = std::max(b.begin, part_begin), n = b.received.numel();
  if (n > 0) {
    if (stage_ == 1) partition_grads_[g].narrow(0, lo - part_begin, n).copy_(b.received.div_(world_));
    else partition_grads_[g].narrow(0, lo - part_begin, n).add_(b.received.div(world_));
  }
  transient_bytes_ -= tensor_bytes(b.received) + tensor_bytes(b.staging) + tensor_bytes(b.wire);
  b.received = torch::Tensor();
  b.staging = torch::Tensor();
  b.wire = torch::Tensor();
}

void ZeroEngine::finish_pass() {
  // Buckets whose parameters got no gradient (unused in this forward) still take part, with zeros.
  for (std::size_t k = next_launch_; k < buckets_.size(); ++k) launch(k);
  next_launch_ = buckets_.size();
  while (!in_flight_.empty()) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
}

void ZeroEngine::zero_gradients() {
  torch::NoGradGuard no_grad;
  for (auto& g : flat_grads_) g.zero_();
  if (stage_ >= 2)
    for (auto& g : partition_grads_) g.zero_();
}

StepResult ZeroEngine::step(double lr) {
  torch::NoGradGuard no_grad;
  StepResult r = mixed_ ? step_mixed(lr) : step_fp32(lr);
  zero_gradients();
  ++steps_;
  last_step_bytes_ = bytes_since(comm_.stats(), stats_at_window_start_);
  stats_at_window_start_ = comm_.stats();
  if (steps_ == 1 && options_.report_memory) report_first_step();
  return r;
}

StepResult ZeroEngine::step_fp32(double lr) {
  StepResult r;
  if (stage_ == 0) {
    // Every rank holds the same averaged gradients: the same norm and verdict everywhere.
    std::vector<torch::Tensor> all;
    for (const auto& g : params_) all.insert(all.end(), g.begin(), g.end());
    const bool finite_check = options_.skip_nonfinite_steps;
    r.grad_norm = clip_grad_norm(all, finite_check ? 0.0 : options_.max_grad_norm);
    if (finite_check) {
      if (!std::isfinite(r.grad_norm)) r.skipped = true;
      else if (options_.max_grad_norm > 0) clip_grad_norm(all, options_.max_grad_norm);
    }
    if (!r.skipped) optimizer_->step(lr);
    return r;
  }
  // Global norm over the partitions: every rank adds its squared partition norm. Padding is zero.
  double local = 0;
  for (const auto& g : partition_grads_) {
    if (g.numel() == 0) continue;
    const double n = torch::linalg::vector_norm(g, 2, c10::nullopt, false, c10::nullopt).item<double>();
    local += n * n;
  }
  const double total_sq = comm_.all_reduce_scalar(local, ReduceOp::kSum, "gradient norm");
  auto total = torch::tensor(static_cast<float>(std::sqrt(total_sq)), torch::kFloat32);
  r.grad_norm = total.item<double>();
  if (options_.skip_nonfinite_steps && !std::isfinite(r.grad_norm)) {
    r.skipped = true;
    return r;
  }
  if (options_.max_grad_norm > 0) {
    // torch.nn.utils.clip_grad_norm_ (1.13) rounding: reciprocal first, then scale, clamp at 1.
    auto coef = torch::clamp((total + 1e-6).reciprocal() * options_.max_grad_norm, c10::nullopt, 1.0);
    for (auto& g : partition_grads_) g.mul_(coef);
  }
  optimizer_->step(lr);
  share_updated_parameters();
  return r;
}

StepResult ZeroEngine::step_mixed(double lr) {
  StepResult r;
  // The 16-bit gradients this rank updates (whole groups at stage 0, the partition at 1-3). An optimizer that
  // fuses the 16-bit side reads them directly, unscaled and clipped by the factor it is given, and writes the
  // 16-bit parameters in the same pass; otherwise (Adafactor) fp32 copies divided by the loss scale are
  // attached to the masters and the masters are copied back after the step.
  const double scale = scaler_.scale();
  const bool fused = optimizer_->fuses_low_precision();
  std::vector<torch::Tensor> grads16, grads32;
  int64_t grad32_bytes = 0;
  for (std::size_t g = 0; g < master_.size(); ++g) {
    grads16.push_back(stage_ == 0 ? flat_grads_[g] : partition_grads_[g]);
    if (fused) continue;
    auto g32 = grads16.back().to(torch::kFloat);
    if (scale != 1.0) g32.mul_(1.0 / scale);
    grad32_bytes += tensor_bytes(g32);
    grads32.push_back(g32);
  }
  transient_peak_ = std::max(transient_peak_, transient_bytes_ + grad32_bytes);
  auto& checked = fused ? grads16 : grads32;
  if (fault::forced_overflow() && rank_ == 0 && !checked.empty() && checked[0].numel() > 0)
    checked[0][0] = std::numeric_limits<float>::infinity();  // test hook: this rank's gradients overflow

  // Norm over what this rank holds; stages 1-2 add the partitions of every rank (a non-finite partition
  // makes the sum non-finite everywhere), stage 0 votes on the verdict so that every rank agrees.
  double local = 0;
  for (const auto& g : checked) {
    if (g.numel() == 0) continue;
    if (!fused) {
      const double n = torch::linalg::vector_norm(g, 2, c10::nullopt, false, c10::nullopt).item<double>();
      local += n * n;
      continue;
    }
    // 16-bit gradients: the norm in fp32, a chunk at a time (no full fp32 copy), divided by the loss scale.
    const int64_t chunk = int64_t{1} << 20;
    for (int64_t begin = 0; begin < g.numel(); begin += chunk) {
      const auto part = g.narrow(0, begin, std::min(chunk, g.numel() - begin));
      const double n = torch::linalg::vector_norm(part, 2, c10::nullopt, false, torch::kFloat).item<double>() / scale;
      local += n * n;
    }
  }
  double total_sq = local;
  bool overflow = !std::isfinite(local);
  if (world_ > 1) {
    if (stage_ >= 1) {
      total_sq = comm_.all_reduce_scalar(local, ReduceOp::kSum, "gradient norm");
      overflow = !std::isfinite(total_sq);
    } else {
      overflow = comm_.all_reduce_scalar(overflow ? 1.0 : 0.0, ReduceOp::kMax, "gradient overflow vote") > 0;
    }
  }
  auto total = torch::tensor(static_cast<float>(std::sqrt(total_sq)), torch::kFloat32);
  r.grad_norm = overflow && std::isfinite(total_sq) ? std::numeric_limits<double>::infinity() : total.item<double>();
  r.prev_loss_scale = scale;
  scaler_.update(overflow);
  if (scaler_.dynamic() || scale != 1.0) r.loss_scale = scaler_.scale();
  if (overflow) {
    r.skipped = true;
    return r;
  }
  double clip = 1.0;
  if (options_.max_grad_norm > 0) {
    auto coef = torch::clamp((total + 1e-6).reciprocal() * options_.max_grad_norm, c10::nullopt, 1.0);
    clip = coef.item<double>();
    for (auto& g : grads32) g.mul_(coef);
  }
  if (fused) {
    optimizer_->step(lr, StepScaling{clip / scale});
    share_updated_parameters();
    return r;
  }
  set_master_grads(grads32);
  optimizer_->step(lr);
  set_master_grads({});
  write_back_masters();
  return r;
}

void ZeroEngine::set_master_grads(const std::vector<torch::Tensor>& grads32) {
  for (std::size_t g = 0; g < master_.size(); ++g) {
    const bool attach = !grads32.empty();
    if (stage_ >= 1) {
      master_[g].mutable_grad() = attach ? grads32[g] : torch::Tensor();
      continue;
    }
    const FlatGroupInfo& info = map_.groups[g];
    for (std::size_t i = 0; i < master_views_[g].size(); ++i)
      master_views_[g][i].mutable_grad() =
          attach ? grads32[g].narrow(0, info.params[i].offset, info.params[i].numel).view(master_views_[g][i].sizes())
                 : torch::Tensor();
  }
}

torch::Tensor ZeroEngine::own_flat_params(std::size_t g) const {
  const FlatGroupInfo& info = map_.groups[g];
  if (stage_ == 3) return shard16_[g];
  return stage_ == 0 ? flat_params_[g] : flat_params_[g].narrow(0, info.partition_begin(rank_), info.partition_size);
}

void ZeroEngine::write_back_masters() {
  // Rounded to nearest even by the conversion, then shared. Masters in the swap file were copied by the
  // optimizer, one sub-group at a time.
  for (std::size_t g = 0; g < master_.size() && !swapped_masters_; ++g)
    if (flat_params_[g].numel() > 0) own_flat_params(g).copy_(master_[g]);
  share_updated_parameters();
}

torch::Tensor ZeroEngine::gathered_masters(std::size_t g) {
  // One rank holds the whole group: no gather, no copy (of memory-resident masters: the live ones).
  if (stage_ == 0 || world_ == 1) return master_values(g);
  const FlatGroupInfo& info = map_.groups[g];
  auto full = torch::empty({info.padded_numel}, torch::kFloat32);
  if (info.padded_numel > 0) comm_.all_gather(master_values(g), full, "fp32 master weights of group " + std::to_string(g));
  return full;
}

torch::Tensor ZeroEngine::master_values(std::size_t g) const {
  if (!swapped_masters_ || map_.groups[g].numel == 0) return master_[g];
  return swapped_masters_->read_params(group_key(g));
}

void ZeroEngine::store_master_values(std::size_t g, const torch::Tensor& values) {
  const int64_t n = values.numel();
  if (swapped_masters_ && map_.groups[g].numel > 0) {
    auto partition = torch::zeros({master_[g].numel()}, torch::kFloat32);
    partition.narrow(0, 0, n).copy_(values.reshape({-1}));
    swapped_masters_->write_params(group_key(g), partition);
    if (mixed_ && swapped_shards_) swapped_masters_->write_params16(group_key(g), partition.to(dtype_));
    else if (mixed_ && flat_params_[g].numel() > 0) own_flat_params(g).copy_(partition);
    return;
  }
  master_[g].narrow(0, 0, n).copy_(values.reshape({-1}));
  if (mixed_ && flat_params_[g].numel() > 0) own_flat_params(g).copy_(master_[g]);
}

void ZeroEngine::share_updated_parameters() {
  // Stages 1-2 all-gather the updated partitions into the full parameters (from the fp32 masters, which are
  // the partitions, or their 16-bit copies); stage 3 only refreshes the groups that stay whole.
  if (stage_ == 3) {
    coordinator_->refresh_persistent();
    return;
  }
  if (stage_ == 0) return;
  for (std::size_t g = 0; g < master_.size(); ++g)
    if (flat_params_[g].numel() > 0)
      comm_.all_gather(mixed_ ? own_flat_params(g) : master_[g], flat_params_[g], "parameters of group " + std::to_string(g));
}

void ZeroEngine::gather_full_parameters() {
  if (coordinator_) coordinator_->gather_all();
}

std::map<std::string, torch::Tensor> ZeroEngine::master_weights() {
  std::map<std::string, torch::Tensor> out;
  if (!mixed_ && stage_ < 3) return out;
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < master_.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    torch::Tensor full = gathered_masters(g);
    for (const auto& p : info.params) out[p.name] = full.narrow(0, p.offset, p.numel).view(p.shape);
  }
  return out;
}

StreamedWeights ZeroEngine::stream_master_weights() {
  StreamedWeights out;
  if (stage_ < 3 && !swapped_masters_) return out;  // masters resident in memory: master_weights() serves
  for (const auto& info : map_.groups)
    for (const auto& p : info.params) out.names.push_back(p.name);
  out.produce = [this](const TensorSink& sink) {
    torch::NoGradGuard no_grad;
    for (std::size_t g = 0; g < master_.size(); ++g) {
      const FlatGroupInfo& info = map_.groups[g];
      if (info.params.empty()) continue;
      if (swapped_masters_ && world_ == 1) {  // all on this rank, in the swap file: read each tensor alone
        for (const auto& p : info.params) sink(p.name, swapped_masters_->read_params(group_key(g), p.offset, p.numel).view(p.shape));
        continue;
      }
      const torch::Tensor full = gathered_masters(g);
      for (const auto& p : info.params) sink(p.name, full.narrow(0, p.offset, p.numel).view(p.shape));
    }
  };
  return out;
}

void ZeroEngine::load_master_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  if (!mixed_ && stage_ < 3) return;
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < master_.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    auto full = torch::zeros({info.padded_numel}, torch::kFloat32);
    for (const auto& p : info.params) {
      auto it = weights.find(p.name);
      if (it == weights.end() || it->second.numel() != p.numel)
        throw RuntimeFailure("'" + source + "': tensor '" + p.name + "' is missing or has the wrong size");
      full.narrow(0, p.offset, p.numel).copy_(it->second.reshape({-1}));
    }
    store_master_values(g, stage_ == 0 ? full : full.narrow(0, info.partition_begin(rank_), info.partition_size));
  }
  share_updated_parameters();
}

EngineMemory ZeroEngine::memory() const {
  EngineMemory m;
  if (stage_ == 3) {  // shards (fp32: the masters themselves) and the groups that stay whole
    for (std::size_t g = 0; g < flat_params_.size(); ++g) {
      const int64_t shard = tensor_bytes(mixed_ ? shard16_[g] : master_[g]);
      if (coordinator_->persistent(g)) m.param_bytes += tensor_bytes(flat_params_[g]);
      else if (swapped_shards_ && map_.groups[g].numel > 0) m.param_offloaded_bytes += shard;
      else m.param_bytes += shard;
    }
    m.param_gathered_peak = coordinator_->live_peak_elements() * dtype_bytes(dtype_);
  } else {
    for (const auto& f : flat_params_) m.param_bytes += tensor_bytes(f);
  }
  // (fp32 stage 3: the masters are the shards, counted above)
  if (mixed_ || stage_ != 3)
    for (const auto& f : master_) (swapped_masters_ ? m.master_offloaded_bytes : m.master_bytes) += tensor_bytes(f);
  if (stage_ <= 1)
    for (const auto& f : flat_grads_) m.grad_bytes += tensor_bytes(f);
  else
    for (const auto& f : partition_grads_) m.grad_bytes += tensor_bytes(f);
  m.grad_transient_peak = transient_peak_;
  m.optimizer_state_bytes = optimizer_->state_bytes_in_memory();
  m.optimizer_state_offloaded_bytes =
      optimizer_->state_bytes_offloaded() -
      (swapped_masters_ ? swapped_masters_->params_bytes_offloaded() + swapped_masters_->params16_bytes_offloaded() : 0);
  return m;
}

void ZeroEngine::report_first_step() {
  const EngineMemory m = memory();
  std::vector<int64_t> mine = {m.param_bytes, m.master_bytes, m.grad_bytes, m.grad_transient_peak, m.optimizer_state_bytes,
                               m.param_gathered_peak, m.optimizer_state_offloaded_bytes, m.master_offloaded_bytes,
                               m.param_offloaded_bytes};
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
                     {"sent_bytes_first_step", {{"all_reduce", v[9]}, {"reduce_scatter", v[10]}, {"all_gather", v[11]}}}});
  }
  nlohmann::json report = {{"zero_stage", stage_}, {"world_size", world_}, {"numel", map_.total_numel()},
                           {"padded_numel", map_.total_padded()}, {"ranks", ranks}};
  std::cerr << "engine memory: " << report.dump() << std::endl;
}

std::string ZeroEngine::describe() const {
  std::string s = "zero stage " + std::to_string(stage_) + ", world size " + std::to_string(world_) + " (" +
                  comm_.backend() + "), " + std::to_string(map_.total_numel()) + " trainable elements in " +
                  std::to_string(map_.groups.size()) + " flat groups (padded to " + std::to_string(map_.total_padded()) +
                  "), " + std::to_string(buckets_.size()) + " gradient buckets";
  if (stage_ >= 1) s += ", partition of " + std::to_string(map_.partition_numel()) + " elements per rank";
  if (const auto* swapped = dynamic_cast<const SwappedOptimizer*>(optimizer_.get()))
    s += std::string(swapped_shards_ ? "; parameter shards, " : "; ") +
         (swapped_masters_ && mixed_ ? "fp32 master weights and optimizer state" : "optimizer state") +
         " offloaded to nvme: " + swapped->kernel_description();
  if (stage_ == 3)
    s += ", parameters gathered per module (" + std::to_string(coordinator_->unit_count()) +
         " gather units; flat groups kept whole: " + std::to_string(coordinator_->persistent_count()) + ")";
  if (mixed_) {
    s += "; " + precision_name(dtype_) + " parameters and gradients, fp32 master weights" +
         (stage_ >= 1 ? " of the partition" : "") + ", gradients reduced in " + precision_name(reduce_dtype_);
    s += scaler_.dynamic() ? ", dynamic loss scale from " + std::to_string(static_cast<int64_t>(scaler_.scale()))
                           : (scaler_.scale() != 1.0 ? ", static loss scale " + std::to_string(scaler_.scale()) : "");
  }
  return s;
}

EngineShard ZeroEngine::export_shard() const {
  EngineShard shard;
  for (std::size_t g = 0; g < master_.size(); ++g) {
    // Padding is stripped, as DeepSpeed's single_partition_of_fp32_groups does.
    const int64_t real = map_.groups[g].partition_real(rank_);
    shard.tensors.emplace_back("fp32_flat_group_" + std::to_string(g), master_values(g).narrow(0, 0, real).clone());
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
  for (std::size_t g = 0; g < master_.size(); ++g) {
    const std::string key = "fp32_flat_group_" + std::to_string(g);
    auto it = tensors.find(key);
    const int64_t real = map_.groups[g].partition_real(rank_);
    if (it == tensors.end() || it->second.numel() != real || it->second.scalar_type() != torch::kFloat32)
      throw RuntimeFailure("'" + source + "': tensor '" + key + "' is missing or has the wrong size");
    store_master_values(g, it->second);
  }
  optimizer_->load_state(optim);
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
  optimizer_->load_state(optim);
  load_scaler_state(state, "optimizer state");
}

void ZeroEngine::load_scaler_state(const std::map<std::string, torch::Tensor>& state, const std::string& source) {
  if (!scaler_.load_state(state, source))
    std::cerr << "warning: '" << source << "' holds no loss-scaler state (saved without fp16 loss scaling); the "
              << "dynamic loss scale starts again at " << scaler_.scale() << std::endl;
}

}  // namespace hftrain
