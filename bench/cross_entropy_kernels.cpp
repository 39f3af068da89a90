// Micro-benchmark of the fused cross-entropy (kernels/cross_entropy.h) against the LibTorch ops the chunked LM
// loss used before it (logsumexp, gather, sub, exp, scatter_add, mul): loss and gradient of [rows x vocab] fp32
// logits, in ms per call, medians of 7 timings. Shapes: a GPT-2 step's scored tokens (1020 x 50304), a
// llama-shaped step's (1020 x 32000), a nanoGPT step's (756 x 65).
//   build/cross_entropy_kernels_bench [threads]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cross_entropy.h"
#include "median_timing.h"
#include "util/parallel.h"

namespace {

using hftrain_bench::median_ms;

void run_shape(const char* name, int64_t rows, int64_t vocab, int calls) {
  torch::manual_seed(0);
  const auto z0 = torch::randn({rows, vocab}) * 3;
  const auto labels = torch::randint(0, vocab, {rows}, torch::kLong);
  const auto yc = labels.unsqueeze(1);
  const double scale = 1.0 / static_cast<double>(rows);
  auto z = z0.clone();
  const double ops = median_ms(
      [&] {
        z.copy_(z0);
        const auto lse = z.logsumexp(1, true);
        const auto loss = ((lse - z.gather(1, yc)).sum());
        auto g = z.sub_(lse).exp_();
        g.scatter_add_(1, yc, torch::full({rows, 1}, -1.0, g.options()));
        g.mul_(scale);
      },
      calls);
  auto loss = torch::empty({rows});
  const double fused = median_ms(
      [&] {
        z.copy_(z0);
        hftrain::kernels::CrossEntropyRows p;
        p.logits = z.data_ptr<float>();
        p.rows = rows;
        p.vocab = vocab;
        p.labels = labels.data_ptr<int64_t>();
        p.scale = static_cast<float>(scale);
        p.gradient = true;
        hftrain::kernels::cross_entropy_rows(p, loss.data_ptr<float>());
      },
      calls);
  const double copy = median_ms([&] { z.copy_(z0); }, calls);
  std::printf("%-8s %5lld x %5lld  LibTorch ops %8.3f ms  fused %8.3f ms  (each includes a %.3f ms copy of the logits)  %.2fx\n",
              name, static_cast<long long>(rows), static_cast<long long>(vocab), ops, fused, copy, (ops - copy) / (fused - copy));
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  at::set_num_threads(threads);
  hftrain::sync_parallel_threads();
  std::printf("%d thread(s); the ratio is of the times without the copy\n", threads);
  run_shape("GPT-2", 1020, 50304, 3);
  run_shape("llama", 1020, 32000, 5);
  run_shape("nanoGPT", 756, 65, 200);
}
