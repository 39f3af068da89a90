// Micro-benchmark of the fused rotary embedding (models/fused_rotary over kernels/rotary.h) against LibTorch's ops
// (t * cos + rotate_half(t) * sin, HF's apply_rotary_pos_emb) in one process: forward and forward + backward of q's
// rotation for one Llama layer (batch 4, 512 tokens, 32 heads of 64, the transposed head view the decoder passes),
// fp32 and bf16 heads with fp32 tables, on this machine's intra-op threads; the median of 7 timings of 20 calls each
// and the ratio ops / fused.
//   build/rotary_kernels_bench
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "kernels/kernel_choice.h"
#include "models/fused_rotary.h"

namespace {

template <class Fn>
double median_ms(Fn fn) {
  std::vector<double> samples;
  fn();  // warm-up
  for (int rep = 0; rep < 7; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) fn();
    samples.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 20);
  }
  std::sort(samples.begin(), samples.end());
  return samples[3];
}

}  // namespace

int main() {
  namespace k = hftrain::kernels;
  const int64_t B = 4, T = 512, H = 32, d = 64;
  torch::manual_seed(0);
  const auto angle = torch::rand({1, 1, T, d / 2}) * 100;
  const auto cos = torch::cat({angle.cos(), angle.cos()}, -1), sin = torch::cat({angle.sin(), angle.sin()}, -1);
  std::printf("rotary of q [%ld, %ld, %ld, %ld], %d intra-op threads\n", static_cast<long>(B), static_cast<long>(H),
              static_cast<long>(T), static_cast<long>(d), at::get_num_threads());
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const auto x = torch::randn({B, T, H, d}).to(dtype);
    const auto dy = torch::randn({B, H, T, d});
    double ms[2][2];
    for (const bool fused : {true, false}) {
      k::set_fused_kernels_enabled(fused);
      ms[fused][0] = median_ms([&] {
        torch::NoGradGuard no_grad;
        hftrain::apply_rotary(x.transpose(1, 2), cos, sin);
      });
      ms[fused][1] = median_ms([&] {
        auto leaf = x.detach().requires_grad_(true);
        hftrain::apply_rotary(leaf.transpose(1, 2), cos, sin).backward(dy);
      });
    }
    k::set_fused_kernels_enabled(true);
    std::printf("%-8s forward: ops %.3f ms, fused %.3f ms (%.2fx); forward + backward: ops %.3f ms, fused %.3f ms (%.2fx)\n",
                dtype == torch::kFloat ? "fp32" : "bf16", ms[0][0], ms[1][0], ms[0][0] / ms[1][0], ms[0][1], ms[1][1],
                ms[0][1] / ms[1][1]);
  }
}
