// The hftrain side of tests/reference/hf_models_reference.py (hidden: run by that script, which sets
// HFTRAIN_HF_REFERENCE_DIR). For each case directory the script made: load case/model through a run
// spec with model.from_pretrained (type taken from config.json), run the forward in eval mode on
// case/inputs.safetensors, write case/hftrain_output.safetensors {logits, loss} and save the loaded
// model to case/resaved. The script compares both against its own float64 forward.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "builtins/components.h"
#include "checkpoint/model_io.h"
#include "checkpoint/safetensors.h"
#include "train/pipeline.h"
#include "util/fs.h"

using namespace hftrain;

TEST_CASE("HF model directories made outside hftrain load and run (driven by hf_models_reference.py)",
          "[.][hfmodels_ref]") {
  const char* root = std::getenv("HFTRAIN_HF_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  const auto names = nlohmann::json::parse(read_text_file(std::string(root) + "/cases.json"));
  REQUIRE(names.size() > 0);
  const Components& c = builtin_components();
  for (const auto& name_json : names) {
    const std::string dir = std::string(root) + "/" + name_json.get<std::string>();
    INFO(dir);
    {
      std::ofstream spec(dir + "/spec.yaml");
      spec << "model: {from_pretrained: '" << dir << "/model'}\ndata: {type: digit_reversal}\ntraining: {output_dir: '" << dir << "/out'}\n";
    }
    RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
    torch::manual_seed(0);
    std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(spec.model.from_pretrained, *model);
    model->eval();
    auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
    Batch batch;
    batch.input_ids = inputs.at("input_ids");
    batch.attention_mask = inputs.at("attention_mask");
    if (inputs.count("token_type_ids")) batch.token_type_ids = inputs.at("token_type_ids");
    batch.labels = inputs.at("labels");
    torch::NoGradGuard no_grad;
    ModelOutput out = model->forward(batch);
    REQUIRE(out.loss.defined());
    save_safetensors(dir + "/hftrain_output.safetensors",
                     {{"logits", out.logits.contiguous()}, {"loss", out.loss.reshape({1}).contiguous()}});
    save_model_dir(dir + "/resaved", *model);
  }
}
