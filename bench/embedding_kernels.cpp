// Micro-benchmark of the fused embedding (kernels/embedding.h) against LibTorch's embedding and
// embedding_dense_backward: the gather of one step's token rows and the dense gradient of the whole table, in ms
// per call, medians of 7 timings. Shapes: a GPT-2 step (1024 tokens over 50304 x 768), a llama-shaped step
// (1024 over 32000 x 512), a nanoGPT step (768 over 65 x 128).
//   build/embedding_kernels_bench [threads]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

#include "kernels/embedding.h"
#include "median_timing.h"
#include "util/parallel.h"

namespace {

using hftrain_bench::median_ms;

void run_shape(const char* name, int64_t positions, int64_t rows, int64_t cols, int calls) {
  torch::manual_seed(0);
  const auto table = torch::randn({rows, cols});
  const auto ids = torch::randint(0, rows, {positions}, torch::kLong);
  const auto dy = torch::randn({positions, cols});
  const double gather_ops = median_ms([&] { torch::embedding(table, ids); }, calls);
  auto out = torch::empty({positions, cols});
  const double gather_fused = median_ms(
      [&] {
        hftrain::kernels::embedding_gather(table.data_ptr(), hftrain::kernels::TableType::kFloat, ids.data_ptr<int64_t>(),
                                           positions, cols, out.data_ptr());
      },
      calls);
  const double scatter_ops = median_ms([&] { torch::embedding_dense_backward(dy, ids, rows, -1, false); }, calls);
  auto grad = torch::empty({rows, cols});
  const double scatter_fused = median_ms(
      [&] {
        hftrain::kernels::embedding_scatter(dy.data_ptr(), hftrain::kernels::TableType::kFloat, ids.data_ptr<int64_t>(),
                                            positions, cols, rows, -1, grad.data_ptr());
      },
      calls);
  const bool same = torch::equal(grad, torch::embedding_dense_backward(dy, ids, rows, -1, false)) &&
                    torch::equal(out, torch::embedding(table, ids));
  std::printf("%-8s %5lld over %5lld x %4lld  gather: LibTorch %7.3f ms  fused %7.3f ms  %5.2fx   "
              "gradient: LibTorch %7.3f ms  fused %7.3f ms  %5.2fx  %s\n",
              name, static_cast<long long>(positions), static_cast<long long>(rows), static_cast<long long>(cols),
              gather_ops, gather_fused, gather_ops / gather_fused, scatter_ops, scatter_fused, scatter_ops / scatter_fused,
              same ? "equal" : "DIFFERENT");
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  at::set_num_threads(threads);
  hftrain::sync_parallel_threads();
  std::printf("%d thread(s)\n", threads);
  run_shape("GPT-2", 1024, 50304, 768, 5);
  run_shape("llama", 1024, 32000, 512, 7);
  run_shape("nanoGPT", 768, 65, 128, 200);
}
