// Activation (gradient) checkpointing for one block: the forward pass keeps only the block's input;
// backward recomputes the block (with the forward's RNG state, so dropout masks repeat) and
// backpropagates through the recomputation. Same gradients, lower peak memory
// (the reentrant scheme of torch.utils.checkpoint).
#pragma once

#include <functional>

#include "util/torch_compat.h"

namespace hftrain {

// Where checkpointed() keeps each block's input between forward and backward on this thread. Under an
// ActivationOffloadScope (training.gradient_checkpointing_offload; DeepSpeed's cpu_checkpointing, ALST's
// activation_checkpoint_cpu_offload) the input is copied to host memory and brought back to its device for the
// recomputation, from a CUDA device on a side stream that overlaps compute (activation_copies.h); a CPU input
// already lives in host memory and is copied within it, through the same path. Like torch.autograd.graph.save_on_cpu, the scope
// matters while the forward runs; backward finds the input wherever forward put it.
class ActivationOffloadScope {
 public:
  explicit ActivationOffloadScope(bool offload);
  ~ActivationOffloadScope();
  ActivationOffloadScope(const ActivationOffloadScope&) = delete;
  ActivationOffloadScope& operator=(const ActivationOffloadScope&) = delete;

 private:
  bool previous_;
};

// Whether checkpointed() on this thread keeps block inputs in host memory now.
bool activation_offload_active();

// Runs `block(x)`, storing only `x` for backward when grad mode is on.
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&)>& block, const torch::Tensor& x);

// Runs `block(x, memory)` the same way, for blocks with a second input that needs its gradient too (an
// encoder-decoder's decoder block reads the encoder output): both inputs are stored, and backward returns
// a gradient for each.
torch::Tensor checkpointed(const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& block,
                           const torch::Tensor& x, const torch::Tensor& memory);

// ALST's tiled MLP (Arctic Long Sequence Training, arXiv:2506.13996; DeepSpeed's TiledMLP): a per-token
// `block` over x [B, T, H] run on `tiles` consecutive slices of the T positions, each checkpointed, so the
// block's intermediate activations (a gated MLP's [B, T, intermediate] products) exist for one slice at a time
// in forward and in backward. Same output and gradients as block(x) up to the GEMMs' rounding. `block` must
// live until backward (its address is kept).
torch::Tensor tiled_over_tokens(const std::function<torch::Tensor(const torch::Tensor&)>& block, const torch::Tensor& x,
                                int64_t tiles);

// DeepSpeed's automatic tile count: ceil(T / hidden size), at least 1.
int64_t auto_token_tiles(int64_t tokens, int64_t hidden);

}  // namespace hftrain
