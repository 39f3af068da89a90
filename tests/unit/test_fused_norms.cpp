// The fused LayerNorm and RMSNorm (kernels/normalization, models/fused_norms) against float64 -- torch's
// layer_norm, and RMSNorm written out as HF writes it -- values and the gradients of input, weight (and bias),
// on every instruction set this machine has, for widths with and without lane tails, with and without a bias,
// rows that sum dw / db over several blocks, and rows far from zero mean; and the same bits whatever the
// thread count; LayerNorm on bf16 input and parameters, against float64 and LibTorch's bf16 op; and the residual
// add fused into either norm.
#include <catch2/catch.hpp>

#include <ATen/Parallel.h>

#include "kernel_parity.h"
#include "kernels/kernel_choice.h"
#include "models/fused_norms.h"

using namespace hftrain;

namespace {

double norm_max_rel(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want).abs().max().item<double>() / std::max(1e-6, want.abs().max().item<double>());
}

}  // namespace

TEST_CASE("fused LayerNorm equals torch's layer_norm, values and gradients, on every instruction set", "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t cols : {1, 7, 16, 33, 768}) {
      for (const bool bias : {true, false}) {
        INFO(isa << " cols " << cols << " bias " << bias);
        torch::manual_seed(cols);
        torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(1e-5));
        {
          torch::NoGradGuard no_grad;
          norm->weight.copy_(torch::randn({cols}));
          norm->bias.copy_(torch::randn({cols}));
          if (!bias) norm->bias = torch::Tensor();  // the module without a bias, as a family may build it
        }
        auto x = (torch::randn({3, 37, cols}) * 3 + 10).requires_grad_(true);  // 111 rows: several blocks
        auto y = apply_layer_norm(norm, x);
        auto x64 = x.detach().to(torch::kDouble).requires_grad_(true);
        auto w64 = norm->weight.detach().to(torch::kDouble).requires_grad_(true);
        auto b64 = bias ? norm->bias.detach().to(torch::kDouble).requires_grad_(true) : torch::Tensor();
        auto want = torch::layer_norm(x64, {cols}, w64, b64, 1e-5);
        CHECK(norm_max_rel(y, want) < 2e-6);
        const auto dy = torch::randn(want.sizes(), torch::kDouble);
        y.backward(dy.to(torch::kFloat));
        want.backward(dy);
        CHECK(norm_max_rel(x.grad(), x64.grad()) < 2e-5);
        CHECK(norm_max_rel(norm->weight.grad(), w64.grad()) < 2e-5);
        if (bias) CHECK(norm_max_rel(norm->bias.grad(), b64.grad()) < 2e-5);
      }
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("fused RMSNorm equals weight * x / sqrt(mean(x^2) + eps), values and gradients, on every instruction set",
          "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    // (No width 1: there dx = rstd g eps / (x^2 + eps) is a cancellation in float32 for any implementation.)
    for (const int64_t cols : {2, 7, 16, 33, 512}) {
      INFO(isa << " cols " << cols);
      torch::manual_seed(cols + 1);
      auto w = torch::randn({cols}).requires_grad_(true);
      auto x = (torch::randn({2, 41, cols}) * 2 + 1).requires_grad_(true);
      auto y = rms_norm(x, w, 1e-6);
      auto x64 = x.detach().to(torch::kDouble).requires_grad_(true);
      auto w64 = w.detach().to(torch::kDouble).requires_grad_(true);
      auto want = w64 * (x64 * torch::rsqrt(x64.pow(2).mean(-1, true) + 1e-6));
      CHECK(norm_max_rel(y, want) < 2e-6);
      const auto dy = torch::randn(want.sizes(), torch::kDouble);
      y.backward(dy.to(torch::kFloat));
      want.backward(dy);
      CHECK(norm_max_rel(x.grad(), x64.grad()) < 2e-5);
      CHECK(norm_max_rel(w.grad(), w64.grad()) < 2e-5);
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("fused LayerNorm gives the same bits on one thread as on several", "[unit][kernels]") {
  torch::manual_seed(5);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({48}));
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    norm->zero_grad();
    torch::manual_seed(6);
    auto x = torch::randn({64, 48}).requires_grad_(true);
    apply_layer_norm(norm, x).pow(2).sum().backward();
    return std::vector<torch::Tensor>{x.grad().clone(), norm->weight.grad().clone(), norm->bias.grad().clone()};
  };
  const int before = at::get_num_threads();
  const auto one = run(1), two = run(2);
  at::set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(torch::equal(one[i], two[i]));
}

TEST_CASE("fused LayerNorm takes bf16 input and parameters, rounding as LibTorch's bf16 layer_norm", "[unit][kernels]") {
  // Mixed precision's LayerNorm: bf16 activations and parameters (autocast leaves layer_norm alone). Against float64
  // on the same bf16 values, each result within a bf16 rounding of its largest value; LibTorch's bf16 op too.
  const int64_t cols = 48;
  torch::manual_seed(9);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(1e-5));
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(torch::randn({cols}));
    norm->bias.copy_(torch::randn({cols}));
  }
  norm->to(torch::kBFloat16);
  const auto x0 = (torch::randn({5, 11, cols}) * 2 + 3).to(torch::kBFloat16);
  const auto dy = torch::randn({5, 11, cols}).to(torch::kBFloat16);
  auto run = [&](bool fused) {
    kernels::set_fused_kernels_enabled(fused);
    norm->zero_grad();
    auto x = x0.clone().requires_grad_(true);
    const int64_t before = kernels::fused_calls(kernels::FusedKernel::kLayerNorm);
    auto y = apply_layer_norm(norm, x);
    CHECK(kernels::fused_calls(kernels::FusedKernel::kLayerNorm) - before == (fused ? 1 : 0));
    y.backward(dy);
    kernels::set_fused_kernels_enabled(true);
    return std::vector<torch::Tensor>{y.detach(), x.grad(), norm->weight.grad().clone(), norm->bias.grad().clone()};
  };
  auto x64 = x0.to(torch::kDouble).requires_grad_(true);
  auto w64 = norm->weight.detach().to(torch::kDouble).requires_grad_(true);
  auto b64 = norm->bias.detach().to(torch::kDouble).requires_grad_(true);
  auto want_y = torch::layer_norm(x64, {cols}, w64, b64, 1e-5);
  want_y.backward(dy.to(torch::kDouble));
  const std::vector<torch::Tensor> want = {want_y.detach(), x64.grad(), w64.grad(), b64.grad()};
  const char* names[] = {"y", "dx", "dw", "db"};
  const auto fused = run(true), lib = run(false);
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(names[i]);
    CHECK(fused[i].scalar_type() == torch::kBFloat16);
    const double scale = want[i].abs().max().item<double>();
    CHECK((fused[i].to(torch::kDouble) - want[i]).abs().max().item<double>() <= std::ldexp(1.0, -8) * scale);
    CHECK((lib[i].to(torch::kDouble) - fused[i].to(torch::kDouble)).abs().max().item<double>() <= std::ldexp(1.0, -6) * scale);
  }
}

// The residual add fused into the norm: s = x + u and norm(s), with s used again downstream (its gradient from the
// residual stream joins the norm's) or not at all, against the add and the norm in float64.
TEST_CASE("the residual add fused into LayerNorm and RMSNorm equals the add and then the norm, values and gradients",
          "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t cols : {7, 48, 768}) {
      for (const bool rms : {false, true}) {
        for (const bool sum_used : {true, false}) {
          INFO(isa << " cols " << cols << (rms ? " RMSNorm" : " LayerNorm") << " sum used " << sum_used);
          torch::manual_seed(cols + rms);
          torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({cols}).eps(1e-5));
          {
            torch::NoGradGuard no_grad;
            norm->weight.copy_(torch::randn({cols}));
            norm->bias.copy_(torch::randn({cols}));
          }
          auto x = torch::randn({5, 23, cols}).requires_grad_(true);
          auto u = torch::randn({5, 23, cols}).requires_grad_(true);
          const int64_t before = kernels::fused_calls(kernels::FusedKernel::kResidualAdd);
          auto [s, y] = rms ? add_rms_norm(x, u, norm->weight, 1e-6) : add_layer_norm(norm, x, u);
          CHECK(kernels::fused_calls(kernels::FusedKernel::kResidualAdd) == before + 1);
          CHECK(torch::equal(s, x.detach() + u.detach()));  // the same float sum as the unfused add
          auto x64 = x.detach().to(torch::kDouble).requires_grad_(true);
          auto u64 = u.detach().to(torch::kDouble).requires_grad_(true);
          auto w64 = norm->weight.detach().to(torch::kDouble).requires_grad_(true);
          auto b64 = norm->bias.detach().to(torch::kDouble).requires_grad_(true);
          auto s64 = x64 + u64;
          auto want = rms ? w64 * (s64 * torch::rsqrt(s64.pow(2).mean(-1, true) + 1e-6))
                          : torch::layer_norm(s64, {cols}, w64, b64, 1e-5);
          CHECK(norm_max_rel(y, want) < 2e-6);
          const auto dy = torch::randn(want.sizes(), torch::kDouble), ds = torch::randn(want.sizes(), torch::kDouble);
          auto loss = (y * dy.to(torch::kFloat)).sum();
          auto loss64 = (want * dy).sum();
          if (sum_used) {
            loss = loss + (s * ds.to(torch::kFloat)).sum();
            loss64 = loss64 + (s64 * ds).sum();
          }
          loss.backward();
          loss64.backward();
          CHECK(norm_max_rel(x.grad(), x64.grad()) < 2e-5);
          CHECK(norm_max_rel(u.grad(), u64.grad()) < 2e-5);
          CHECK(norm_max_rel(norm->weight.grad(), w64.grad()) < 2e-5);
          if (!rms) CHECK(norm_max_rel(norm->bias.grad(), b64.grad()) < 2e-5);
        }
      }
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("the residual add is fused only for fp32 host tensors of one shape, elsewhere the add and then the norm",
          "[unit][kernels]") {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({8}));
  const auto x = torch::randn({3, 8}), u = torch::randn({3, 8});
  const int64_t before = kernels::fused_calls(kernels::FusedKernel::kResidualAdd);
  const auto broadcast = add_layer_norm(norm, x, torch::randn({8}));  // u broadcast over the rows: not fused
  CHECK(broadcast.first.sizes() == x.sizes());
  const auto bf16 = add_rms_norm(x.to(torch::kBFloat16), u.to(torch::kBFloat16), torch::ones({8}, torch::kBFloat16), 1e-6);
  CHECK(bf16.second.scalar_type() == torch::kBFloat16);
  kernels::set_fused_kernels_enabled(false);
  const auto ops = add_layer_norm(norm, x, u);
  kernels::set_fused_kernels_enabled(true);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kResidualAdd) == before);
  const auto fused = add_layer_norm(norm, x, u);
  CHECK(kernels::fused_calls(kernels::FusedKernel::kResidualAdd) == before + 1);
  CHECK(torch::equal(fused.first, ops.first));
  CHECK((fused.second - ops.second).abs().max().item<float>() < 1e-5f);
}

TEST_CASE("fused RMSNorm on bf16 rounds where HF's RMSNorm on bf16 rounds, values and gradients, on every instruction set",
          "[unit][kernels]") {
  using hftrain_test::bf16_ulps;
  // The reference: float64 rounded to bf16 where HF's LlamaRMSNorm / T5LayerNorm round on a bf16 model: the
  // normalised x before the weight multiplies it, the product; in backward dy w, dx, each dy h, and dw's sum.
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); };
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t cols : {7, 64, 520}) {
      INFO(isa << " cols " << cols);
      torch::manual_seed(cols + 9);
      const auto x0 = (torch::randn({37, cols}) * 3).to(torch::kBFloat16);
      const auto w0 = (torch::rand({cols}) + 0.5).to(torch::kBFloat16), dy = torch::randn({37, cols}).to(torch::kBFloat16);
      auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
      const int64_t before = kernels::fused_calls(kernels::FusedKernel::kRmsNorm);
      auto y = rms_norm(x, w, 1e-6);
      CHECK(kernels::fused_calls(kernels::FusedKernel::kRmsNorm) == before + 1);
      CHECK(y.scalar_type() == torch::kBFloat16);
      y.backward(dy);
      const auto x64 = x0.to(torch::kDouble), w64 = w0.to(torch::kDouble), dy64 = dy.to(torch::kDouble);
      const auto rstd = torch::rsqrt(x64.pow(2).mean(-1, true) + 1e-6), xhat = x64 * rstd, h = bf16(xhat);
      const auto g = bf16(dy64 * w64);
      const auto want_y = bf16(w64 * h), want_dw = bf16(bf16(dy64 * h).sum(0));
      const auto want_dx = bf16(rstd * (g - xhat * (g * xhat).mean(-1, true)));
      // fp32 evaluation moves a rounding across a bf16 boundary now and then: one place, rarely.
      for (const auto& [got, ref] : {std::pair{y.detach(), want_y}, std::pair{x.grad(), want_dx}, std::pair{w.grad(), want_dw}}) {
        const auto ulps = bf16_ulps(got, ref);
        CHECK(ulps.max().item<double>() <= 1.0);
        CHECK((ulps == 0).to(torch::kDouble).mean().item<double>() >= 0.98);
      }
      // LibTorch's ops of the same formula (the unfused path): the same rounding points, so within a place.
      kernels::set_fused_kernels_enabled(false);
      auto xo = x0.clone().requires_grad_(true), wo = w0.clone().requires_grad_(true);
      auto yo = rms_norm(xo, wo, 1e-6);
      yo.backward(dy);
      kernels::set_fused_kernels_enabled(true);
      CHECK(bf16_ulps(y.detach(), yo.detach()).max().item<double>() <= 1.0);
      CHECK(bf16_ulps(x.grad(), xo.grad()).max().item<double>() <= 1.0);
      CHECK(bf16_ulps(w.grad(), wo.grad()).max().item<double>() <= 1.0);
    }
  }
  kernels::set_model_kernel_isa("");
}
