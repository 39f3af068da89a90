// The hftrain side of tests/reference/t5_reference.py (hidden: run by that script, which sets
// HFTRAIN_T5_REFERENCE_DIR). For each case directory the script made: load case/model through a run spec
// with model.from_pretrained (type taken from config.json), run the forward in eval mode on
// case/inputs.safetensors and backpropagate its loss, save the loaded model to case/resaved, then take a
// few AdamW steps in train mode and save case/trained; case/hftrain_output.safetensors holds {logits,
// loss, grad.<parameter>..., trained_logits}. The script compares them with its own float64 forward.
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

TEST_CASE("HF T5 directories made outside hftrain load, run, train and save (driven by t5_reference.py)", "[.][t5_ref]") {
  const char* root = std::getenv("HFTRAIN_T5_REFERENCE_DIR");
  REQUIRE(root != nullptr);
  const auto names = nlohmann::json::parse(read_text_file(std::string(root) + "/cases.json"));
  REQUIRE(names.size() > 0);
  const Components& c = builtin_components();
  for (const auto& name_json : names) {
    const std::string dir = std::string(root) + "/" + name_json.get<std::string>();
    INFO(dir);
    {
      std::ofstream spec(dir + "/spec.yaml");
      spec << "model: {from_pretrained: '" << dir << "/model'}\ndata: {type: digit_reversal}\ntraining: {output_dir: '" << dir
           << "/out'}\n";
    }
    RunSpec spec = load_run_spec(dir + "/spec.yaml", {}, c.catalog());
    REQUIRE(spec.model.type == "t5");
    torch::manual_seed(0);
    std::shared_ptr<Model> model = c.models.build(spec.model.type, spec.model.options, ModelContext{});
    load_pretrained(spec.model.from_pretrained, *model);
    auto inputs = load_safetensors(dir + "/inputs.safetensors").tensors;
    Batch batch;
    batch.input_ids = inputs.at("input_ids");
    batch.attention_mask = inputs.at("attention_mask");
    batch.labels = inputs.at("labels");

    model->eval();
    ModelOutput out = model->forward(batch);
    REQUIRE(out.loss.defined());
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    for (auto& np : model->named_parameters()) {
      REQUIRE(np.value().grad().defined());
      written.emplace_back("grad." + np.key(), np.value().grad().clone());  // the optimizer below zeroes .grad in place
    }
    save_model_dir(dir + "/resaved", *model);

    // A few optimizer steps (dropout on where the case has it), then the trained model's logits and files.
    model->train();
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-2));
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      model->forward(batch).loss.backward();
      optimizer.step();
    }
    model->eval();
    torch::NoGradGuard no_grad;
    written.emplace_back("trained_logits", model->forward(batch).logits.contiguous());
    save_model_dir(dir + "/trained", *model);
    save_safetensors(dir + "/hftrain_output.safetensors", written);
  }
}
