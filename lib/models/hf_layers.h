// Building blocks shared by the HF model families (gpt2, bert, llama): attention (manual on LibTorch
// 1.13, scaled_dot_product_attention on 2.x), HF activations by config name, HF _init_weights, the
// additive padding mask, and base-model-prefix handling for HF checkpoints.
#pragma once

#include <deque>
#include <functional>
#include <string>

#include "models/model.h"
#include "util/torch_compat.h"

namespace hftrain {

// HF ACT2FN names: gelu (erf), gelu_new / gelu_pytorch_tanh (tanh approximation), relu, silu / swish.
// Throws ConfigError naming `option` for other names.
void check_activation(const std::string& name, const std::string& option);
torch::Tensor apply_activation(const std::string& name, const torch::Tensor& x);

// Additive attention bias [B, 1, 1, T] from an attention_mask [B, T] (1 = token): 0 where attended,
// the float minimum where padding (HF's extended attention mask). Undefined in, undefined out.
torch::Tensor padding_bias(const torch::Tensor& attention_mask, torch::ScalarType dtype);

// softmax(q k^T / sqrt(d) + bias [+ causal]) v for q [B, H, Tq, D], k/v [B, H, Tk, D]; `bias` is
// additive and broadcastable to [B, H, Tq, Tk] or undefined; dropout on the probabilities when p > 0.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& bias,
                     bool causal, double dropout_p);

// HF _init_weights for Linear / Embedding / LayerNorm-like parameters selected by name, as one pass over
// every parameter (Model::initialise_parameters): weights N(0, std), biases 0, norm weights 1 (names
// containing one of `norm_markers`).
InitPass hf_init_pass(double std, const std::vector<std::string>& norm_markers);

// RMSNorm as in HF Llama: x * rsqrt(mean(x^2) + eps) computed in float32, times weight.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// A parameter-holding module with the HF Conv1D layout: weight [in, out], y = x W + b.
struct Conv1D : torch::nn::Module {
  Conv1D(int64_t in, int64_t out);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
};

// Owns the per-forward block functions handed to checkpointed(), which keeps only their address until
// backward: the functions of the last `keep` blocks run stay alive (deque: stable references).
class CheckpointFunctions {
 public:
  using Fn = std::function<torch::Tensor(const torch::Tensor&)>;
  const Fn& hold(Fn fn, std::size_t keep) {
    fns_.push_back(std::move(fn));
    while (fns_.size() > keep) fns_.pop_front();
    return fns_.back();
  }
  // The same for blocks with a second input (checkpointed(block, x, memory)).
  using MemoryFn = std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>;
  const MemoryFn& hold(MemoryFn fn, std::size_t keep) {
    memory_fns_.push_back(std::move(fn));
    while (memory_fns_.size() > keep) memory_fns_.pop_front();
    return memory_fns_.back();
  }

 private:
  std::deque<Fn> fns_;
  std::deque<MemoryFn> memory_fns_;
};

}  // namespace hftrain
