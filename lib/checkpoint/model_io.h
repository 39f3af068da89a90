// Model weights on disk: model.safetensors (HF parameter names) + config.json in a directory, or HF's
// sharded layout model-0000x-of-0000y.safetensors + model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "checkpoint/safetensors.h"
#include "checkpoint/streamed_weights.h"
#include "models/model.h"
#include "models/quantize_model.h"

namespace hftrain {

// HF save_pretrained's default max_shard_size ("5GB").
constexpr uint64_t kDefaultMaxShardBytes = 5ull * 1000 * 1000 * 1000;

// What saved weights are made of: `replacements` (name -> tensor) stand in for the model's own tensors
// (mixed precision: the fp32 master weights instead of the 16-bit parameters), and floating-point
// tensors are written as `dtype` (precision.save_dtype); config.json's torch_dtype says which.
struct SavedWeights {
  std::map<std::string, torch::Tensor> replacements;
  torch::ScalarType dtype = torch::kFloat;
};

// An adapter model (Model::adapter): PEFT's adapter_config.json + adapter_model.safetensors, nothing else.
// Otherwise writes <dir>/config.json and the weights: model.safetensors when they fit in `max_shard_bytes`, else
// shards model-0000x-of-0000y.safetensors (each at most max_shard_bytes unless one tensor is larger)
// plus model.safetensors.index.json {"metadata": {"total_size"}, "weight_map"}. Weight files are
// written with metadata {"format": "pt"}; tied weights are stored once (they are one parameter).
// Files are written as streams, one tensor at a time; with `streamed`, its tensors come first (in the
// producer's order) and never all exist at once (the model's own tensors of those names are not read).
void save_model_dir(const std::string& dir, Model& model, uint64_t max_shard_bytes = kDefaultMaxShardBytes,
                    const SavedWeights& weights = {}, const StreamedWeights* streamed = nullptr);

// One model.safetensors file at `path` (no config.json, never split; e.g. inside a checkpoint), written as
// save_model_dir writes each file. The caller makes it durable where it lands (it is fsynced).
void write_model_file(const std::string& path, Model& model, const SavedWeights& weights = {},
                      const StreamedWeights* streamed = nullptr);

// The tensors model.safetensors holds: parameters then buffers, under their HF names; a 4-bit weight as
// bitsandbytes writes it (models/quantized_state.h: the codes and the quant state). For a model with a
// PEFT adapter (Model::adapter): the adapter's tensors only. Names in `skip` are left out (and not read).
NamedTensors model_tensors(Model& model, const SavedWeights& weights = {}, const std::set<std::string>& skip = {});

// PEFT's file names (save_pretrained of a PeftModel).
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
// The weights file of `model` in a save or checkpoint: model.safetensors, or adapter_model.safetensors for
// an adapter model (whose tensors are named as PEFT names them: file_tensor_name).
std::string weights_file_name(const Model& model);
std::string file_tensor_name(const Model& model, const std::string& name);
// Reads a weights file written for `model`, its tensors under the model's own names.
SafetensorsFile read_weights_file(const std::string& path, const Model& model);
SafetensorsFile in_model_names(const Model& model, SafetensorsFile file);

// Loads model.safetensors from `path` into `model`, in place (an adapter model: the adapter's tensors, by
// PEFT's names or the model's). When `path` does not exist but its
// directory holds model.safetensors.index.json, the shards are loaded. Missing, unexpected or wrongly
// shaped tensors raise RuntimeFailure naming the file and tensor.
void load_model_weights(const std::string& path, Model& model);
// Same, from an already parsed file; `path` names it in error messages. A parameter whose memory is released
// (another rank holds it: expert data parallelism) is skipped when `skip_released`, else refused naming it.
void load_model_weights(SafetensorsFile file, const std::string& path, Model& model, bool skip_released = false);

// Loads an HF model directory (model.safetensors or the sharded index) with HF's loading rules for
// the model's family (see spec/model_families.h): base-model prefix added, LayerNorm gamma/beta
// renamed, tensors HF ignores skipped, head tensors HF initialises fresh kept (with a warning).
// A missing, unexpected or wrongly shaped tensor raises ConfigError naming the tensor, the file and
// both shapes. A quantised checkpoint (config.json's quantization_config: bitsandbytes 4-bit) loads as it is:
// the layers its quantization_config selects take their packed codes and quant state, checked
// (models/quantize_model.h load_quantized_weights), everything else loads as above.
void load_pretrained_dir(const std::string& dir, Model& model);

// Where each of the model's tensors is in an HF model directory, under load_pretrained_dir's rules and
// checks (read from the files' headers alone; a bad directory is a ConfigError naming the file and
// tensor). Tensors it does not list are the heads HF initialises when missing (logged as a warning).
// read() gives a tensor's values, or `count` flat elements from `begin`, without reading the rest of the
// file -- so that each ZeRO-3 rank reads only its partition of the weights.
struct PretrainedPlan {
  struct Source {
    std::string file, key;
    int64_t offset = 0, numel = -1;  // a run of a stacked file tensor (LoadRules::stacked); -1 = all of it
  };
  std::map<std::string, Source> sources;  // model tensor name -> file and name in it
  torch::Tensor read(const std::string& name, int64_t begin = 0, int64_t count = -1) const;
  // A quantised checkpoint: its quantization_config, and each 4-bit weight's file tensors (not in `sources`) by
  // suffix, "" the codes (models/quantized_state.h).
  std::optional<QuantizationArgs> quantization;
  std::map<std::string, std::map<std::string, Source>> quantized;
  QuantStateParts read_quantized(const std::string& weight_name) const;

 private:
  torch::Tensor read_source(const Source& s, int64_t begin, int64_t count) const;
  mutable std::map<std::string, std::shared_ptr<SafetensorsReader>> readers_;
};
PretrainedPlan plan_pretrained_dir(const std::string& dir, Model& model);

}  // namespace hftrain
