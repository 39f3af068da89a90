// Activation checkpointing (see checkpointing.h).
#include "models/checkpointing.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

#include "util/autocast.h"

namespace hftrain {
namespace {

using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

thread_local bool block_inputs_to_host = false;

// What forward keeps of a block input until backward: the input itself, or when offloading a copy in host
// memory (pinned and copied without blocking from a CUDA device; a CPU input is copied within host memory,
// the same path, which saves nothing but proves it).
torch::Tensor kept_input(const torch::Tensor& x, bool offload) {
  if (!offload) return x;
  const bool from_device = !x.device().is_cpu();
  torch::Tensor host = torch::empty(x.sizes(), x.options().device(torch::kCPU).pinned_memory(from_device));
  host.copy_(x.detach(), /*non_blocking=*/from_device);
  return host;
}

// The kept input on the device the block ran on, for the recomputation (non-blocking from pinned memory).
torch::Tensor restored_input(const torch::Tensor& kept, const torch::Device& device) {
  return kept.device() == device ? kept : kept.to(device, /*non_blocking=*/true);
}

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

// Runs `recompute` with grad enabled under the recorded generator state and autocast mode, then puts the
// generator back as it was, and back-propagates `grad_output` through the result.
void replay_and_backward(torch::autograd::AutogradContext* ctx, const std::function<torch::Tensor()>& recompute,
                         const torch::Tensor& grad_output) {
  auto generator = at::detail::getDefaultCPUGenerator();
  auto rng_now = generator.get_state();
  generator.set_state(ctx->saved_data["rng"].toTensor());
  const auto device_index = ctx->saved_data.find("cuda_device");
  c10::optional<at::Generator> on_device =
      device_index == ctx->saved_data.end() ? c10::nullopt : device_generator(device_index->second);
  torch::Tensor device_rng_now;
  if (on_device) {
    device_rng_now = on_device->get_state();
    on_device->set_state(ctx->saved_data["cuda_rng"].toTensor());
  }
  torch::Tensor y;
  {
    torch::AutoGradMode enable(true);
    AutocastScope autocast(static_cast<torch::ScalarType>(ctx->saved_data["autocast"].toInt()));
    y = recompute();
  }
  generator.set_state(rng_now);
  if (on_device) on_device->set_state(device_rng_now);
  torch::autograd::backward({y}, {grad_output});
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
    auto x = restored_input(ctx->get_saved_variables()[0].detach(), ctx->saved_data["device"].toDevice()).requires_grad_(true);
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
    auto x = restored_input(saved[0].detach(), ctx->saved_data["device"].toDevice())
                 .requires_grad_(ctx->saved_data["x_requires_grad"].toBool());
    auto memory = saved[1].detach().requires_grad_(saved[1].requires_grad());
    replay_and_backward(ctx, [&] { return (*block)(x, memory); }, grad_outputs[0]);
    return {x.requires_grad() ? x.grad() : torch::Tensor(), memory.requires_grad() ? memory.grad() : torch::Tensor(),
            torch::Tensor()};
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
  const int64_t T = x.size(1);
  tiles = std::max<int64_t>(1, std::min(tiles, T));
  if (tiles == 1) return block(x);
  std::vector<torch::Tensor> outputs;
  for (int64_t t = 0, start = 0; t < tiles; ++t) {
    const int64_t length = T / tiles + (t < T % tiles ? 1 : 0);
    outputs.push_back(checkpointed_block(block, x.narrow(1, start, length), /*offload=*/false));
    start += length;
  }
  return torch::cat(outputs, 1);
}

int64_t auto_token_tiles(int64_t tokens, int64_t hidden) { return std::max<int64_t>(1, (tokens + hidden - 1) / hidden); }

}  // namespace hftrain
