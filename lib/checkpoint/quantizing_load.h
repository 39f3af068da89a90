// QLoRA's base loaded (or initialised) without ever holding it whole in its float dtype: the model is built with its parameters
// released (models/model.h DeferredInit), then each parameter is produced in turn (Model::materialise_parameters),
// filled from the HF model directory and, for a linear layer the quantization selects, quantised at once (or, for
// a checkpoint saved quantised, given its file codes and quant state) before the next one is read. The peak is the
// quantised model plus one float weight, as transformers' bitsandbytes loading quantises each weight as it arrives.
#pragma once

#include <string>

#include "models/model.h"
#include "runspec/quantization_args.h"

namespace hftrain {

// `model` was built under DeferredInit and is still deferred; `dir` is an HF model directory (config.json), or empty
// for a model that starts from its own initialisation (each weight quantised as it is drawn). Tensors the directory
// does not hold keep their initial values (the heads HF initialises), as load_pretrained_dir does; buffers are read
// whole. Errors as load_pretrained_dir's, naming the file and tensor. Returns the number of quantised layers.
int64_t load_pretrained_quantizing(const std::string& dir, Model& model, const QuantizationArgs& args);

}  // namespace hftrain
