// The routed mixture-of-experts block and the load-balancing loss (see moe.h). Follows HF's sparse MoE
// blocks: router logits in the compute dtype, softmax over experts in float32, top-k, renormalised where
// asked, the weights cast back to the compute dtype and multiplying each expert's output.
#include "models/moe.h"

#include <torch/csrc/autograd/custom_function.h>

#include "models/construction.h"
#include "models/fused_activations.h"
#include "models/hf_layers.h"
#include "util/error.h"

namespace hftrain {
namespace {

// A zero added to a recomputed block's output whose backward gives the recomputed router logits the gradient
// that the load-balancing loss left in the block's leaf (RouterRecord::leaves), whatever reaches the output.
class LeafGradient : public torch::autograd::Function<LeafGradient> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor logits, int64_t record, int64_t slot) {
    ctx->saved_data["record"] = record;
    ctx->saved_data["slot"] = slot;
    return torch::zeros({}, logits.options());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list) {
    const auto* record = reinterpret_cast<const RouterRecord*>(ctx->saved_data["record"].toInt());
    const torch::Tensor& leaf = record->leaves.at(static_cast<std::size_t>(ctx->saved_data["slot"].toInt()));
    return {leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

Expert::Expert(const MoeSpec& s) : act_(s.hidden_act) {
  gate_ = register_module(s.gate_name, new_linear(s.hidden_size, s.expert_size, false));
  up_ = register_module(s.up_name, new_linear(s.hidden_size, s.expert_size, false));
  down_ = register_module(s.down_name, new_linear(s.expert_size, s.hidden_size, false));
}

torch::Tensor Expert::forward(const torch::Tensor& x) {
  const bool silu = act_ == "silu" || act_ == "swish";
  const torch::Tensor gate = gate_(x), up = up_(x);
  return down_(silu ? silu_gated(gate, up) : apply_activation(act_, gate) * up);
}

SparseMoe::SparseMoe(MoeSpec spec) : spec_(std::move(spec)) {
  const MoeSpec& s = spec_;
  gate_ = register_module("gate", new_linear(s.hidden_size, s.experts, false));
  auto experts = register_module("experts", std::make_shared<torch::nn::Module>());
  for (int64_t e = 0; e < s.experts; ++e)
    experts_.push_back(experts->register_module(std::to_string(e), std::make_shared<Expert>(s)));
  if (s.shared_expert_size > 0) {
    shared_expert_ = register_module("shared_expert",
                                     std::make_shared<GatedMlp>(s.hidden_size, s.shared_expert_size, s.hidden_act, false, false));
    shared_expert_gate_ = register_module("shared_expert_gate", new_linear(s.hidden_size, 1, false));
  }
}

torch::Tensor SparseMoe::forward(const torch::Tensor& input) {
  const auto shape = input.sizes().vec();
  torch::Tensor x = input.reshape({-1, spec_.hidden_size});
  if (is_training() && spec_.jitter_noise > 0)  // Mixtral: router and experts read the jittered input
    x = x * torch::empty_like(x).uniform_(1.0 - spec_.jitter_noise, 1.0 + spec_.jitter_noise);
  const torch::Tensor logits = gate_(x);
  RouterRecord* record = spec_.record.get();
  if (record && record->recording) {
    record_slot_ = record->logits.size();
    record->logits.push_back(logits);
  }
  torch::Tensor y = routed(x, logits);
  if (shared_expert_) y = y + torch::sigmoid(shared_expert_gate_(x)) * shared_expert_->forward(x);
  // backward's recomputation of a checkpointed layer: the load-balancing loss's gradient joins the logits'
  if (record && !record->recording && record_slot_ < record->leaves.size() && logits.requires_grad())
    y = y + LeafGradient::apply(logits, reinterpret_cast<int64_t>(record), static_cast<int64_t>(record_slot_));
  return y.view(shape);
}

torch::Tensor SparseMoe::routed(const torch::Tensor& x, const torch::Tensor& logits) {
  const int64_t k = spec_.top_k;
  auto [weights, chosen] = torch::softmax(logits, -1, torch::kFloat).topk(k, -1);
  if (spec_.normalise_top_k) weights = weights / weights.sum(-1, true);
  weights = weights.to(x.scalar_type());
  // Token slots (token, choice) sorted by expert; each expert's run of slots goes through it in one GEMM.
  const torch::Tensor flat = chosen.reshape({-1});
  const torch::Tensor order = std::get<1>(flat.sort(c10::optional<bool>(true), 0, false));  // stable: slots in token order
  const torch::Tensor token = order.div(k, "floor");
  const torch::Tensor counts = torch::bincount(flat, {}, spec_.experts).to(torch::kCPU);
  if (spec_.record && spec_.record->counting) count_slots(chosen, counts);
  const torch::Tensor rows = x.index_select(0, token);
  torch::Tensor outputs;
  ExpertParallel* parallel = spec_.record ? spec_.record->expert_parallel.get() : nullptr;
  if (parallel && (is_training() || parallel->sharded())) {
    const int64_t local = spec_.experts / parallel->size(), first = parallel->rank() * local;
    outputs = parallel->run(rows, counts,
                            [this](const torch::Tensor& r, int64_t f, const std::vector<int64_t>& n) { return run_experts(r, f, n); },
                            "expert-parallel rows");
    if (!parallel->sharded())  // sharded: the other members' experts hold no memory here and take no gradient
      outputs = torch::cat({outputs, idle_experts(x, 0, first), idle_experts(x, first + local, spec_.experts - first - local)}, 0);
  } else {
    const int64_t* count = counts.data_ptr<int64_t>();
    outputs = run_experts(rows, 0, std::vector<int64_t>(count, count + spec_.experts));
  }
  const torch::Tensor weighted = outputs * weights.reshape({-1}).index_select(0, order).unsqueeze(1);
  return torch::zeros_like(x).index_add(0, token, weighted.to(x.scalar_type()));
}

torch::Tensor SparseMoe::run_experts(const torch::Tensor& rows, int64_t first, const std::vector<int64_t>& per_expert) {
  // split, not narrow: split's backward is one concatenation, narrow's a zero-filled copy of all rows per expert
  const std::vector<torch::Tensor> inputs = rows.split_with_sizes(per_expert);
  std::vector<torch::Tensor> outputs;
  // An expert without rows still runs: a zero gradient. The engine relies on it: every parameter a rank holds gets
  // a gradient in every pass, so each rank fills and reduces all its buckets in the same order (with the experts
  // apart, its member's buckets over their own communicator beside the world's); skipping an idle expert here could
  // leave one rank waiting in a bucket's collective while another waits in the next expert exchange.
  for (std::size_t i = 0; i < inputs.size(); ++i)
    outputs.push_back(experts_[static_cast<std::size_t>(first) + i]->forward(inputs[i]));
  return torch::cat(outputs, 0);
}

torch::Tensor SparseMoe::idle_experts(const torch::Tensor& x, int64_t first, int64_t count) {
  std::vector<torch::Tensor> outputs{x.narrow(0, 0, 0)};
  for (int64_t e = first; e < first + count; ++e) outputs.push_back(experts_[static_cast<std::size_t>(e)]->forward(x.narrow(0, 0, 0)));
  return torch::cat(outputs, 0);
}

void SparseMoe::count_slots(const torch::Tensor& chosen, const torch::Tensor& counts) {
  RouterRecord& record = *spec_.record;
  torch::Tensor slots = counts.to(torch::kFloat64);
  if (record.token_mask.defined()) {
    if (record.token_mask.numel() != chosen.size(0))
      throw RuntimeFailure("MoE expert counts: the batch's attention_mask has " + std::to_string(record.token_mask.numel()) +
                           " entries, the routed block " + std::to_string(chosen.size(0)) + " tokens");
    const torch::Tensor per_slot = record.token_mask.to(chosen.device(), torch::kFloat64).repeat_interleave(spec_.top_k);
    slots = torch::bincount(chosen.reshape({-1}), per_slot, spec_.experts).to(torch::kCPU, torch::kFloat64);
  }
  record.expert_slots = record.expert_slots.defined() ? record.expert_slots + slots : slots;
}

torch::Tensor load_balancing_loss(const std::vector<torch::Tensor>& logits, int64_t experts, int64_t top_k,
                                  const torch::Tensor& mask) {
  const torch::Tensor all = torch::cat(logits, 0);
  const torch::Tensor probs = torch::softmax(all, -1, torch::kFloat);  // 16-bit logits too: in float32
  const torch::Tensor chosen = std::get<1>(probs.topk(top_k, -1));
  const torch::Tensor routed = torch::one_hot(chosen, experts).to(probs.scalar_type());  // [tokens, k, experts]
  // each layer's tokens in the batch's order: the mask repeats per layer
  const torch::Tensor token_mask =
      mask.defined() ? mask.reshape({-1}).to(probs.options()).repeat({static_cast<int64_t>(logits.size())})
                     : torch::ones({all.size(0)}, probs.options());
  const torch::Tensor tokens = token_mask.sum();
  const torch::Tensor per_expert = (routed * token_mask.view({-1, 1, 1})).sum(0) / tokens;    // [k, experts]
  const torch::Tensor prob_per_expert = (probs * token_mask.view({-1, 1})).sum(0) / tokens;  // [experts]
  return (per_expert * prob_per_expert.unsqueeze(0)).sum() * static_cast<double>(experts);
}

}  // namespace hftrain
