// Shared by the hidden Catch2 cases that the Python reference scripts drive (test_hf_models_reference.cpp,
// test_seq2seq_reference.cpp): the case directories a script made (named in <root>/cases.json, root from
// an environment variable), and each case's model loaded through a run spec with model.from_pretrained
// (type taken from config.json) plus its batch from case/inputs.safetensors.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "builtins/register_builtins.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "models/adapter_description.h"
#include "models/model.h"
#include "train/model_and_data.h"
#include "util/fs.h"

namespace hftrain_test {

// The case directories under $env_var (which the script sets).
inline std::vector<std::string> reference_case_dirs(const char* env_var) {
  const char* root = std::getenv(env_var);
  REQUIRE(root != nullptr);
  const auto names = nlohmann::json::parse(hftrain::read_text_file(std::string(root) + "/cases.json"));
  REQUIRE(names.size() > 0);
  std::vector<std::string> dirs;
  for (const auto& n : names) dirs.push_back(std::string(root) + "/" + n.get<std::string>());
  return dirs;
}

struct ReferenceCase {
  std::string type;  // the hftrain model type config.json chose
  std::shared_ptr<hftrain::Model> model;
  hftrain::Batch batch;
};

// Loads dir/model through model.from_pretrained (seed 0 before building) and dir/inputs.safetensors
// (input_ids, attention_mask, labels, token_type_ids when present).
inline ReferenceCase load_reference_case(const std::string& dir) {
  using namespace hftrain;
  {
    std::ofstream spec(dir + "/spec.yaml");
    spec << "model: {from_pretrained: '" << dir << "/model'}\ndata: {type: digit_reversal}\ntraining: {output_dir: '" << dir
         << "/out'}\n";
  }
  const Components& c = builtin_components();
  RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
  ReferenceCase out;
  out.type = spec.model.type;
  torch::manual_seed(0);
  out.model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
  load_pretrained(spec.model.from_pretrained, *out.model);
  auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
  out.batch.input_ids = inputs.at("input_ids");
  out.batch.attention_mask = inputs.at("attention_mask");
  if (inputs.count("token_type_ids")) out.batch.token_type_ids = inputs.at("token_type_ids");
  out.batch.labels = inputs.at("labels");
  return out;
}

// After a backward through a model with a PEFT adapter: requires every base parameter frozen and every adapter
// parameter to hold a gradient, appends each as "grad.<PEFT's tensor name>" to `written` and returns the adapter's
// parameters (what an optimizer over the adapter steps).
inline std::vector<torch::Tensor> append_adapter_gradients(hftrain::Model& model, hftrain::NamedTensors& written) {
  std::vector<torch::Tensor> trained;
  for (auto& np : model.named_parameters()) {
    if (!model.adapter()->holds(np.key())) {
      REQUIRE_FALSE(np.value().requires_grad());
      continue;
    }
    REQUIRE(np.value().grad().defined());
    written.emplace_back("grad." + hftrain::peft_tensor_name(*model.adapter(), np.key()), np.value().grad().clone());
    trained.push_back(np.value());
  }
  return trained;
}

}  // namespace hftrain_test
