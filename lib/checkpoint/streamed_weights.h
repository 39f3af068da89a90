// Weights produced one tensor at a time instead of read from the model: ZeRO-3 gathers each flat group
// from the ranks' shards, hands its tensors to a writer, then frees it, so the whole model never exists
// in one process (checkpoint/model_io.h writes them; engines produce them).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "util/torch_compat.h"

namespace hftrain {

using TensorSink = std::function<void(const std::string& name, const torch::Tensor& values)>;

// produce(sink) calls sink(name, values) once for each of `names`, in that order (collective where the
// producer gathers: every rank calls produce, with a sink that may ignore what it receives).
struct StreamedWeights {
  std::vector<std::string> names;
  std::function<void(const TensorSink&)> produce;
};

}  // namespace hftrain
