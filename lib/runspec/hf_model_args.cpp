// run_clm's torch_dtype / attn_implementation onto what hftrain has (see hf_model_args.h).
#include "runspec/hf_model_args.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "runspec/hf_names.h"
#include "util/fs.h"

namespace hftrain {
namespace {

bool is_one_of(const YAML::Node& v, const std::vector<std::string>& names) {
  return v.IsScalar() && std::find(names.begin(), names.end(), v.Scalar()) != names.end();
}

// The dtype HF's `auto` loads a checkpoint in: what model.from_pretrained's config.json names (`dtype`, or
// `torch_dtype` in older transformers); "" when there is nothing to read. `source` names the file.
std::string auto_dtype(const YAML::Node& root, std::string& source) {
  const YAML::Node dir = lookup(lookup(root, "model"), "from_pretrained");
  if (!dir.IsScalar() || dir.Scalar().empty()) return "";
  source = dir.Scalar() + "/config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec)) return "";
  try {
    const nlohmann::json config = nlohmann::json::parse(read_text_file(source));
    for (const char* key : {"dtype", "torch_dtype"})
      if (config.contains(key) && config[key].is_string()) return config[key].get<std::string>();
  } catch (const std::exception&) {
    // not JSON: the model section's own parse reports it
  }
  return "";
}

void move_dtype(YAML::Node& root, const YAML::Node& v, Issues& issues, std::map<std::string, std::string>& origins,
                std::vector<std::string>& notes) {
  if (!is_one_of(v, hf_model_dtypes())) {
    issues.add("model.torch_dtype", v,
               "'" + yaml_text(v) + "' is not a dtype run_clm loads a model in" +
                   did_you_mean(v.IsScalar() ? v.Scalar() : "", hf_model_dtypes()) + " (auto, bfloat16, float16, float32)");
    return;
  }
  std::string dtype = v.Scalar(), said = "model.torch_dtype " + v.Scalar();
  if (dtype == "auto") {
    std::string source;
    dtype = auto_dtype(root, source);
    said += dtype.empty() ? " (no config.json dtype to read: float32)" : " (" + source + ": " + dtype + ")";
    if (dtype.empty()) dtype = "float32";
  }
  if (dtype == "float32") {
    notes.push_back(said + ": the weights load in float32, as hftrain always loads them (precision.bf16 then trains in "
                           "bf16, as HF's --bf16 autocasts a float32 model)");
    return;
  }
  const std::string key = dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "fp16" : "";
  if (key.empty()) {
    issues.add("model.torch_dtype", v, said + ": hftrain trains in float32, bfloat16 or float16, not " + dtype);
    return;
  }
  place_setting(root, issues, origins, "precision", key, YAML::Node(true), v.Scalar(),
                SettingSource{"model.torch_dtype", v, issues});
  notes.push_back(said + " is precision." + key + " here: " + dtype + " weights in forward and backward, with float32 "
                  "master weights and optimizer state (which HF's " + dtype + " model does not keep)");
}

void check_attention(const YAML::Node& v, Issues& issues, std::vector<std::string>& notes) {
  if (is_one_of(v, hf_attention_implementations())) {
    notes.push_back("model.attn_implementation " + v.Scalar() + ": hftrain's own attention computes the same exact "
                    "softmax attention (on the CPU its fused kernel, which never holds the [queries x keys] matrix, as "
                    "FlashAttention-2; LibTorch's attention on a GPU)");
    return;
  }
  const std::string text = yaml_text(v);
  std::string why = "hftrain computes exact softmax attention with its own kernel, which is what eager, sdpa and "
                    "flash_attention_2 name (those are accepted)";
  if (text.find('/') != std::string::npos) why += "; a Hub kernel repository would have to be downloaded";
  if (text.rfind("flex_attention", 0) == 0) why += "; flex_attention's score and mask modifications are not built";
  issues.add("model.attn_implementation", v,
             "'" + text + "' is not built" + did_you_mean(text, hf_attention_implementations()) + ": " + why);
}

}  // namespace

const std::vector<std::string>& hf_model_dtypes() {
  static const std::vector<std::string> names = {"auto", "bfloat16", "float16", "float32"};
  return names;
}

const std::vector<std::string>& hf_attention_implementations() {
  static const std::vector<std::string> names = {"eager", "sdpa", "flash_attention_2"};
  return names;
}

void move_hf_model_arguments(YAML::Node& root, Issues& issues, std::map<std::string, std::string>& origins,
                             std::vector<std::string>& notes) {
  YAML::Node model = lookup(root, "model");
  if (!model.IsMap()) return;  // the section's own parse reports it
  for (const char* key : {"torch_dtype", "attn_implementation"}) {
    const YAML::Node v = lookup(model, key);
    if (!v.IsDefined()) continue;
    if (!v.IsNull()) {  // null: HF's None, nothing asked
      if (std::string(key) == "torch_dtype")
        move_dtype(root, v, issues, origins, notes);
      else
        check_attention(v, issues, notes);
    }
    while (lookup(model, key).IsDefined()) model.remove(key);  // a repeat is reported as a duplicate already
  }
}

}  // namespace hftrain
