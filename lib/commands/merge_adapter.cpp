// `hftrain merge-adapter` (see merge_adapter.h).
#include "commands/merge_adapter.h"

#include <filesystem>

#include "builtins/register_builtins.h"
#include "checkpoint/checkpoint_files.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "engine/precision.h"
#include "log/logger.h"
#include "models/quantize_model.h"
#include "train/model_and_data.h"
#include "util/error.h"
#include "util/fs.h"

namespace hftrain {
namespace fs = std::filesystem;
namespace {

// The dtype the base's floating-point weights are held in, as HF's from_pretrained(torch_dtype="auto") finds
// it: config.json's torch_dtype (or dtype, transformers >= 4.56), else the weights files' first floating
// tensor. float32 when neither says bfloat16 or float16.
torch::ScalarType base_dtype(const std::string& base_dir) {
  auto from_name = [](const std::string& name) {
    if (name == "bfloat16" || name == "BF16") return torch::kBFloat16;
    if (name == "float16" || name == "F16") return torch::kHalf;
    return torch::kFloat;
  };
  const std::string config_path = base_dir + "/config.json";
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(config_path + ": not valid JSON: " + e.what());
  }
  for (const char* key : {"torch_dtype", "dtype"})
    if (config.contains(key) && config[key].is_string()) return from_name(config[key].get<std::string>());
  std::string weights = base_dir + "/model.safetensors";
  if (!fs::exists(weights)) {  // sharded (the index was checked when the base loaded): its first shard
    const nlohmann::json index = nlohmann::json::parse(read_text_file(base_dir + "/model.safetensors.index.json"));
    std::string first;
    for (const auto& entry : index.at("weight_map").items())
      if (first.empty() || entry.value().get<std::string>() < first) first = entry.value().get<std::string>();
    if (first.empty()) return torch::kFloat;
    weights = base_dir + "/" + first;
  }
  for (const auto& e : read_safetensors_header(weights).tensors)
    if (e.dtype == "F32" || e.dtype == "BF16" || e.dtype == "F16" || e.dtype == "F64") return from_name(e.dtype);
  return torch::kFloat;
}

// The merged directory keeps the base's generation_config.json as the base has it, and has none when the base
// has none (saving derives one from config.json for a model that generates, as save_pretrained does).
void keep_base_generation_config(const std::string& base_dir, const std::string& out_dir) {
  const fs::path base = fs::path(base_dir) / "generation_config.json", out = fs::path(out_dir) / "generation_config.json";
  if (fs::exists(base)) write_file_atomic(out.string(), read_text_file(base.string()));
  else fs::remove(out);
}

// The 4-bit base an adapter was trained over: model.quantization_config of the run spec saved beside it (a run's
// output_dir or checkpoint holds run_spec.yaml); nullopt when there is none.
std::optional<QuantizationArgs> trained_quantization(const std::string& adapter_dir) {
  const fs::path path = fs::path(adapter_dir) / ckpt::kRunSpecFile;
  if (!fs::exists(path)) return std::nullopt;
  YAML::Node root;
  try {
    root = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(path.string() + ": not valid YAML: " + e.what());
  }
  Issues issues(path.string());
  std::optional<QuantizationArgs> quantization;
  take_quantization_config(root, issues, quantization);
  issues.throw_if_any();
  return quantization;
}

}  // namespace

int run_merge_adapter(const MergeAdapterRequest& request) {
  if (!fs::exists(fs::path(request.base_dir) / "config.json"))
    throw ConfigError("merge-adapter: '" + request.base_dir + "' is not an HF model directory (no config.json)");
  if (!fs::exists(fs::path(request.adapter_dir) / kAdapterConfigFile))
    throw ConfigError("merge-adapter: '" + request.adapter_dir + "' is not a PEFT adapter directory (no " +
                      std::string(kAdapterConfigFile) + ")");
  if (fs::exists(fs::path(request.out_dir)) && !fs::is_empty(fs::path(request.out_dir)) &&
      !fs::exists(fs::path(request.out_dir) / "config.json"))
    throw ConfigError("merge-adapter: '" + request.out_dir + "' exists and is not a model directory; choose an empty one");
  const Components& c = builtin_components();
  // The base model's type and options come from its config.json, as for model.from_pretrained (the data
  // and training sections are only what a spec requires: no data is read).
  const RunSpec spec = load_run_spec_text("model: {from_pretrained: " + yaml_quoted(request.base_dir) +
                                              "}\ndata: {type: digit_reversal}\ntraining: {output_dir: " +
                                              yaml_quoted(request.out_dir) + "}\n",
                                          request.base_dir + "/config.json", c.catalog());
  auto build = [&] {
    torch::manual_seed(0);  // heads the files lack start equal in both copies
    std::shared_ptr<Model> m = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(request.base_dir, *m);
    return m;
  };
  std::shared_ptr<Model> adapted = build();
  // An adapter trained over a 4-bit base merges into that base dequantised (PEFT merges into the weights it
  // trained against), and the merged model is saved in the compute dtype.
  const std::optional<QuantizationArgs> quantization = trained_quantization(request.adapter_dir);
  if (quantization) log_info("quantization (" + request.adapter_dir + "/" + ckpt::kRunSpecFile + "): " +
                             quantize_linear_layers(*adapted, *quantization).line() + "; merged dequantised");
  const AdapterSummary summary = attach_adapter_dir(*adapted, spec.model.type, request.adapter_dir, request.base_dir);
  std::shared_ptr<Model> plain = build();
  dequantize_linear_layers(*plain);  // a quantised base's layers take the merged weights as plain ones
  merge_adapter_into(*adapted, *plain);
  keep_loaded_config(*plain, request.base_dir);
  // merge_and_unload keeps the base's dtype: the merge is computed in fp32 and rounded once to it.
  SavedWeights saved;
  saved.dtype = quantization ? quant_settings(*quantization).compute_dtype : base_dtype(request.base_dir);
  save_model_dir(request.out_dir, *plain, kDefaultMaxShardBytes, saved);
  keep_base_generation_config(request.base_dir, request.out_dir);
  log_info("merged the adapter of " + request.adapter_dir + " (" + std::to_string(summary.adapted_layers) + " layers) into " +
           request.base_dir + ": " + request.out_dir + " (" + precision_name(saved.dtype) + ")");
  return 0;
}

}  // namespace hftrain
