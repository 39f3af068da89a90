// Activation (gradient) checkpointing for one block: the forward pass keeps only the block's input;
// backward recomputes the block (with the forward's RNG state, so dropout masks repeat) and
// backpropagates through the recomputation. Same gradients, lower peak memory
// (the reentrant scheme of torch.utils.checkpoint).
#pragma once

#include <functional>

#include "util/torch_compat.h"

namespace hftrain {

// Runs `block(x)`, storing only `x` for backward when grad mode is on.
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&)>& block, const torch::Tensor& x);

// Runs `block(x, memory)` the same way, for blocks with a second input that needs its gradient too (an
// encoder-decoder's decoder block reads the encoder output): both inputs are stored, and backward returns
// a gradient for each.
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& block,
                           const torch::Tensor& x, const torch::Tensor& memory);

}  // namespace hftrain
