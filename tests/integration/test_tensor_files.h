// Comparing safetensors files by their tensors rather than their bytes (tests that include torch only).
#pragma once

#include <string>

#include "checkpoint/safetensors.h"

namespace hftrain_test {

// The two safetensors files hold the same tensors (names, dtypes, shapes, bits), in whatever order.
// (A stage-3 model file lists its tensors in the order they are gathered, zero-to-fp32 in model order.)
inline bool same_tensors(const std::string& a, const std::string& b) {
  const auto x = hftrain::load_safetensors(a).tensors, y = hftrain::load_safetensors(b).tensors;
  if (x.size() != y.size()) return false;
  for (const auto& [name, t] : x) {
    auto it = y.find(name);
    if (it == y.end() || it->second.scalar_type() != t.scalar_type() || !it->second.equal(t)) return false;
  }
  return !x.empty();
}

}  // namespace hftrain_test
