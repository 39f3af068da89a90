// The fused GELU and SwiGLU kernels (kernels/activation, models/fused_activations) against float64, values and
// gradients. GELU:
// in both forms, on every instruction set this machine has, over sizes with lane tails and inputs from the far
// negative tail (where the value is tiny and needs relative accuracy) to large x. The float64 reference is
// written without cancellation -- x erfc(-x / sqrt 2) / 2 and x / (1 + e^(-2u)) -- since 0.5 x (1 + erf) and
// 0.5 x (1 + tanh) lose every digit below x = -6 even in float64; and torch's float32 gelu agrees with it
// where its digits last.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernel_parity.h"
#include "kernels/kernel_choice.h"
#include "models/fused_activations.h"

using namespace hftrain;

TEST_CASE("fused GELU equals torch's gelu in both forms, values and gradients, on every instruction set", "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const std::string approximate : {"none", "tanh"}) {
      for (const int64_t n : {1, 15, 16, 17, 100003}) {
        INFO(isa << " " << approximate << " n " << n);
        torch::manual_seed(n);
        auto x64 = torch::randn({n}, torch::kDouble) * 4;
        if (n > 16) x64.narrow(0, 0, 16).copy_(torch::linspace(-12, 12, 16, torch::kDouble));
        auto x = x64.to(torch::kFloat).requires_grad_(true);
        auto y = gelu_activation(x, approximate);
        auto xr = x.detach().to(torch::kDouble).requires_grad_(true);
        const double k = std::sqrt(2.0 / M_PI);
        auto want = approximate == "none" ? xr * 0.5 * torch::erfc(-xr / std::sqrt(2.0))
                                          : xr / (1 + torch::exp(-2 * k * (xr + 0.044715 * xr.pow(3))));
        CHECK((torch::gelu(x.detach(), approximate).to(torch::kDouble) - want).abs().max().item<double>() < 1e-5);
        // Relative to each value. In float32 the exponent -x^2/2 carries an absolute rounding of about x^2 ulp,
        // so the relative error of e^(-x^2/2), and of the tail's value, grows as x^2 * 6e-8: the bound allows 2e-7 x^2.
        const auto err = (y.to(torch::kDouble) - want).abs();
        const auto rel = 1e-6 + 2e-7 * xr.detach().pow(2);
        const auto excess = err - rel * want.abs();
        const int64_t worst = excess.argmax().item<int64_t>();
        INFO("worst at x = " << x64[worst].item<double>() << ": " << y[worst].item<double>() << " vs " << want[worst].item<double>());
        CHECK(excess.max().item<double>() <= 1e-30);
        const auto dy = torch::randn({n}, torch::kDouble);
        y.backward(dy.to(torch::kFloat));
        want.backward(dy);
        const auto gerr = (x.grad().to(torch::kDouble) - xr.grad()).abs();
        CHECK((gerr - (rel + 1e-6) * xr.grad().abs() - 1e-7 * dy.abs()).max().item<double>() <= 0);
      }
    }
  }
  kernels::set_model_kernel_isa("");
  // Non-contiguous inputs take torch's op.
  auto xs = torch::randn({8, 2}).t();
  CHECK(torch::equal(gelu_activation(xs), torch::gelu(xs)));
}

TEST_CASE("fused SwiGLU equals silu(gate) * up, values and both gradients, on every instruction set", "[unit][kernels]") {
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t n : {1, 15, 16, 17, 50001}) {
      INFO(isa << " n " << n);
      torch::manual_seed(n + 3);
      auto g = (torch::randn({n}) * 5).requires_grad_(true), u = torch::randn({n}).requires_grad_(true);
      auto y = silu_gated(g, u);
      auto g64 = g.detach().to(torch::kDouble).requires_grad_(true), u64 = u.detach().to(torch::kDouble).requires_grad_(true);
      auto want = g64 / (1 + torch::exp(-g64)) * u64;
      CHECK(((y.to(torch::kDouble) - want).abs() - 1e-6 * want.abs() - 1e-12).max().item<double>() <= 0);
      const auto dy = torch::randn({n}, torch::kDouble);
      y.backward(dy.to(torch::kFloat));
      want.backward(dy);
      const double scale_g = g64.grad().abs().max().item<double>(), scale_u = u64.grad().abs().max().item<double>();
      CHECK((g.grad().to(torch::kDouble) - g64.grad()).abs().max().item<double>() <= 2e-6 * scale_g);
      CHECK((u.grad().to(torch::kDouble) - u64.grad()).abs().max().item<double>() <= 2e-6 * scale_u);
    }
  }
  kernels::set_model_kernel_isa("");
}

using hftrain_test::bf16_ulps;

TEST_CASE("fused SwiGLU on bf16 rounds where the bf16 ops silu(gate) * up and their autograd round, on every instruction set",
          "[unit][kernels]") {
  // The reference: float64 math rounded to bf16 at each op's output, as a bf16 op computing in fp32 does: silu(g),
  // the product, and in backward dy u, dy silu(g) and silu's backward. (LibTorch 1.13's own bf16 silu also rounds
  // its exponential and denominator to bf16, up to 3 bf16 places off; it is not the reference.)
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); };
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const int64_t n : {1, 17, 50001}) {
      INFO(isa << " n " << n);
      torch::manual_seed(n + 11);
      const auto g0 = (torch::randn({n}) * 5).to(torch::kBFloat16), u0 = torch::randn({n}).to(torch::kBFloat16);
      const auto dy = torch::randn({n}).to(torch::kBFloat16);
      auto g = g0.clone().requires_grad_(true), u = u0.clone().requires_grad_(true);
      const int64_t before = kernels::fused_calls(kernels::FusedKernel::kSwiGlu);
      auto y = silu_gated(g, u);
      CHECK(kernels::fused_calls(kernels::FusedKernel::kSwiGlu) == before + 1);
      CHECK(y.scalar_type() == torch::kBFloat16);
      y.backward(dy);
      const auto g64 = g0.to(torch::kDouble), u64 = u0.to(torch::kDouble), dy64 = dy.to(torch::kDouble);
      const auto sig = 1 / (1 + torch::exp(-g64));
      const auto silu_b = bf16(g64 * sig);
      const auto y_ref = bf16(silu_b * u64), du_ref = bf16(dy64 * silu_b);
      const auto dg_ref = bf16(bf16(dy64 * u64) * sig * (1 + g64 * (1 - sig)));
      // fp32 evaluation (exp, the reciprocal) moves a rounding across a bf16 boundary now and then: one place.
      for (const auto& [got, ref] : {std::pair{y.detach(), y_ref}, std::pair{g.grad(), dg_ref}, std::pair{u.grad(), du_ref}}) {
        const auto ulps = bf16_ulps(got, ref);
        CHECK(ulps.max().item<double>() <= 1.0);
        CHECK((ulps == 0).to(torch::kDouble).mean().item<double>() >= 0.99);
      }
    }
  }
  kernels::set_model_kernel_isa("");
}

TEST_CASE("fused GELU on bf16 gives the float64 values and gradients rounded once to bf16, in both forms, on every "
          "instruction set",
          "[unit][kernels]") {
  const auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); };
  const double k = std::sqrt(2.0 / M_PI);
  for (const std::string& isa : kernels::model_kernel_isas()) {
    kernels::set_model_kernel_isa(isa);
    for (const std::string approximate : {"none", "tanh"}) {
      for (const int64_t n : {1, 17, 50001}) {
        INFO(isa << " " << approximate << " n " << n);
        torch::manual_seed(n + 5);
        const auto x0 = (torch::randn({n}) * 4).to(torch::kBFloat16), dy = torch::randn({n}).to(torch::kBFloat16);
        auto x = x0.clone().requires_grad_(true);
        const int64_t before = kernels::fused_calls(kernels::FusedKernel::kGelu);
        auto y = gelu_activation(x, approximate);
        CHECK(kernels::fused_calls(kernels::FusedKernel::kGelu) == before + 1);
        CHECK(y.scalar_type() == torch::kBFloat16);
        y.backward(dy);
        const auto x64 = x0.to(torch::kDouble).requires_grad_(true);
        auto want = approximate == "none" ? x64 * 0.5 * torch::erfc(-x64 / std::sqrt(2.0))
                                          : x64 / (1 + torch::exp(-2 * k * (x64 + 0.044715 * x64.pow(3))));
        want.backward(dy.to(torch::kDouble));
        // fp32 evaluation moves a rounding across a bf16 boundary now and then: at most one place, rarely.
        for (const auto& [got, ref] : {std::pair{y.detach(), bf16(want.detach())}, std::pair{x.grad(), bf16(x64.grad())}}) {
          const auto ulps = bf16_ulps(got, ref);
          const int64_t worst = ulps.argmax().item<int64_t>();
          INFO("worst at x = " << x0[worst].item<float>() << ": " << got[worst].item<double>() << " vs " << ref[worst].item<double>());
          CHECK(ulps.max().item<double>() <= 1.0);
          CHECK((ulps == 0).to(torch::kDouble).mean().item<double>() >= 0.99);
        }
      }
    }
  }
  kernels::set_model_kernel_isa("");
}
