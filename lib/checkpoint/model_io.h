// Model weights on disk: model.safetensors (HF parameter names) + config.json in a directory.
#pragma once

#include <string>

#include "checkpoint/safetensors.h"
#include "models/model.h"

namespace hftrain {

// Writes <dir>/model.safetensors and <dir>/config.json.
void save_model_dir(const std::string& dir, Model& model);

// The tensors model.safetensors holds: parameters then buffers, under their HF names.
NamedTensors model_tensors(Model& model);

// Loads model.safetensors from `path` into `model`, in place. Missing, unexpected or wrongly shaped
// tensors raise RuntimeFailure naming the file and tensor.
void load_model_weights(const std::string& path, Model& model);
// Same, from an already parsed file; `path` names it in error messages.
void load_model_weights(SafetensorsFile file, const std::string& path, Model& model);

}  // namespace hftrain
