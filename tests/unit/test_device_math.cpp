// The scalar math the CUDA kernels use (kernels/cuda/device_math.cuh, kernels/half_convert.h), compiled here as plain
// C++: bf16 rounding against c10::BFloat16, and SiLU, both GELU forms and their derivatives against float64 LibTorch and its autograd.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cuda/device_math.cuh"
#include "util/torch_compat.h"

namespace dm = hftrain::kernels::device_math;

TEST_CASE("device math: bf16 rounding equals c10::BFloat16's, ties to even, NaN and infinities included",
          "[unit][kernels]") {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.00390625f, 1.01171875f, 3.0e38f, -3.4e38f, 1e-40f, -1e-45f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  torch::manual_seed(3);
  const auto random = (torch::randn({20000}, torch::kDouble) * torch::exp(torch::randn({20000}, torch::kDouble) * 20))
                          .to(torch::kFloat);
  for (int64_t i = 0; i < random.numel(); ++i) values.push_back(random[i].item<float>());
  int checked = 0;
  for (const float v : values) {
    INFO("value " << v);
    const uint16_t want = c10::BFloat16(v).x;
    CHECK(hftrain::simd::float_to_bf16(v) == want);
    const float back = hftrain::simd::bf16_to_float(want);
    if (std::isnan(v)) {
      CHECK(std::isnan(back));
    } else {
      CHECK(back == static_cast<float>(c10::BFloat16(v)));
      CHECK(dm::round_bf16(v) == back);
    }
    ++checked;
  }
  CHECK(checked > 20000);
}

TEST_CASE("device math: SiLU, the GELU forms and their derivatives equal float64 LibTorch and its autograd",
          "[unit][kernels]") {
  const auto x64 = torch::linspace(-12.0, 12.0, 24001, torch::kDouble).requires_grad_(true);
  struct Case {
    std::string name;
    torch::Tensor y64;
    float (*value)(float);
    float (*derivative)(float);
  };
  std::vector<Case> cases;
  cases.push_back({"silu", torch::silu(x64), [](float x) { return dm::silu(x); },
                   [](float x) { return dm::silu_derivative(x); }});
  cases.push_back({"gelu exact", torch::gelu(x64, "none"), [](float x) { return dm::gelu(x, false); },
                   [](float x) { return dm::gelu_derivative(x, false); }});
  cases.push_back({"gelu tanh", torch::gelu(x64, "tanh"), [](float x) { return dm::gelu(x, true); },
                   [](float x) { return dm::gelu_derivative(x, true); }});
  for (const Case& c : cases) {
    INFO(c.name);
    const auto dydx = torch::autograd::grad({c.y64.sum()}, {x64})[0];
    double worst_value = 0, worst_derivative = 0;
    for (int64_t i = 0; i < x64.numel(); ++i) {
      const double x = x64[i].item<double>();
      const double y = c.y64[i].item<double>(), d = dydx[i].item<double>();
      // fp32 evaluation: relative to the value, or absolute below 1 (the tails where it goes to 0).
      worst_value = std::max(worst_value, std::abs(c.value(static_cast<float>(x)) - y) / std::max(1.0, std::abs(y)));
      worst_derivative =
          std::max(worst_derivative, std::abs(c.derivative(static_cast<float>(x)) - d) / std::max(1.0, std::abs(d)));
    }
    CHECK(worst_value < 2e-6);
    CHECK(worst_derivative < 2e-6);
  }
}
