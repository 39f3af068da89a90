// Whole-model parity of the fused CPU kernels with LibTorch's ops: the loss and every gradient of one forward and
// backward with the kernels switched on and off (kernels::set_fused_kernels_enabled), and their comparison.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "kernels/kernel_choice.h"
#include "models/model.h"

namespace hftrain_test {

inline std::map<std::string, torch::Tensor> loss_and_gradients(hftrain::Model& model, const hftrain::Batch& batch,
                                                               bool fused) {
  hftrain::kernels::set_fused_kernels_enabled(fused);
  model.zero_grad();
  auto out = model.forward(batch);
  out.loss.backward();
  std::map<std::string, torch::Tensor> r = {{"loss", out.loss.detach().clone()}};
  for (const auto& np : model.named_parameters())
    if (np.value().grad().defined()) r[np.key()] = np.value().grad().clone();
  hftrain::kernels::set_fused_kernels_enabled(true);
  return r;
}

// Each tensor of `fused` within 1e-5 of the largest magnitude of its counterpart in `ops` (at least 1e-4).
inline void check_within_1e5(const std::map<std::string, torch::Tensor>& fused, const std::map<std::string, torch::Tensor>& ops) {
  REQUIRE(fused.size() == ops.size());
  REQUIRE(fused.size() > 5);
  for (const auto& [name, want] : ops) {
    INFO(name);
    const double scale = std::max(1e-4, want.abs().max().item<double>());
    CHECK((fused.at(name) - want).abs().max().item<double>() <= 1e-5 * scale);
  }
}

// |a - b| in units of b's last bf16 place (2^-7 of its binade; the smallest normal's below it); 0 where both are
// below 1e-30 in magnitude (the far tails, where fp32 evaluation underflows as the fp32 kernels' tests allow too).
inline torch::Tensor bf16_ulps(const torch::Tensor& a, const torch::Tensor& b) {
  const auto b64 = b.to(torch::kDouble), a64 = a.to(torch::kDouble);
  const auto ulp = torch::pow(2.0, torch::floor(torch::log2(b64.abs().clamp_min(1.1754943508222875e-38))) - 7);
  const auto negligible = torch::logical_and(a64.abs() < 1e-30, b64.abs() < 1e-30);
  return torch::where(negligible, torch::zeros_like(b64), (a64 - b64).abs() / ulp);
}

}  // namespace hftrain_test
