// The fused row operations (models/fused_norms, fused_activations, lm_loss) on one device against float64 on the
// host: LayerNorm and RMSNorm with the residual add, RMSNorm on bf16, GELU in both forms and SwiGLU in fp32 and
// bf16, and the chunked loss's cross-entropy with label smoothing, ignored rows and a refused label; values and
// gradients, each with its fused call counted; rotary embedding bit for bit LibTorch's ops; and NF4 / FP4 dequantisation (with the double quantisation's
// 8-bit absmax) against the layout written out with LibTorch's ops, bit for bit. With a GPU (`[gpu]`, in hftrain_gpu_tests) these are the CUDA
// kernels (kernels/cuda/), and their bf16 results are also held to the host kernels' to one bf16 place; on the host
// (`[unit]`) the same checks run the host kernels, so the checks themselves are proven on every machine.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "kernel_parity.h"
#include "kernels/cuda_launch.h"
#include "kernels/kernel_choice.h"
#include "kernels/row_kernels.h"
#include "models/fused_activations.h"
#include "models/fused_norms.h"
#include "models/fused_rotary.h"
#include "models/lm_loss.h"
#include "models/quantized_weight.h"
#include "util/error.h"

using namespace hftrain;

namespace {

double max_rel(const torch::Tensor& got, const torch::Tensor& want) {
  const auto w = want.to(torch::kCPU).to(torch::kDouble);
  return (got.to(torch::kCPU).to(torch::kDouble) - w).abs().max().item<double>() /
         std::max(1e-6, w.abs().max().item<double>());
}

int64_t calls(kernels::FusedKernel k) { return kernels::fused_calls(k); }

// Leaf copies of host tensors on `device` (dtype kept), requiring gradients.
std::vector<torch::Tensor> leaves_on(const std::vector<torch::Tensor>& host, torch::Device device) {
  std::vector<torch::Tensor> out;
  for (const auto& t : host) out.push_back(t.to(device).detach().requires_grad_(true));
  return out;
}

std::vector<torch::Tensor> leaves64(const std::vector<torch::Tensor>& host) {
  std::vector<torch::Tensor> out;
  for (const auto& t : host) out.push_back(t.to(torch::kDouble).detach().requires_grad_(true));
  return out;
}

void check_grads(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want, double tol) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("gradient of input " << i);
    REQUIRE(got[i].grad().defined());
    CHECK(max_rel(got[i].grad(), want[i].grad()) < tol);
  }
}

torch::Tensor rms64(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return w * x * torch::rsqrt(x.pow(2).mean(-1, true) + eps);
}

void check_norms_fp32(torch::Device device) {
  for (const int64_t rows : {111, 1100}) {  // 1100 rows: more rows than backward's blocks
    for (const int64_t cols : {1, 33, 1000}) {
      INFO("rows " << rows << " cols " << cols);
      torch::manual_seed(rows + cols);
      const std::vector<torch::Tensor> host = {torch::randn({rows, cols}) * 3 + 2, torch::randn({rows, cols}),
                                               torch::randn({cols}), torch::randn({cols})};
      const auto dy = torch::randn({rows, cols}), ds = torch::randn({rows, cols});
      {  // RMSNorm with the residual add: (s, y) = (x + r, rms(s))
        auto in = leaves_on({host[0], host[1], host[2]}, device);
        const int64_t before = calls(kernels::FusedKernel::kResidualAdd);
        auto [s, y] = add_rms_norm(in[0], in[1], in[2], 1e-6);
        CHECK(calls(kernels::FusedKernel::kResidualAdd) == before + 1);
        ((y * dy.to(device)).sum() + (s * ds.to(device)).sum()).backward();
        auto ref = leaves64({host[0], host[1], host[2]});
        auto s64 = ref[0] + ref[1];
        auto y64 = rms64(s64, ref[2], 1e-6);
        ((y64 * dy.to(torch::kDouble)).sum() + (s64 * ds.to(torch::kDouble)).sum()).backward();
        CHECK(max_rel(s, s64) < 1e-6);
        CHECK(max_rel(y, y64) < 2e-6);
        check_grads(in, ref, 2e-5);
      }
      {  // LayerNorm with a bias and the residual add
        torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(1e-5));
        {
          torch::NoGradGuard no_grad;
          norm->weight.copy_(host[2]);
          norm->bias.copy_(host[3]);
        }
        norm->to(device);
        auto in = leaves_on({host[0], host[1]}, device);
        const int64_t before = calls(kernels::FusedKernel::kLayerNorm);
        auto [s, y] = add_layer_norm(norm, in[0], in[1]);
        CHECK(calls(kernels::FusedKernel::kLayerNorm) == before + 1);
        ((y * dy.to(device)).sum() + (s * ds.to(device)).sum()).backward();
        auto ref = leaves64({host[0], host[1], host[2], host[3]});
        auto s64 = ref[0] + ref[1];
        auto y64 = torch::layer_norm(s64, {cols}, ref[2], ref[3], 1e-5);
        ((y64 * dy.to(torch::kDouble)).sum() + (s64 * ds.to(torch::kDouble)).sum()).backward();
        CHECK(max_rel(y, y64) < 2e-6);
        check_grads(in, {ref[0], ref[1]}, 2e-5);
        CHECK(max_rel(norm->weight.grad(), ref[2].grad()) < 2e-5);
        CHECK(max_rel(norm->bias.grad(), ref[3].grad()) < 2e-5);
      }
    }
  }
}

// bf16 results within `places` bf16 places of the host kernels' on the same values (not asked of the host itself).
void check_like_host_bf16(torch::Device device, const torch::Tensor& got, const torch::Tensor& host_result) {
  if (device.is_cpu()) return;
  CHECK(hftrain_test::bf16_ulps(got.to(torch::kCPU).to(torch::kFloat), host_result.to(torch::kFloat)).max().item<double>() <=
        1.0);
}

// One bf16 operation on `device` and on the host kernels, float64 of the same bf16 inputs as the reference.
void check_bf16(torch::Device device, const std::vector<torch::Tensor>& host, const torch::Tensor& dy,
                const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& op,
                const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& op64, double tol) {
  auto in = leaves_on(host, device), on_host = leaves_on(host, torch::kCPU);
  auto y = op(in), y_host = op(on_host);
  y.backward(dy.to(device));
  y_host.backward(dy);
  auto ref = leaves64(host);
  auto y64 = op64(ref);
  y64.backward(dy.to(torch::kDouble));
  CHECK(y.scalar_type() == torch::kBFloat16);
  CHECK(max_rel(y, y64) < tol);
  check_like_host_bf16(device, y, y_host);
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(max_rel(in[i].grad(), ref[i].grad()) < tol);
    check_like_host_bf16(device, in[i].grad(), on_host[i].grad());
  }
}

void check_bf16_ops(torch::Device device) {
  torch::manual_seed(5);
  const int64_t rows = 300, cols = 1000;
  const auto bf = [](const torch::Tensor& t) { return t.to(torch::kBFloat16); };
  const auto dy = bf(torch::randn({rows, cols}));
  const int64_t rms_before = calls(kernels::FusedKernel::kRmsNorm);
  check_bf16(device, {bf(torch::randn({rows, cols}) * 2), bf(torch::randn({cols}))}, dy,
             [](const auto& t) { return rms_norm(t[0], t[1], 1e-6); },
             [](const auto& t) { return rms64(t[0], t[1], 1e-6); }, 2e-2);
  CHECK(calls(kernels::FusedKernel::kRmsNorm) == rms_before + 2);
  const int64_t swiglu_before = calls(kernels::FusedKernel::kSwiGlu);
  check_bf16(device, {bf(torch::randn({rows, cols}) * 3), bf(torch::randn({rows, cols}))}, dy,
             [](const auto& t) { return silu_gated(t[0], t[1]); },
             [](const auto& t) { return torch::silu(t[0]) * t[1]; }, 2e-2);
  CHECK(calls(kernels::FusedKernel::kSwiGlu) == swiglu_before + 2);
  for (const std::string form : {"none", "tanh"}) {
    INFO("gelu " << form);
    check_bf16(device, {bf(torch::randn({rows, cols}) * 3)}, dy,
               [form](const auto& t) { return gelu_activation(t[0], form); },
               [form](const auto& t) { return torch::gelu(t[0], form); }, 2e-2);
  }
}

void check_activations_fp32(torch::Device device) {
  torch::manual_seed(6);
  const int64_t n = 70001;  // not a multiple of any block
  const std::vector<torch::Tensor> host = {torch::randn({n}) * 4, torch::randn({n})};
  const auto dy = torch::randn({n});
  for (const std::string form : {"none", "tanh"}) {
    INFO("gelu " << form);
    auto in = leaves_on({host[0]}, device);
    const int64_t before = calls(kernels::FusedKernel::kGelu);
    auto y = gelu_activation(in[0], form);
    CHECK(calls(kernels::FusedKernel::kGelu) == before + 1);
    y.backward(dy.to(device));
    auto ref = leaves64({host[0]});
    auto y64 = torch::gelu(ref[0], form);
    y64.backward(dy.to(torch::kDouble));
    CHECK(max_rel(y, y64) < 2e-6);
    check_grads(in, ref, 2e-5);
  }
  auto in = leaves_on(host, device);
  auto y = silu_gated(in[0], in[1]);
  y.backward(dy.to(device));
  auto ref = leaves64(host);
  auto y64 = torch::silu(ref[0]) * ref[1];
  y64.backward(dy.to(torch::kDouble));
  CHECK(max_rel(y, y64) < 2e-6);
  check_grads(in, ref, 2e-5);
}

void check_cross_entropy(torch::Device device) {
  torch::manual_seed(7);
  const int64_t vocab = 3001, hidden = 24;
  const std::vector<torch::Tensor> host = {torch::randn({2, 37, hidden}), torch::randn({vocab, hidden}) * 0.3,
                                           torch::randn({vocab})};
  auto labels = torch::randint(0, vocab, {2, 37}, torch::kLong);
  labels[0][3] = -100;
  labels[1][20] = -100;
  for (const double epsilon : {0.0, 0.1}) {
    for (const double logit_scale : {1.0, 40.0}) {  // 40: logits near 100, a confident row's loss near 0
    INFO("epsilon " << epsilon << " logit scale " << logit_scale);
    auto in = leaves_on({host[0] * logit_scale, host[1], host[2]}, device);
    const int64_t before = calls(kernels::FusedKernel::kCrossEntropy);
    auto loss = linear_cross_entropy(in[0], in[1], in[2], labels.to(device), epsilon, 0.0, 16);
    CHECK(calls(kernels::FusedKernel::kCrossEntropy) > before);
    loss.backward();
    auto ref = leaves64({host[0] * logit_scale, host[1], host[2]});
    auto z = torch::matmul(ref[0], ref[1].t()) + ref[2];
    auto logp = torch::log_softmax(z.reshape({-1, vocab}), 1);
    auto y = labels.reshape({-1});
    auto keep = y != -100;
    auto nll = -logp.index({keep}).gather(1, y.index({keep}).unsqueeze(1)).squeeze(1);
    auto smooth = -logp.index({keep}).mean(1);
    auto loss64 = ((1 - epsilon) * nll + epsilon * smooth).mean();
    loss64.backward();
    CHECK(max_rel(loss, loss64) < 2e-6);
    check_grads(in, ref, 2e-5);
    }
  }
  auto bad = labels.clone();
  bad[1][5] = vocab + 7;
  auto in = leaves_on(host, device);
  CHECK_THROWS_AS(linear_cross_entropy(in[0], in[1], in[2], bad.to(device), 0.0, 0.0, 16), RuntimeFailure);
  CHECK_THROWS_WITH(linear_cross_entropy(in[0], in[1], in[2], bad.to(device), 0.0, 0.0, 16),
                    Catch::Contains("is " + std::to_string(vocab + 7)) &&
                        Catch::Contains("outside the vocabulary [0, " + std::to_string(vocab) + ")"));
}

// The float32 block absmaxes of a QuantizedWeight written out with LibTorch's ops from its (host) storage: as stored,
// or with double quantisation map[code] * the nested absmax of the code's block, plus the offset.
torch::Tensor absmax_by_formula(const QuantizedWeight& q) {
  if (!q.nested()) return q.absmax.to(torch::kCPU);
  const auto i = torch::arange(q.absmax.numel(), torch::kLong);
  return q.nested_quant_map.to(torch::kCPU).index_select(0, q.absmax.to(torch::kCPU).to(torch::kLong)) *
             q.nested_absmax.to(torch::kCPU).index_select(0, torch::div(i, q.settings.nested_blocksize, "floor")) +
         q.offset;
}

// The weight a 4-bit QuantizedWeight stands for, the same way: nibble i (even i high) -> code value, times the
// absmax of i's block.
torch::Tensor dequantized_by_formula(const QuantizedWeight& q) {
  const auto packed = q.packed.to(torch::kCPU).reshape({-1}).to(torch::kLong);
  const auto codes = torch::stack({torch::bitwise_right_shift(packed, 4), torch::bitwise_and(packed, 15)}, 1)
                         .reshape({-1}).narrow(0, 0, q.numel());
  const auto block = torch::div(torch::arange(q.numel(), torch::kLong), q.settings.blocksize, "floor");
  return (q.quant_map.to(torch::kCPU).index_select(0, codes) * absmax_by_formula(q).index_select(0, block))
      .view({q.out, q.in});
}

void check_dequantization(torch::Device device) {
  torch::manual_seed(8);
  const auto weight = torch::randn({301, 129});  // an odd element count: the last byte half used
  for (const auto type : {kernels::Quant4Type::kNf4, kernels::Quant4Type::kFp4}) {
    for (const bool nested : {false, true}) {
      INFO("fp4 " << (type == kernels::Quant4Type::kFp4) << " double quantisation " << nested);
      QuantSettings settings;
      settings.type = type;
      settings.double_quant = nested;
      const QuantizedWeight q = quantize_weight(weight.to(device), settings);
      CHECK(q.packed.device() == device);
      const auto want = dequantized_by_formula(q);
      const auto got = q.dequantize(torch::kFloat);
      CHECK(got.device() == device);
      CHECK(torch::equal(got.to(torch::kCPU), want));
      CHECK(torch::equal(q.dequantize(torch::kBFloat16).to(torch::kCPU), want.to(torch::kBFloat16)));
      CHECK(torch::equal(q.block_absmax().to(torch::kCPU), absmax_by_formula(q)));
    }
  }
}

// Rotary embedding of a transposed head view (as the decoder passes it) with bf16 heads and fp32 tables (autocast's
// mix) and all-fp32: bit for bit LibTorch's ops on the same device, values and gradients (the kernel rounds where
// they round and never fuses a multiply-add).
void check_rotary(torch::Device device) {
  torch::manual_seed(9);
  for (const auto head_type : {torch::kFloat, torch::kBFloat16}) {
    INFO("heads " << head_type);
    const auto x0 = (torch::randn({2, 300, 4, 64}) * 2).to(head_type).to(device);
    const auto angle = torch::rand({1, 1, 300, 32}) * 50;
    const auto cos = torch::cat({angle.cos(), angle.cos()}, -1).to(device), sin = torch::cat({angle.sin(), angle.sin()}, -1).to(device);
    const auto dy = torch::randn({2, 4, 300, 64}).to(device);
    std::vector<torch::Tensor> got[2];
    for (const bool fused : {true, false}) {
      kernels::set_fused_kernels_enabled(fused);
      auto x = x0.clone().requires_grad_(true);
      const int64_t before = calls(kernels::FusedKernel::kRotary);
      auto y = apply_rotary(x.transpose(1, 2), cos, sin);
      CHECK(calls(kernels::FusedKernel::kRotary) == before + (fused ? 1 : 0));
      y.backward(dy.to(y.scalar_type()));
      got[fused ? 0 : 1] = {y.detach().to(torch::kCPU), x.grad().to(torch::kCPU)};
      kernels::set_fused_kernels_enabled(true);
    }
    CHECK(torch::equal(got[0][0], got[1][0]));
    CHECK(torch::equal(got[0][1], got[1][1]));
  }
}

void check_all_row_ops_on(torch::Device device) {
  REQUIRE(kernels::row_kernels_on(device) != nullptr);
  SECTION("LayerNorm and RMSNorm with the residual add, fp32") { check_norms_fp32(device); }
  SECTION("GELU and SwiGLU, fp32") { check_activations_fp32(device); }
  SECTION("RMSNorm, SwiGLU and GELU on bf16") { check_bf16_ops(device); }
  SECTION("the chunked loss's cross-entropy") { check_cross_entropy(device); }
  SECTION("4-bit and 8-bit block-wise dequantisation") { check_dequantization(device); }
  SECTION("rotary embedding") { check_rotary(device); }
}

}  // namespace

TEST_CASE("device kernels: the fused row operations on the host equal float64, the checks the CUDA kernels take",
          "[unit][kernels]") {
  CHECK(std::string(kernels::row_kernels_on(torch::kCPU)->memory) == "host");
  check_all_row_ops_on(torch::kCPU);
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("device kernels: the CUDA row kernels equal float64 and the host kernels, values and gradients", "[gpu][kernels]") {
  REQUIRE(torch::cuda::is_available());
  INFO(kernels::cuda_kernels_unusable());
  REQUIRE(kernels::cuda_row_kernels() != nullptr);
  CHECK(std::string(kernels::row_kernels_on(torch::Device(torch::kCUDA, 0))->memory) == "cuda");
  check_all_row_ops_on(torch::Device(torch::kCUDA, 0));
}
#else
TEST_CASE("device kernels: a build without CUDA has no CUDA set and says so where one is asked for", "[unit][kernels]") {
  CHECK(kernels::cuda_row_kernels() == nullptr);
  CHECK(kernels::cuda_kernels_unusable() == "no CUDA kernels in this build");
  CHECK(kernels::row_kernels_on(torch::Device(torch::kCUDA, 0)) == nullptr);
  CHECK_THROWS_WITH(kernels::row_kernels_at(torch::Device(torch::kCUDA, 0)),
                    "no fused row kernels for tensors on cuda:0 (no CUDA kernels in this build)");
}
#endif
