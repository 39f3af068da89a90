// Activation checkpointing (see checkpointing.h).
#include "models/checkpointing.h"

#include <torch/csrc/autograd/custom_function.h>

#include "util/autocast.h"

namespace hftrain {
namespace {

using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, int64_t block_address) {
    ctx->saved_data["block"] = block_address;
    ctx->saved_data["rng"] = at::detail::getDefaultCPUGenerator().get_state();
    ctx->saved_data["autocast"] = static_cast<int64_t>(current_autocast_dtype());  // recompute under the same mode
    ctx->save_for_backward({x});
    torch::NoGradGuard no_grad;
    return (*reinterpret_cast<const BlockFn*>(block_address))(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto* block = reinterpret_cast<const BlockFn*>(ctx->saved_data["block"].toInt());
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    auto generator = at::detail::getDefaultCPUGenerator();
    auto rng_now = generator.get_state();
    generator.set_state(ctx->saved_data["rng"].toTensor());
    torch::Tensor y;
    {
      torch::AutoGradMode enable(true);
      AutocastScope autocast(static_cast<torch::ScalarType>(ctx->saved_data["autocast"].toInt()));
      y = (*block)(x);
    }
    generator.set_state(rng_now);
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed(const BlockFn& block, const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return block(x);
  // The function object outlives backward: callers pass a block-owned std::function.
  return CheckpointFunction::apply(x, reinterpret_cast<int64_t>(&block));
}

}  // namespace hftrain
