// PyTorch 2.x's attention entries through the dispatcher (models/dispatched_attention): flash's variable-length
// entry for padding-free rows and SDPA's grouped-query attention. On the host neither applies and self_attention
// attends as before (key/value heads repeated; a packed row example by example). On a GPU ([gpu]), in bf16 with
// grouped key/value heads, each gives -- values and the gradients of q, k and v -- what an fp32 reference with
// the heads repeated gives (example by example for the packed row), and self_attention takes it.
#include <catch2/catch.hpp>

#include "kernels/kernel_choice.h"
#include "models/dispatched_attention.h"
#include "models/hf_layers.h"

using namespace hftrain;

namespace {

const std::vector<int64_t> kSegments = {5, 17, 1, 41};  // 64 tokens in one row

struct Heads {
  torch::Tensor q, k, v;  // [1, 8, 64, 64] and [1, 2, 64, 64]
};

Heads random_heads(torch::Device device, torch::ScalarType dtype) {
  torch::manual_seed(21);
  Heads h;
  h.q = torch::randn({1, 8, 64, 64}).to(device, dtype).requires_grad_(true);
  h.k = torch::randn({1, 2, 64, 64}).to(device, dtype).requires_grad_(true);
  h.v = torch::randn({1, 2, 64, 64}).to(device, dtype).requires_grad_(true);
  return h;
}

}  // namespace

TEST_CASE("dispatched attention does not apply on the host: heads repeated, a packed row example by example",
          "[unit][attention]") {
  const Heads h = random_heads(torch::kCPU, torch::kFloat);
  CHECK_FALSE(varlen_flash_attention(h.q, h.k, h.v, kSegments, 0.0, 0.0).defined());
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kVarlenAttention);
  const torch::Tensor got = self_attention(h.q, h.k, h.v, {}, kSegments, 0.0, nullptr, 0);
  const torch::Tensor expected =
      attend_packed(h.q, h.k.repeat_interleave(4, 1), h.v.repeat_interleave(4, 1), kSegments, 0.0);
  CHECK(torch::equal(got, expected));
  CHECK(kernels::fused_calls(kernels::FusedKernel::kVarlenAttention) == before);
  CHECK_FALSE(gqa_causal_attention(h.q, h.k, h.v, 0.0).defined());
  const torch::Tensor whole = self_attention(h.q, h.k, h.v, {}, {}, 0.0, nullptr, 0);
  CHECK(torch::equal(whole, attend(h.q, h.k.repeat_interleave(4, 1), h.v.repeat_interleave(4, 1), {}, true, 0.0)));
}

#if HFTRAIN_WITH_CUDA
namespace {

// max |a - b| over max |b|, in double.
double relative_gap(const torch::Tensor& a, const torch::Tensor& b) {
  const auto fa = a.to(torch::kCPU, torch::kDouble), fb = b.to(torch::kCPU, torch::kDouble);
  return ((fa - fb).abs().max() / fb.abs().max()).item<double>();
}

// `got` (bf16, from `h`) against `expected` (fp32, from `r`, the same values): the output, then the gradients of q,
// k and v under one random weighting of the output.
void check_against_reference(const torch::Tensor& got, const torch::Tensor& expected, const Heads& h, const Heads& r) {
  REQUIRE(got.sizes() == expected.sizes());
  CHECK(relative_gap(got, expected) < 2e-2);  // bf16 inputs and output
  const torch::Tensor weights = torch::randn(expected.sizes(), expected.options());
  (got.to(torch::kFloat) * weights).sum().backward();
  (expected * weights).sum().backward();
  CHECK(relative_gap(h.q.grad(), r.q.grad()) < 3e-2);
  CHECK(relative_gap(h.k.grad(), r.k.grad()) < 3e-2);
  CHECK(relative_gap(h.v.grad(), r.v.grad()) < 3e-2);
}

}  // namespace

TEST_CASE("varlen flash attention on a GPU: each example attends causally within itself, values and gradients",
          "[gpu][attention]") {
  REQUIRE(torch::cuda::is_available());
  REQUIRE(varlen_flash_available());
  const torch::Device gpu(torch::kCUDA, 0);
  for (const double scale : {0.0, 0.1}) {
    INFO("scale " << scale);
    const Heads h = random_heads(gpu, torch::kBFloat16);
    // The reference: fp32 copies of the same values, example by example, the key/value heads repeated.
    const Heads r{h.q.detach().to(torch::kFloat).requires_grad_(true), h.k.detach().to(torch::kFloat).requires_grad_(true),
                  h.v.detach().to(torch::kFloat).requires_grad_(true)};
    const int64_t before = kernels::fused_calls(kernels::FusedKernel::kVarlenAttention);
    const ScoreRule rule{scale, 0.0};
    const torch::Tensor got = self_attention(h.q, h.k, h.v, {}, kSegments, 0.0, nullptr, 0, rule);
    CHECK(kernels::fused_calls(kernels::FusedKernel::kVarlenAttention) == before + 1);
    const torch::Tensor expected =
        attend_packed(r.q, r.k.repeat_interleave(4, 1), r.v.repeat_interleave(4, 1), kSegments, 0.0, rule);
    check_against_reference(got, expected, h, r);
  }
}

TEST_CASE("grouped-query SDPA on a GPU: the key/value heads shared by the kernel, values and gradients",
          "[gpu][attention]") {
  REQUIRE(torch::cuda::is_available());
  REQUIRE(sdpa_gqa_available());
  const Heads h = random_heads(torch::Device(torch::kCUDA, 0), torch::kBFloat16);
  const Heads r{h.q.detach().to(torch::kFloat).requires_grad_(true), h.k.detach().to(torch::kFloat).requires_grad_(true),
                h.v.detach().to(torch::kFloat).requires_grad_(true)};
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kGqaAttention);
  const torch::Tensor got = self_attention(h.q, h.k, h.v, {}, {}, 0.0, nullptr, 0);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kGqaAttention) == before + 1);
  const torch::Tensor expected = attend(r.q, r.k.repeat_interleave(4, 1), r.v.repeat_interleave(4, 1), {}, true, 0.0);
  check_against_reference(got, expected, h, r);
}
#endif
