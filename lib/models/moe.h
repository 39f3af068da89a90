// A routed mixture-of-experts feed-forward block (HF's MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock,
// Qwen3MoeSparseMoeBlock), written once: a router `gate` (hidden -> experts, no bias) whose float32 softmax
// picks each token's top-k experts (their weights renormalised to sum to 1 where the family says), experts
// that are gated MLPs down(act(gate(x)) * up(x)) under the family's names, and, for Qwen2-MoE, a shared
// expert scaled by sigmoid(shared_expert_gate(x)). Dropless. The experts run grouped: the token slots are
// sorted by expert and each expert takes its slots in one GEMM per projection (a loop over experts, never over
// tokens), the weighted results scattered back with one index_add. Every expert a rank holds runs, on its slots or
// on none, so an expert no token chose still gets a (zero) gradient and every rank reduces the same tensors (with
// expert data parallelism a rank holds, and runs, only its member's experts).
// Also HF's load_balancing_loss_func over the router logits the blocks recorded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/decoder.h"
#include "models/expert_parallel.h"

namespace hftrain {

// What the MoE blocks of one model share: where they put their router logits [tokens, experts] while the model asks
// for them (the load-balancing loss), one entry per MoE layer in forward order; the slots each expert took; the
// expert-parallel group.
struct RouterRecord {
  bool recording = false;
  std::vector<torch::Tensor> logits;
  // While `counting` (the model's own forward, not backward's recomputation of a checkpointed layer), each block
  // adds the top-k slots its experts took to `expert_slots` [experts] (float64, CPU; summed over the MoE layers),
  // tokens whose `token_mask` [tokens] entry is 0 (padding) left out; an undefined mask counts every token.
  bool counting = false;
  torch::Tensor token_mask;
  torch::Tensor expert_slots;
  // Gradient checkpointing: a checkpointed layer's first forward keeps no autograd graph, so the loss is taken
  // over leaf copies of its router logits (one per MoE layer, in `logits`' order); when backward recomputes the
  // layer, its block hands its leaf's gradient on to the recomputed logits. Empty otherwise.
  std::vector<torch::Tensor> leaves;
  // Expert parallelism (distributed.expert_parallel_size): set, training forwards run each block's experts on the
  // members of this group (models/expert_parallel.h); null = every expert runs here. Evaluation and generation
  // run every expert here while every rank holds every expert, and on the members too when the engine shards them
  // (ExpertParallel::sharded).
  std::shared_ptr<ExpertParallel> expert_parallel;
};

// One routed block's shape and HF names.
struct MoeSpec {
  int64_t hidden_size = 0, expert_size = 0, experts = 0, top_k = 0;
  bool normalise_top_k = true;        // Mixtral always; Qwen's norm_topk_prob
  std::string hidden_act = "silu";
  std::string gate_name = "gate_proj", up_name = "up_proj", down_name = "down_proj";  // Mixtral: w1, w3, w2
  double jitter_noise = 0.0;          // Mixtral's router_jitter_noise: the input times U(1 - eps, 1 + eps) in training
  int64_t shared_expert_size = 0;     // Qwen2-MoE's shared expert; 0 = none
  std::shared_ptr<RouterRecord> record;  // null = logits never kept
};

// One expert: down(act(gate(x)) * up(x)) with the family's names for the three projections.
class Expert : public torch::nn::Module {
 public:
  Expert(const MoeSpec& spec);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  std::string act_;
  AdaptableLinear gate_{nullptr}, up_{nullptr}, down_{nullptr};
};

class SparseMoe : public FeedForward {
 public:
  explicit SparseMoe(MoeSpec spec);
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  torch::Tensor routed(const torch::Tensor& x, const torch::Tensor& logits);  // x, logits: [tokens, ...]
  void count_slots(const torch::Tensor& chosen, const torch::Tensor& counts);  // chosen [tokens, k]; counts: its bincount
  // Experts [first, first + per_expert.size()) over `rows`, per_expert[i] consecutive rows each, in one GEMM per
  // expert and projection; the outputs in the rows' order.
  torch::Tensor run_experts(const torch::Tensor& rows, int64_t first, const std::vector<int64_t>& per_expert);
  // Under expert parallelism: the experts this rank holds but does not run, on no rows, so that their parameters get
  // a (zero) gradient like every other and each rank reduces the same tensors. [0, hidden].
  torch::Tensor idle_experts(const torch::Tensor& x, int64_t first, int64_t count);
  MoeSpec spec_;
  AdaptableLinear gate_{nullptr}, shared_expert_gate_{nullptr};
  std::vector<std::shared_ptr<Expert>> experts_;
  std::size_t record_slot_ = 0;  // this block's entry in the record's logits / leaves
  std::shared_ptr<GatedMlp> shared_expert_;
};

// HF's load_balancing_loss_func: with every layer's router logits (their tokens concatenated), the share of
// tokens routed to each expert (per top-k slot) times the expert's mean router probability, summed, times the
// number of experts. `mask` [B, T] (1 = token) leaves padding out, as HF's attention_mask does; undefined =
// every token counts.
torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& logits, int64_t experts, int64_t top_k,
                                  const torch::Tensor& mask);

}  // namespace hftrain
