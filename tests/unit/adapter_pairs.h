// A quantised linear layer and its float twin with equal adapters, for the QLoRA unit tests (4-bit and 8-bit):
// the quantised layer's lora_B drawn from seed 3 (PEFT's zero init would hide the adapter), then lora_A, lora_B and,
// for DoRA, the magnitude copied to the twin.
#pragma once

#include <catch2/catch.hpp>

#include "models/adaptable_linear.h"
#include "models/lora.h"

namespace hftrain_test {

// Attaches rank-4 adapters (alpha 2, gaussian A) to both layers and makes the twin's equal to the quantised one's.
// `check_magnitude`: first check that both DoRA magnitudes (each from its own weight) agree to 1e-5.
inline void attach_equal_adapters(hftrain::AdaptableLinear& quantised, hftrain::AdaptableLinear& twin, bool dora,
                                  bool check_magnitude = false) {
  quantised->attach_adapter(4, 2.0, 0.0, dora, "gaussian");
  twin->attach_adapter(4, 2.0, 0.0, dora, "gaussian");
  torch::NoGradGuard no_grad;
  const auto* a = quantised->adapter();
  const auto* b = twin->adapter();
  torch::manual_seed(3);
  a->lora_B.normal_();
  b->lora_A.copy_(a->lora_A);
  b->lora_B.copy_(a->lora_B);
  if (!dora) return;
  if (check_magnitude)  // both from the same dequantised weight: equal to rounding
    CHECK(torch::allclose(a->magnitude.to(torch::kDouble), b->magnitude.to(torch::kDouble), 1e-5, 1e-6));
  b->magnitude.copy_(a->magnitude);
}

}  // namespace hftrain_test
