// Micro-benchmark of the fused attention kernels (kernels/attention.h) against LibTorch's ops (matmul, masked
// softmax, matmul, and their autograd backward): ms per call and GFLOP/s of forward and backward at the nanoGPT
// shape (batch 12, 4 heads, 64 positions, head dim 32) and the GPT-2 shape (batch 4, 12 heads, 256, 64), both
// causal, q/k/v as views of one fused [B, T, 3C] projection as the models pass them. Medians of 7 timings.
// FLOPs counted: the products needed under the causal mask (2 forward; 5 backward, the scores recomputed),
// 2 * dim per visible (query, key) pair each.
//   build/attention_kernels_bench [threads [isa]]   (isa: only that instruction set, no LibTorch row)
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kernel_choice.h"
#include "median_timing.h"
#include "models/fused_attention.h"
#include "util/parallel.h"

namespace {

using hftrain_bench::median_ms;

namespace k = hftrain::kernels;
using hftrain::head_layout;

void run_shape(const char* name, int64_t B, int64_t H, int64_t T, int64_t d, int calls, const std::string& only) {
  torch::manual_seed(0);
  const int64_t C = H * d;
  auto qkv = torch::randn({B, T, 3 * C});
  auto heads = [&](int64_t i) { return qkv.narrow(2, i * C, C).view({B, T, H, d}).transpose(1, 2); };
  const torch::Tensor q = heads(0), kk = heads(1), v = heads(2);
  auto o = torch::empty({B, T, H, d}).transpose(1, 2), d_o = torch::randn({B, T, H, d}).transpose(1, 2);
  auto dq = torch::empty_like(o), dk = torch::empty_like(o), dv = torch::empty_like(o);
  auto lse = torch::empty({B, H, T});
  k::AttentionShape s;
  s.batch = B, s.heads = H, s.queries = T, s.keys = T, s.dim = d, s.causal = true;
  s.scale = 1.0f / std::sqrt(static_cast<float>(d));
  const double pairs = static_cast<double>(B * H) * T * (T + 1) / 2, product = 2.0 * d * pairs;

  if (only.empty()) {  // LibTorch's ops, as the models' unfused path computes them
    auto mask = torch::ones({T, T}, torch::kBool).triu(1);
    auto qg = q.detach().clone().requires_grad_(true), kg = kk.detach().clone().requires_grad_(true),
         vg = v.detach().clone().requires_grad_(true);
    auto forward = [&] {
      auto att = torch::matmul(qg, kg.transpose(-2, -1)) * s.scale;
      return torch::matmul(torch::softmax(att.masked_fill(mask, -INFINITY), -1), vg);
    };
    const double fwd = median_ms(
        [&] {
          torch::NoGradGuard no_grad;
          forward();
        },
        calls);
    const double both = median_ms([&] { forward().backward(d_o); }, calls);
    std::printf("%-7s torch ops      forward %8.3f ms %6.1f GFLOP/s   backward %8.3f ms %6.1f GFLOP/s\n", name, fwd,
                2 * product / fwd / 1e6, both - fwd, 5 * product / (both - fwd) / 1e6);
  }
  for (const std::string& isa : k::model_kernel_isas()) {
    if (!only.empty() && isa != only) continue;
    k::set_model_kernel_isa(isa);
    const double fwd = median_ms(
        [&] {
          k::attention_forward(s, head_layout(q), head_layout(kk), head_layout(v), head_layout(o), lse.data_ptr<float>());
        },
        calls);
    const double bwd = median_ms(
        [&] {
          k::attention_backward(s, head_layout(q), head_layout(kk), head_layout(v), head_layout(o), head_layout(d_o),
                                lse.data_ptr<float>(), head_layout(dq), head_layout(dk), head_layout(dv));
        },
        calls);
    std::printf("%-7s fused %-8s forward %8.3f ms %6.1f GFLOP/s   backward %8.3f ms %6.1f GFLOP/s\n", name, isa.c_str(), fwd,
                2 * product / fwd / 1e6, bwd, 5 * product / bwd / 1e6);
  }
  k::set_model_kernel_isa("");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const std::string only = argc > 2 ? argv[2] : "";
  at::set_num_threads(threads);
  hftrain::sync_parallel_threads();
  std::printf("%d thread(s)\n", threads);
  run_shape("nanoGPT", 12, 4, 64, 32, 40, only);
  run_shape("GPT-2", 4, 12, 256, 64, 4, only);
}
