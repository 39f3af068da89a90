// How HF names a routed expert's tensors, declared once for the model (expert parallelism) and the estimate:
// <block>.experts.<n>.<rest>, e.g. model.layers.3.block_sparse_moe.experts.5.w1.weight. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>

namespace hftrain {

struct RoutedExpertName {
  std::string block;   // the name before ".experts."
  int64_t expert = -1;  // n; -1: not a routed expert's tensor
};

inline RoutedExpertName routed_expert_name(const std::string& name) {
  static const std::string marker = ".experts.";
  const std::size_t at = name.find(marker);
  if (at == std::string::npos) return {};
  const std::size_t begin = at + marker.size(), end = name.find('.', begin);
  if (end == std::string::npos || end == begin || name.find_first_not_of("0123456789", begin) != end) return {};
  return {name.substr(0, at), std::stoll(name.substr(begin, end - begin))};
}

}  // namespace hftrain
