// Activation checkpointing (see checkpointing.h).
#include "models/checkpointing.h"

#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <algorithm>
#include <vector>

#include "models/activation_copies.h"
#include "util/autocast.h"

namespace hftrain {
namespace {

using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

thread_local bool block_inputs_to_host = false;

// What forward keeps of a block input until backward: the input itself, or when offloading a copy in host memory
// (activation_copies: from a GPU on a side stream).
torch::Tensor kept_input(const torch::Tensor& x, bool offload) { return offload ? copy_to_host(x) : x; }

// The generator of a CUDA input's device (dropout there draws from it), as torch.utils.checkpoint keeps it.
c10::optional<at::Generator> device_generator(const c10::IValue& device_index) {
  if (!device_index.isInt()) return c10::nullopt;
  return at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index.toInt())));
}

// What the recomputation must repeat: the random generators' states and the autocast mode at forward.
void record_forward_state(torch::autograd::AutogradContext* ctx, int64_t block_address, const torch::Tensor& x) {
  ctx->saved_data["block"] = block_address;
  ctx->saved_data["rng"] = at::detail::getDefaultCPUGenerator().get_state();
  if (x.device().is_cuda()) {
    ctx->saved_data["cuda_device"] = static_cast<int64_t>(x.device().index());
    ctx->saved_data["cuda_rng"] = device_generator(ctx->saved_data["cuda_device"])->get_state();
  }
  ctx->saved_data["autocast"] = static_cast<int64_t>(current_autocast_dtype());  // recompute under the same mode
}

// While it lives, the random generators are at the states recorded at forward; on exit they are put back.
class ReplayedGenerators {
 public:
  explicit ReplayedGenerators(torch::autograd::AutogradContext* ctx) : cpu_(at::detail::getDefaultCPUGenerator()) {
    cpu_now_ = cpu_.get_state();
    cpu_.set_state(ctx->saved_data["rng"].toTensor());
    const auto device_index = ctx->saved_data.find("cuda_device");
    if (device_index == ctx->saved_data.end()) return;
    device_ = device_generator(device_index->second);
    device_now_ = device_->get_state();
    device_->set_state(ctx->saved_data["cuda_rng"].toTensor());
  }
  ~ReplayedGenerators() {
    cpu_.set_state(cpu_now_);
    if (device_) device_->set_state(device_now_);
  }
  ReplayedGenerators(const ReplayedGenerators&) = delete;
  ReplayedGenerators& operator=(const ReplayedGenerators&) = delete;

 private:
  at::Generator cpu_;
  torch::Tensor cpu_now_;
  c10::optional<at::Generator> device_;
  torch::Tensor device_now_;
};

// Runs `recompute` with grad enabled under the recorded generator state and autocast mode (the generators put
// back afterwards), and back-propagates `grad_output` through the result.
void replay_and_backward(torch::autograd::AutogradContext* ctx, const std::function<torch::Tensor()>& recompute,
                         const torch::Tensor& grad_output) {
  torch::Tensor y;
  {
    ReplayedGenerators replayed(ctx);
    torch::AutoGradMode enable(true);
    AutocastScope autocast(static_cast<torch::ScalarType>(ctx->saved_data["autocast"].toInt()));
    y = recompute();
  }
  torch::autograd::backward({y}, {grad_output});
}

// The trainable leaves (parameters) whose gradients `y`'s graph accumulates, but `input`.
std::vector<torch::Tensor> accumulated_leaves(const torch::Tensor& y, const torch::Tensor& input) {
  std::vector<torch::Tensor> leaves;
  std::vector<torch::autograd::Node*> stack = {y.grad_fn().get()}, seen;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!node || std::find(seen.begin(), seen.end(), node) != seen.end()) continue;
    seen.push_back(node);
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      if (!acc->variable.is_same(input)) leaves.push_back(acc->variable);
      continue;
    }
    for (const auto& edge : node->next_edges()) stack.push_back(edge.function.get());
  }
  return leaves;
}

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t block_address,
                               bool offload) {
    record_forward_state(ctx, block_address, x);
    ctx->saved_data["device"] = x.device();
    ctx->save_for_backward({kept_input(x, offload)});
    torch::NoGradGuard no_grad;
    return (*reinterpret_cast<const BlockFn*>(block_address))(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto* block = reinterpret_cast<const BlockFn*>(ctx->saved_data["block"].toInt());
    auto x = copy_back(ctx->get_saved_variables()[0].detach(), ctx->saved_data["device"].toDevice()).requires_grad_(true);
    replay_and_backward(ctx, [&] { return (*block)(x); }, grad_outputs[0]);
    return {x.grad(), torch::Tensor(), torch::Tensor()};
  }
};

using MemoryBlockFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;

// The two-input form: the same scheme, with the block's second input stored and differentiated as well.
class CheckpointFunction2 : public torch::autograd::Function<CheckpointFunction2> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor memory,
                               int64_t block_address) {
    record_forward_state(ctx, block_address, x);
    ctx->saved_data["device"] = x.device();
    ctx->saved_data["x_requires_grad"] = x.requires_grad();
    ctx->save_for_backward({kept_input(x, block_inputs_to_host), memory});  // the encoder output is shared: kept as it is
    torch::NoGradGuard no_grad;
    return (*reinterpret_cast<const MemoryBlockFn*>(block_address))(x, memory);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto* block = reinterpret_cast<const MemoryBlockFn*>(ctx->saved_data["block"].toInt());
    const auto saved = ctx->get_saved_variables();
    auto x = copy_back(saved[0].detach(), ctx->saved_data["device"].toDevice())
                 .requires_grad_(ctx->saved_data["x_requires_grad"].toBool());
    auto memory = saved[1].detach().requires_grad_(saved[1].requires_grad());
    replay_and_backward(ctx, [&] { return (*block)(x, memory); }, grad_outputs[0]);
    return {x.requires_grad() ? x.grad() : torch::Tensor(), memory.requires_grad() ? memory.grad() : torch::Tensor(),
            torch::Tensor()};
  }
};

// The tile `t` of `tiles` along dimension 1 of x: its start and length (the first T % tiles one longer).
std::pair<int64_t, int64_t> tile_range(int64_t T, int64_t tiles, int64_t t) {
  const int64_t base = T / tiles, extra = T % tiles;
  return {t * base + std::min(t, extra), base + (t < extra ? 1 : 0)};
}

torch::Tensor tiled_forward(const BlockFn& block, const torch::Tensor& x, int64_t tiles) {
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0; t < tiles; ++t) {
    const auto [start, length] = tile_range(x.size(1), tiles, t);
    outputs.push_back(block(x.narrow(1, start, length)));
  }
  return torch::cat(outputs, 1);
}

// The tiled block as one autograd operation: forward keeps x only; backward recomputes one tile at a time and
// takes its gradients with autograd::grad, summing the parameters' over the tiles, then hands each parameter its
// sum in one accumulation. A data-parallel gradient sync that hooks each parameter's accumulation (engine/
// gradient_sync) then sees one per backward, as without tiles (DeepSpeed's TiledMLP marks its parameters not
// ready until the last tile for the same reason).
class TiledFunction : public torch::autograd::Function<TiledFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t block_address,
                               int64_t tiles) {
    record_forward_state(ctx, block_address, x);
    ctx->saved_data["tiles"] = tiles;
    ctx->save_for_backward({x});
    torch::NoGradGuard no_grad;
    return tiled_forward(*reinterpret_cast<const BlockFn*>(block_address), x, tiles);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto& block = *reinterpret_cast<const BlockFn*>(ctx->saved_data["block"].toInt());
    const torch::Tensor x = ctx->get_saved_variables()[0].detach();
    const int64_t tiles = ctx->saved_data["tiles"].toInt();
    std::vector<torch::Tensor> input_grads, leaves, sums;
    {
      ReplayedGenerators replayed(ctx);  // the tiles draw in forward's order
      for (int64_t t = 0; t < tiles; ++t) {
        const auto [start, length] = tile_range(x.size(1), tiles, t);
        const torch::Tensor in = x.narrow(1, start, length).detach().requires_grad_(true);
        torch::Tensor y;
        {
          torch::AutoGradMode enable(true);
          AutocastScope autocast(static_cast<torch::ScalarType>(ctx->saved_data["autocast"].toInt()));
          y = block(in);
        }
        if (t == 0) leaves = accumulated_leaves(y, in);
        std::vector<torch::Tensor> wrt = {in};
        wrt.insert(wrt.end(), leaves.begin(), leaves.end());
        auto grads = torch::autograd::grad({y}, wrt, {grad_outputs[0].narrow(1, start, length)}, false, false, true);
        input_grads.push_back(grads[0].defined() ? grads[0] : torch::zeros_like(in));
        for (std::size_t i = 0; i < leaves.size(); ++i)
          if (t == 0) sums.push_back(grads[i + 1]);
          else if (grads[i + 1].defined()) sums[i] = sums[i].defined() ? sums[i] + grads[i + 1] : grads[i + 1];
      }
    }
    deposit(leaves, sums);
    return {torch::cat(input_grads, 1), torch::Tensor(), torch::Tensor()};
  }

 private:
  // Each leaf's summed gradient accumulated into it once (a backward through sum(leaf * gradient)).
  static void deposit(const std::vector<torch::Tensor>& leaves, const std::vector<torch::Tensor>& sums) {
    torch::AutoGradMode enable(true);
    torch::Tensor total;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (!sums[i].defined()) continue;
      const torch::Tensor term = (leaves[i] * sums[i].to(leaves[i].scalar_type())).sum();
      total = total.defined() ? total + term : term;
    }
    if (total.defined()) torch::autograd::backward({total});
  }
};

// The one-input checkpoint, its input kept in host memory when `offload`.
torch::Tensor checkpointed_block(const BlockFn& block, const torch::Tensor& x, bool offload) {
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return block(x);
  // The function object outlives backward: callers pass a block-owned std::function.
  return CheckpointFunction::apply(x, reinterpret_cast<int64_t>(&block), offload);
}

}  // namespace

torch::Tensor checkpointed(const MemoryBlockFn& block, const torch::Tensor& x, const torch::Tensor& memory) {
  if (!torch::GradMode::is_enabled() || (!x.requires_grad() && !memory.requires_grad())) return block(x, memory);
  return CheckpointFunction2::apply(x, memory, reinterpret_cast<int64_t>(&block));
}

ActivationOffloadScope::ActivationOffloadScope(bool offload) : previous_(block_inputs_to_host) { block_inputs_to_host = offload; }
ActivationOffloadScope::~ActivationOffloadScope() { block_inputs_to_host = previous_; }
bool activation_offload_active() { return block_inputs_to_host; }

torch::Tensor checkpointed(const BlockFn& block, const torch::Tensor& x) {
  return checkpointed_block(block, x, block_inputs_to_host);
}

torch::Tensor tiled_over_tokens(const std::function<torch::Tensor(const torch::Tensor&)>& block, const torch::Tensor& x,
                                int64_t tiles) {
  tiles = std::max<int64_t>(1, std::min(tiles, x.size(1)));
  if (tiles == 1) return block(x);
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return tiled_forward(block, x, tiles);
  return TiledFunction::apply(x, reinterpret_cast<int64_t>(&block), tiles);
}

int64_t auto_token_tiles(int64_t tokens, int64_t hidden) { return std::max<int64_t>(1, (tokens + hidden - 1) / hidden); }

}  // namespace hftrain
