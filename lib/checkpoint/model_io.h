// Model weights on disk: model.safetensors (HF parameter names) + config.json in a directory.
#pragma once

#include <string>

#include "models/model.h"

namespace hftrain {

// Writes <dir>/model.safetensors and <dir>/config.json.
void save_model_dir(const std::string& dir, Model& model);

// Loads model.safetensors from `path` into `model`, in place. Missing, unexpected or wrongly shaped
// tensors raise RuntimeFailure naming the file and tensor.
void load_model_weights(const std::string& path, Model& model);

}  // namespace hftrain
