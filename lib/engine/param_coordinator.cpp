// ZeRO stage 3 parameter coordinator (see param_coordinator.h).
#include "engine/param_coordinator.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "util/tensor_storage.h"

namespace hftrain {
namespace {

// Identity on a unit's output whose backward gathers the unit's parameters before the unit's own
// backward runs (the unit's operations feed this node, so autograd reaches it first).
class GatherBeforeBackward : public torch::autograd::Function<GatherBeforeBackward> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t coordinator, int64_t unit) {
    ctx->saved_data["coordinator"] = coordinator;
    ctx->saved_data["unit"] = unit;
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* coordinator = reinterpret_cast<ParamCoordinator*>(ctx->saved_data["coordinator"].toInt());
    coordinator->before_unit_backward(static_cast<std::size_t>(ctx->saved_data["unit"].toInt()));
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

ParamCoordinator::ParamCoordinator(Comm& comm, std::vector<torch::Tensor> full, std::vector<torch::Tensor> shard,
                                   std::vector<bool> persistent, std::vector<std::vector<std::size_t>> units,
                                   CoordinatorLimits limits, ShardReader read_shard)
    : comm_(comm), units_(std::move(units)), limits_(limits), read_shard_(std::move(read_shard)) {
  groups_.resize(full.size());
  for (std::size_t g = 0; g < full.size(); ++g) {
    Group& group = groups_[g];
    group.full = full[g];
    group.shard = shard[g];
    group.persistent = persistent[g];
    group.state = State::kLive;  // the engine hands over whole buffers
    count_live(group.full, +1);
  }
  release_all();
  refresh_persistent();
  live_peak_ = live_elements_;  // from here on: what training gathers (the model was built whole)
  live_peak_bytes_ = live_bytes_;
}

void ParamCoordinator::count_live(const torch::Tensor& full, int sign) {
  live_elements_ += sign * full.numel();
  live_bytes_ += sign * static_cast<int64_t>(full.numel() * full.element_size());
}

void ParamCoordinator::add_frozen(const std::vector<torch::Tensor>& full, const std::vector<torch::Tensor>& shard,
                                  const std::vector<std::vector<std::size_t>>& unit_groups) {
  const std::size_t first = groups_.size();
  for (std::size_t i = 0; i < full.size(); ++i) {
    Group group;
    group.full = full[i];
    group.shard = shard[i];
    group.frozen = true;
    group.state = State::kLive;
    count_live(group.full, +1);
    groups_.push_back(std::move(group));
  }
  for (std::size_t u = 0; u < unit_groups.size() && u < units_.size(); ++u)
    for (std::size_t i : unit_groups[u]) units_[u].push_back(first + i);
  for (std::size_t g = first; g < groups_.size(); ++g) release(g);
}

ParamCoordinator::~ParamCoordinator() {
  // Gathers still in flight must finish before their buffers go; one that failed (a worker died, the
  // error that unwinds us is already on its way) must not throw from a destructor.
  for (auto& group : groups_) {
    if (!group.op) continue;
    try {
      group.op->wait();  // (its source tensor is freed with the group)
    } catch (const std::exception&) {
    }
  }
}

void ParamCoordinator::start_gather(std::size_t g) {
  Group& group = groups_[g];
  if (group.state != State::kReleased) return;
  allocate_storage(group.full);
  count_live(group.full, +1);
  live_peak_ = std::max(live_peak_, live_elements_);
  live_peak_bytes_ = std::max(live_peak_bytes_, live_bytes_);
  gather_into_full(g);
}

void ParamCoordinator::gather_into_full(std::size_t g) {
  Group& group = groups_[g];
  group.source = read_shard_ && !group.frozen ? read_shard_(g) : group.shard;
  group.state = State::kInFlight;
  group.op = comm_.all_gather_async(group.source, group.full, "ZeRO-3 parameters of flat group " + std::to_string(g));
}

void ParamCoordinator::finish_gather(Group& group) {
  group.op->wait();
  group.op.reset();
  group.source = torch::Tensor();
}

void ParamCoordinator::wait_live(std::size_t g) {
  Group& group = groups_[g];
  if (group.state == State::kReleased) start_gather(g);
  if (group.state == State::kInFlight) {
    finish_gather(group);
    group.state = State::kLive;
  }
}

void ParamCoordinator::release(std::size_t g) {
  Group& group = groups_[g];
  if (group.state == State::kReleased || group.persistent || keep_all_) return;
  if (group.state == State::kInFlight) finish_gather(group);  // a collective: every rank completes it before freeing
  release_storage(group.full);
  count_live(group.full, -1);
  group.state = State::kReleased;
}

void ParamCoordinator::release_if_unused(std::size_t g) {
  const Group& group = groups_[g];
  if (group.uses == 0 && !group.held) release(g);
}

void ParamCoordinator::prefetch_from(std::size_t unit, int direction) {
  int64_t budget = limits_.prefetch_elements;
  for (int64_t u = static_cast<int64_t>(unit) + direction; u >= 0 && u < static_cast<int64_t>(units_.size()); u += direction)
    for (std::size_t g : units_[static_cast<std::size_t>(u)]) {
      const Group& group = groups_[g];
      if (group.state != State::kReleased) continue;
      const int64_t n = group.full.numel();
      if (n > budget || live_elements_ + n > limits_.max_live_elements) return;
      budget -= n;
      start_gather(g);
    }
}

void ParamCoordinator::enter_backward_unit(std::size_t unit) {
  const std::size_t left = backward_unit_;
  backward_unit_ = unit;
  if (left == kNoUnit || left == unit) return;
  const auto& now = units_[unit];
  for (std::size_t g : units_[left]) {
    Group& group = groups_[g];
    if (!group.frozen || std::find(now.begin(), now.end(), g) != now.end()) continue;
    group.held = false;
    release_if_unused(g);
  }
}

void ParamCoordinator::before_unit(std::size_t unit) {
  for (std::size_t g : units_[unit]) {
    wait_live(g);
    groups_[g].uses += 1;
  }
  // A recomputation inside backward (activation checkpointing): backward is about to enter this unit.
  if (in_backward_) enter_backward_unit(unit);
  prefetch_from(unit, in_backward_ ? -1 : 1);
}

torch::Tensor ParamCoordinator::after_unit(std::size_t unit, torch::Tensor output) {
  for (std::size_t g : units_[unit]) groups_[g].uses -= 1;
  const bool graph = torch::GradMode::is_enabled() && output.defined() && output.requires_grad();
  if (graph && in_backward_) {
    // A recomputation (activation checkpointing) inside backward: its backward follows at once.
    for (std::size_t g : units_[unit]) groups_[g].held = true;
    return output;
  }
  for (std::size_t g : units_[unit]) release_if_unused(g);
  if (!graph) return output;
  return GatherBeforeBackward::apply(output, reinterpret_cast<int64_t>(this), static_cast<int64_t>(unit));
}

void ParamCoordinator::before_unit_backward(std::size_t unit) {
  for (std::size_t g : units_[unit]) {
    wait_live(g);
    groups_[g].held = true;
  }
  enter_backward_unit(unit);
  prefetch_from(unit, -1);
}

void ParamCoordinator::gradients_done(std::size_t group) {
  groups_[group].held = false;
  release_if_unused(group);
}

void ParamCoordinator::begin_backward() {
  in_backward_ = true;
  backward_unit_ = kNoUnit;
}

void ParamCoordinator::end_backward() {
  in_backward_ = false;
  backward_unit_ = kNoUnit;
  for (auto& group : groups_) group.held = false;
  release_all();
}

void ParamCoordinator::refresh_persistent() {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    Group& group = groups_[g];
    if (!group.persistent && !keep_all_) continue;
    if (group.state == State::kReleased) {
      start_gather(g);
    } else {  // whole already: gather the updated shards into it
      wait_live(g);
      gather_into_full(g);
    }
  }
  for (std::size_t g = 0; g < groups_.size(); ++g)
    if (groups_[g].state == State::kInFlight) wait_live(g);
}

void ParamCoordinator::gather_all() {
  keep_all_ = true;
  for (std::size_t g = 0; g < groups_.size(); ++g) start_gather(g);
  for (std::size_t g = 0; g < groups_.size(); ++g) wait_live(g);
}

std::size_t ParamCoordinator::persistent_count() const {
  return static_cast<std::size_t>(std::count_if(groups_.begin(), groups_.end(), [](const Group& g) { return g.persistent; }));
}

void ParamCoordinator::release_all() {
  for (std::size_t g = 0; g < groups_.size(); ++g) release(g);
}

}  // namespace hftrain
