// Micro-benchmark of the routed experts' compute, forward and backward, side by side in one run: hftrain's routed
// block (models/moe: token slots sorted by expert, one GEMM per expert and projection over its slots, one index_add)
// against the same routing computed as transformers' Mixtral block does it (a loop over experts, each finding its
// tokens with a mask, gathering them and adding its weighted output back: one gather and one index_add per expert),
// and against a dense masked loop (every expert over every token, its output weighted by the routing weight, zero for
// tokens that did not choose it: E / k times the FLOPs). The three use the same weights and routing; their outputs
// are compared before timing. Medians of 7 timings.
//   build/moe_grouped_bench [tokens] [hidden] [inner] [experts] [top_k] [threads]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "median_timing.h"
#include "models/moe.h"

namespace {

using hftrain_bench::median_ms;

struct Weights {
  torch::Tensor gate;                  // [experts, hidden]
  std::vector<torch::Tensor> w1, w3, w2;  // per expert: [inner, hidden], [inner, hidden], [hidden, inner]
};

torch::Tensor expert(const Weights& w, int64_t e, const torch::Tensor& x) {
  return torch::linear(torch::silu(torch::linear(x, w.w1[e])) * torch::linear(x, w.w3[e]), w.w2[e]);
}

// Routing weights [tokens, experts]: the renormalised top-k softmax weights, 0 for experts a token did not choose.
torch::Tensor routing(const Weights& w, const torch::Tensor& x, int64_t k) {
  auto [top, chosen] = torch::softmax(torch::linear(x, w.gate), -1, torch::kFloat).topk(k, -1);
  top = top / top.sum(-1, true);
  return torch::zeros({x.size(0), w.gate.size(0)}).scatter(1, chosen, top);
}

// transformers' MixtralSparseMoeBlock loop: each expert gathers the tokens that chose it.
torch::Tensor per_expert_loop(const Weights& w, const torch::Tensor& x, int64_t k) {
  const torch::Tensor r = routing(w, x, k);
  torch::Tensor y = torch::zeros_like(x);
  for (int64_t e = 0; e < w.gate.size(0); ++e) {
    const torch::Tensor tokens = r.select(1, e).nonzero().squeeze(1);
    if (tokens.numel() == 0) continue;
    const torch::Tensor out = expert(w, e, x.index_select(0, tokens)) * r.select(1, e).index_select(0, tokens).unsqueeze(1);
    y = y.index_add(0, tokens, out);
  }
  return y;
}

// Every expert over every token, weighted by the routing weight (0 where not chosen).
torch::Tensor dense_masked_loop(const Weights& w, const torch::Tensor& x, int64_t k) {
  const torch::Tensor r = routing(w, x, k);
  torch::Tensor y = torch::zeros_like(x);
  for (int64_t e = 0; e < w.gate.size(0); ++e) y = y + expert(w, e, x) * r.select(1, e).unsqueeze(1);
  return y;
}

Weights weights_of(hftrain::SparseMoe& block, int64_t experts) {
  auto p = block.named_parameters();
  Weights w;
  w.gate = p["gate.weight"];
  for (int64_t e = 0; e < experts; ++e) {
    const std::string x = "experts." + std::to_string(e) + ".";
    w.w1.push_back(p[x + "w1.weight"]), w.w3.push_back(p[x + "w3.weight"]), w.w2.push_back(p[x + "w2.weight"]);
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 2048, hidden = argc > 2 ? std::atoll(argv[2]) : 512;
  const int64_t inner = argc > 3 ? std::atoll(argv[3]) : 704, experts = argc > 4 ? std::atoll(argv[4]) : 8;
  const int64_t k = argc > 5 ? std::atoll(argv[5]) : 2;
  if (argc > 6) torch::set_num_threads(std::atoi(argv[6]));
  hftrain::MoeSpec spec;
  spec.hidden_size = hidden, spec.expert_size = inner, spec.experts = experts, spec.top_k = k;
  spec.gate_name = "w1", spec.up_name = "w3", spec.down_name = "w2";
  torch::manual_seed(3);
  hftrain::SparseMoe block(spec);
  block.train();
  const Weights w = weights_of(block, experts);
  const torch::Tensor x = torch::randn({tokens, hidden}).requires_grad_(), dy = torch::randn({tokens, hidden});
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor grouped = block.forward(x);
    std::printf("max |difference| against the grouped block: per-expert loop %.2e, dense masked loop %.2e\n",
                (per_expert_loop(w, x, k) - grouped).abs().max().item<double>(),
                (dense_masked_loop(w, x, k) - grouped).abs().max().item<double>());
  }
  auto step = [&](auto forward) {
    return median_ms([&] {
      block.zero_grad();
      forward().backward(dy);
    }, 1);
  };
  const double grouped = step([&] { return block.forward(x); });
  const double loop = step([&] { return per_expert_loop(w, x, k); });
  const double dense = step([&] { return dense_masked_loop(w, x, k); });
  std::printf("%lld tokens, hidden %lld, %lld experts of inner %lld, top-%lld, %d threads: forward + backward\n",
              static_cast<long long>(tokens), static_cast<long long>(hidden), static_cast<long long>(experts),
              static_cast<long long>(inner), static_cast<long long>(k), torch::get_num_threads());
  std::printf("  grouped (hftrain)        %8.2f ms\n", grouped);
  std::printf("  per-expert loop (HF)     %8.2f ms   %.3fx the grouped time\n", loop, loop / grouped);
  std::printf("  dense masked loop        %8.2f ms   %.3fx the grouped time\n", dense, dense / grouped);
  return 0;
}
