// Micro-benchmark of the matrix products of a transformer step: LibTorch's matmul (OpenBLAS on Debian) against
// kernels::sgemm (oneDNN), on the intra-op threads, for nanoGPT's shapes (768 tokens, width 128) and GPT-2's
// (1024 tokens, width 768, an LM-head chunk of 8192 entries). Medians of 5 timings; microseconds and GFLOP/s.
//   build/gemm_shapes_bench [threads]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/gemm.h"
#include "median_timing.h"

namespace {

struct Shape {
  const char* what;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// Microseconds per call: the median of 5 timings.
template <class Fn>
double median_us(Fn fn, int calls) { return 1e3 * hftrain_bench::median_ms(fn, calls, 5); }

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 2);
  if (!hftrain::kernels::gemm_available()) {
    std::printf("this build has no oneDNN\n");
    return 1;
  }
  const std::vector<Shape> shapes = {
      {"nanoGPT qkv forward", 768, 384, 128, false, true},   {"nanoGPT fc forward", 768, 512, 128, false, true},
      {"nanoGPT proj forward", 768, 128, 512, false, true},  {"nanoGPT qkv dX", 768, 128, 384, false, false},
      {"nanoGPT qkv dW", 384, 128, 768, true, false},        {"GPT-2 qkv forward", 1024, 2304, 768, false, true},
      {"GPT-2 qkv dX", 1024, 768, 2304, false, false},       {"GPT-2 fc dW", 3072, 768, 1024, true, false},
      {"GPT-2 head chunk forward", 1024, 8192, 768, false, true}};
  for (const Shape& s : shapes) {
    torch::manual_seed(0);
    const auto a = s.trans_a ? torch::randn({s.k, s.m}) : torch::randn({s.m, s.k});
    const auto b = s.trans_b ? torch::randn({s.n, s.k}) : torch::randn({s.k, s.n});
    auto c = torch::empty({s.m, s.n});
    const auto oa = s.trans_a ? a.t() : a, ob = s.trans_b ? b.t() : b;
    const int calls = s.m * s.n * s.k > 100000000 ? 3 : 50;
    const double torch_us = median_us([&] { torch::mm_out(c, oa, ob); }, calls);
    const auto reference = torch::mm(oa, ob);
    const double onednn_us = median_us(
        [&] {
          hftrain::kernels::sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data_ptr<float>(), a.size(1),
                                  b.data_ptr<float>(), b.size(1), 0.0f, c.data_ptr<float>(), s.n);
        },
        calls);
    const double flop = 2.0 * s.m * s.n * s.k;
    std::printf("%-26s %5ld x %5ld x %5ld  LibTorch mm %9.1f us (%4.0f GFLOP/s)  oneDNN %9.1f us (%4.0f GFLOP/s)  %.2fx  "
                "max |diff| %.1e\n",
                s.what, s.m, s.n, s.k, torch_us, flop / torch_us / 1e3, onednn_us, flop / onednn_us / 1e3, torch_us / onednn_us,
                (c - reference).abs().max().item<double>());
  }
}
