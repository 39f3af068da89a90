// The one clip coefficient every engine uses (engine/engine.h clip_coefficient): torch 1.13's
// clip_grad_norm_ arithmetic in float32 -- the reciprocal of norm + 1e-6 first, then the scale, clamped at 1 --
// which the bitwise comparisons with PyTorch depend on.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "engine/engine.h"

using namespace hftrain;

namespace {

// The coefficient as float32 arithmetic spells it (each step rounded to float).
float by_hand(float norm, double max_norm) {
  volatile float shifted = norm + static_cast<float>(1e-6);
  volatile float reciprocal = 1.0f / shifted;
  volatile float scaled = reciprocal * static_cast<float>(max_norm);
  return scaled < 1.0f ? scaled : 1.0f;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("clip coefficient: torch 1.13's rounding, reciprocal then scale, clamped at 1", "[unit][engine_clipping]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-3.0f, 4.0f);
  int divisions_differ = 0;
  for (int i = 0; i < 2000; ++i) {
    const float norm = std::pow(10.0f, exponent(rng));
    const double max_norm = i % 2 ? 1.0 : 0.3;
    const float coef = clip_coefficient(torch::scalar_tensor(norm, torch::kFloat), max_norm).item<float>();
    INFO("norm " << norm << ", max_norm " << max_norm);
    CHECK(same_bits(coef, by_hand(norm, max_norm)));
    const float divided = static_cast<float>(max_norm) / (norm + static_cast<float>(1e-6));
    if (divided < 1.0f && !same_bits(coef, divided)) ++divisions_differ;
  }
  CHECK(divisions_differ > 0);  // a plain division would round differently somewhere in this range
}

TEST_CASE("clip_grad_norm scales every gradient by the coefficient of the global norm", "[unit][engine_clipping]") {
  torch::manual_seed(3);
  std::vector<torch::Tensor> params = {torch::randn({5, 4}).requires_grad_(), torch::randn({7}).requires_grad_()};
  for (auto& p : params) p.mutable_grad() = torch::randn(p.sizes()) * 3;
  const std::vector<torch::Tensor> before = {params[0].grad().clone(), params[1].grad().clone()};
  const DeviceScalar result = clip_grad_norm(params, 0.5);
  CHECK(result.pending());  // the norm stays a tensor until it is logged
  const double norm = result.value();
  CHECK_FALSE(result.pending());
  const auto total = at::linalg_vector_norm(
      torch::stack({at::linalg_vector_norm(before[0], 2, c10::nullopt, false, c10::nullopt),
                    at::linalg_vector_norm(before[1], 2, c10::nullopt, false, c10::nullopt)}),
      2, c10::nullopt, false, c10::nullopt);
  CHECK(norm == total.item<double>());
  const torch::Tensor coef = clip_coefficient(total, 0.5);
  CHECK(coef.item<float>() < 1.0f);
  for (std::size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(params[i].grad(), before[i] * coef));
}
