// PEFT's get_peft_model for LoRA / DoRA: chooses the target layers of a built model from a LoraConfig
// (the peft section or an adapter's adapter_config.json), attaches an adapter to each, freezes the base
// and marks what trains and is saved (adapters, modules_to_save, biases by `bias`). The model then
// carries an AdapterDescription (models/adapter_description.h).
#pragma once

#include <string>

#include "models/model.h"
#include "runspec/peft_args.h"

namespace hftrain {

struct AdapterSummary {
  int64_t trainable = 0;  // elements of the tensors that train (and are saved)
  int64_t all = 0;        // every parameter, counted as PEFT counts (a modules_to_save copy included)
  std::size_t adapted_layers = 0;
  std::vector<std::string> notes;  // settings PEFT changes on its own (fan_in_fan_out), for the log
  // PEFT print_trainable_parameters: "trainable params: N || all params: M || trainable%: P".
  std::string line() const;
};

// Attaches the adapters to `model` (of hftrain type `model_type`) and freezes the base. Targets that match
// no module, match a module that is not a linear layer, or a family without default targets when none are
// given, are ConfigErrors naming `where` (e.g. "peft" or the adapter_config.json path) and the key. Works
// on a model built under MetaConstruction too (the counts of `hftrain estimate`).
AdapterSummary attach_lora(Model& model, const std::string& model_type, PeftArgs args, const std::string& where);

// PEFT merge_and_unload: writes into `plain` (the same model type and base, without adapters) the weights of
// `adapted` with every adapter merged (W + s B A, or DoRA's m * V / ||V||_row) and the saved modules and
// biases it trained; of a 4-bit base (model.quantization_config), every quantised layer's dequantised weight.
// RuntimeFailure when a tensor of `adapted` has no counterpart in `plain`.
void merge_adapter_into(const Model& adapted, Model& plain);

}  // namespace hftrain
