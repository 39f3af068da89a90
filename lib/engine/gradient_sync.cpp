// Bucketed gradient averaging over the ranks (see gradient_sync.h).
#include "engine/gradient_sync.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <climits>

#include "engine/precision.h"
#include "util/error.h"
#include "util/tensor_bytes.h"

namespace hftrain {

GradientSync::GradientSync(Comm& comm, const PartitionMap& map, std::vector<std::vector<torch::Tensor>> params,
                           GradientReduction mode, torch::Device device, torch::ScalarType dtype,
                           torch::ScalarType reduce_dtype, double bucket_cap_mb, std::vector<Comm*> group_comms)
    : comm_(comm), map_(map), params_(std::move(params)), mode_(mode), device_(device), dtype_(dtype), reduce_dtype_(reduce_dtype),
      rank_(comm.rank()), world_(comm.world_size()), group_comms_(std::move(group_comms)) {
  torch::NoGradGuard no_grad;
  if (group_comms_.empty()) group_comms_.assign(map_.groups.size(), &comm_);
  for (std::size_t g = 0; g < map_.groups.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    if (!comm_of(g)) {  // held by other ranks only
      const torch::Tensor none = torch::zeros({0}, on_device(dtype_));
      if (keeps_full_grads()) flat_grads_.push_back(none);
      if (mode_ != GradientReduction::kAllReduce) partition_grads_.push_back(none);
      step_grads_.push_back(none);
      group_pending_.push_back(0);
      continue;
    }
    if (keeps_full_grads()) {
      auto grads = torch::zeros({info.padded_numel}, on_device(dtype_));
      for (std::size_t i = 0; i < info.params.size(); ++i)
        params_[g][i].mutable_grad() = grads.narrow(0, info.params[i].offset, info.params[i].numel).view(params_[g][i].sizes());
      flat_grads_.push_back(grads);
    }
    switch (mode_) {
      case GradientReduction::kAllReduce:
        step_grads_.push_back(flat_grads_[g]);
        break;
      case GradientReduction::kReduceScatterAtBoundary:
        partition_grads_.push_back(flat_grads_[g].narrow(0, info.partition_begin(rank_), info.partition_size));
        step_grads_.push_back(partition_grads_.back());
        break;
      case GradientReduction::kReduceScatterEveryMicroStep:
        partition_grads_.push_back(torch::zeros({info.partition_size}, on_device(dtype_)));
        step_grads_.push_back(partition_grads_.back());
        break;
    }
    group_pending_.push_back(static_cast<int>(info.params.size()));
  }
  build_buckets(static_cast<int64_t>(bucket_cap_mb * 1024 * 1024));
  install_hooks();
}

GradientSync::~GradientSync() {
  for (std::size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  for (auto& group : params_)
    for (auto& p : group) p.mutable_grad() = torch::Tensor();
}

int64_t GradientSync::resident_bytes() const {
  int64_t bytes = 0;
  for (const auto& f : keeps_full_grads() ? flat_grads_ : partition_grads_) bytes += tensor_bytes(f);
  return bytes;
}

void GradientSync::build_buckets(int64_t cap_bytes) {
  const int64_t cap = std::max<int64_t>(cap_bytes / dtype_bytes(dtype_), 1);
  bucket_of_.assign(map_.groups.size(), {});
  std::vector<Bucket> all;
  std::vector<int64_t> ready_key;  // smallest model index in the bucket: the last of its members backward reaches
  for (std::size_t g = 0; g < map_.groups.size(); ++g) {
    const FlatGroupInfo& info = map_.groups[g];
    bucket_of_[g].assign(info.params.size(), 0);
    if (info.params.empty() || !comm_of(g)) continue;
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

void GradientSync::install_hooks() {
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

std::string GradientSync::bucket_name(std::size_t k) const {
  return "gradient bucket " + std::to_string(k + 1) + "/" + std::to_string(buckets_.size()) + " (group " +
         std::to_string(buckets_[k].group) + ", elements " + std::to_string(buckets_[k].begin) + "-" +
         std::to_string(buckets_[k].end) + ")";
}

void GradientSync::backward(const torch::Tensor& loss, bool is_last_micro_step) {
  sync_ = !keeps_full_grads() || is_last_micro_step;
  for (auto& b : buckets_) b.pending = static_cast<int>(b.members.size());
  for (std::size_t g = 0; g < group_pending_.size(); ++g) group_pending_[g] = static_cast<int>(params_[g].size());
  next_launch_ = 0;
  loss.backward();
  if (sync_) finish_pass();
}

void GradientSync::on_gradient(int group, int index) {
  if (!sync_) return;
  const std::size_t k = bucket_of_[static_cast<std::size_t>(group)][static_cast<std::size_t>(index)];
  Bucket& b = buckets_[k];
  if (!keeps_full_grads()) {
    torch::NoGradGuard no_grad;
    if (!b.staging.defined()) {
      b.staging = torch::zeros({b.end - b.begin}, on_device(dtype_));
      transient_bytes_ += tensor_bytes(b.staging);
    }
    auto& p = params_[static_cast<std::size_t>(group)][static_cast<std::size_t>(index)];
    auto& grad = p.mutable_grad();
    if (grad.defined()) {
      const auto& info = map_.groups[static_cast<std::size_t>(group)].params[static_cast<std::size_t>(index)];
      b.staging.narrow(0, info.offset - b.begin, info.numel).copy_(grad.reshape({-1}));
      grad = torch::Tensor();  // no full-size gradient is kept
    }
  }
  if (--b.pending == 0) launch_ready();
  if (group_done_ && --group_pending_[static_cast<std::size_t>(group)] == 0) group_done_(static_cast<std::size_t>(group));
}

void GradientSync::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(next_launch_++);
}

void GradientSync::launch(std::size_t k) {
  Bucket& b = buckets_[k];
  const FlatGroupInfo& info = map_.groups[static_cast<std::size_t>(b.group)];
  const int64_t len = b.end - b.begin;
  torch::Tensor input;
  if (keeps_full_grads()) {
    input = flat_grads_[static_cast<std::size_t>(b.group)].narrow(0, b.begin, len);
  } else {
    if (!b.staging.defined()) {
      b.staging = torch::zeros({len}, on_device(dtype_));
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
  Comm& comm = *comm_of(static_cast<std::size_t>(b.group));
  if (mode_ == GradientReduction::kAllReduce) {
    b.op = comm.all_reduce_async(input, ReduceOp::kSum, bucket_name(k));
  } else {
    std::vector<int64_t> counts;  // per member of the group's communicator (its holders, in rank order)
    for (int holder : info.ranks)
      counts.push_back(overlap(b.begin, b.end, info.partition_begin(holder), info.partition_begin(holder) + info.partition_size));
    b.received = torch::empty({counts[static_cast<std::size_t>(comm.rank())]}, on_device(reduce_dtype_));
    transient_bytes_ += tensor_bytes(b.received);
    b.op = comm.reduce_scatter_async(input, counts, b.received, bucket_name(k));
  }
  transient_peak_ = std::max(transient_peak_, transient_bytes_);
  in_flight_.push_back(k);
  // Staged buckets bound the transient memory: at most two in flight.
  while (!keeps_full_grads() && in_flight_.size() > 2) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
}

void GradientSync::complete(std::size_t k) {
  Bucket& b = buckets_[k];
  b.op->wait();
  b.op.reset();
  torch::NoGradGuard no_grad;
  const auto g = static_cast<std::size_t>(b.group);
  const FlatGroupInfo& info = map_.groups[g];
  if (mode_ == GradientReduction::kAllReduce) {
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
    auto target = partition_grads_[g].narrow(0, lo - part_begin, n);
    if (mode_ == GradientReduction::kReduceScatterAtBoundary) target.copy_(b.received.div_(world_));
    else target.add_(b.received.div(world_));  // the partition accumulates over the micro-steps
  }
  transient_bytes_ -= tensor_bytes(b.received) + tensor_bytes(b.staging) + tensor_bytes(b.wire);
  b.received = torch::Tensor();
  b.staging = torch::Tensor();
  b.wire = torch::Tensor();
}

void GradientSync::finish_pass() {
  // Buckets whose parameters got no gradient (unused in this forward) still take part, with zeros.
  for (std::size_t k = next_launch_; k < buckets_.size(); ++k) launch(k);
  next_launch_ = buckets_.size();
  while (!in_flight_.empty()) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
}

void GradientSync::zero() {
  torch::NoGradGuard no_grad;
  for (auto& g : flat_grads_) g.zero_();
  if (!keeps_full_grads())
    for (auto& g : partition_grads_) g.zero_();
}

}  // namespace hftrain
