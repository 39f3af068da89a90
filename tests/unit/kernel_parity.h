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

}  // namespace hftrain_test
