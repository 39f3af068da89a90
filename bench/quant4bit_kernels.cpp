// Micro-benchmark of the 4-bit dequantisation (kernels/quant4bit.h) on every instruction set this CPU runs,
// side by side with the scalar lane: a 4096 x 4096 NF4 weight (blocks of 64) dequantised a tile of rows at a
// time (the 4-bit linear's default tile, 1M elements, into one reused buffer), into float32 and into bf16; GB/s
// counts the bytes read (packed codes and block scales) and written. Then the forward of that 4-bit linear
// (compute dtype float32) over 256 tokens, in tokens/s, on the scalar lane and on each other. Medians of 7
// timings.
//   build/quant4bit_kernels_bench [threads]
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/kernel_choice.h"
#include "kernels/quant4bit.h"
#include "median_timing.h"
#include "models/adaptable_linear.h"
#include "models/quantized_weight.h"
#include "util/parallel.h"

namespace {

using hftrain_bench::median_ms;

constexpr int64_t kRows = 4096, kCols = 4096, kTokens = 256;

struct DequantTimes {
  double float_ms = 0.0, bf16_ms = 0.0;
};

// The whole weight, a tile of rows at a time into one buffer of a tile, in float32 and in bf16.
DequantTimes time_dequant(const hftrain::QuantizedWeight& q, const torch::Tensor& absmax) {
  const int64_t tile = hftrain::quant_tile_elements() / kCols * kCols, n = q.numel();
  std::vector<float> out(static_cast<size_t>(tile));
  std::vector<uint16_t> out16(static_cast<size_t>(tile));
  const uint8_t* packed = q.packed.data_ptr<uint8_t>();
  const float* scales = absmax.data_ptr<float>();
  const float* code = q.quant_map.data_ptr<float>();
  const int64_t block = q.settings.blocksize;
  DequantTimes t;
  t.float_ms = median_ms(
      [&] {
        for (int64_t b = 0; b < n; b += tile)
          hftrain::kernels::dequantize_4bit(packed, scales, code, block, b, std::min(n, b + tile), out.data());
      },
      5);
  t.bf16_ms = median_ms(
      [&] {
        for (int64_t b = 0; b < n; b += tile)
          hftrain::kernels::dequantize_4bit_bf16(packed, scales, code, block, b, std::min(n, b + tile), out16.data());
      },
      5);
  return t;
}

double gb_per_s(double ms, int64_t out_bytes_per_element, int64_t block) {
  const double n = static_cast<double>(kRows * kCols);
  const double bytes = n / 2 + n / block * 4 + n * out_bytes_per_element;
  return bytes / (ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = hftrain::kernels;
  at::set_num_threads(argc > 1 ? std::atoi(argv[1]) : 1);
  hftrain::sync_parallel_threads();
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  hftrain::QuantSettings s;  // NF4, blocks of 64, float32 compute
  hftrain::AdaptableLinear layer(torch::randn({kRows, kCols}) * 0.02, torch::Tensor(),
                                 hftrain::AdaptableLinearImpl::Layout::kOutIn);
  layer->quantize_base(s);
  const hftrain::QuantizedWeight& q = *layer->quantized();
  const torch::Tensor absmax = q.block_absmax().contiguous();
  const torch::Tensor x = torch::randn({kTokens, kCols});
  std::printf("%lld x %lld NF4 weight, blocks of %lld, %d thread(s)\n", static_cast<long long>(kRows),
              static_cast<long long>(kCols), static_cast<long long>(s.blocksize), at::get_num_threads());

  k::set_model_kernel_isa("scalar");
  const DequantTimes scalar = time_dequant(q, absmax);
  const double scalar_forward = median_ms([&] { layer->forward(x); }, 3);
  std::printf("%-9s dequant fp32 %7.2f ms %6.2f GB/s | bf16 %7.2f ms %6.2f GB/s | forward %8.0f tokens/s\n", "scalar",
              scalar.float_ms, gb_per_s(scalar.float_ms, 4, s.blocksize), scalar.bf16_ms,
              gb_per_s(scalar.bf16_ms, 2, s.blocksize), kTokens / (scalar_forward / 1e3));
  for (const std::string& isa : k::model_kernel_isas()) {
    if (isa == "scalar") continue;
    k::set_model_kernel_isa(isa);
    const DequantTimes t = time_dequant(q, absmax);
    const double forward = median_ms([&] { layer->forward(x); }, 3);
    std::printf("%-9s dequant fp32 %7.2f ms %6.2f GB/s (%.2fx) | bf16 %7.2f ms %6.2f GB/s (%.2fx) | forward %8.0f tokens/s "
                "(%.2fx)\n",
                isa.c_str(), t.float_ms, gb_per_s(t.float_ms, 4, s.blocksize), scalar.float_ms / t.float_ms, t.bf16_ms,
                gb_per_s(t.bf16_ms, 2, s.blocksize), scalar.bf16_ms / t.bf16_ms, kTokens / (forward / 1e3),
                scalar_forward / forward);
  }
  k::set_model_kernel_isa("");
}
