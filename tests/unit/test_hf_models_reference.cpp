// The hftrain side of tests/reference/hf_models_reference.py (hidden: run by that script, which sets
// HFTRAIN_HF_REFERENCE_DIR). For each case directory the script made: load case/model through a run
// spec with model.from_pretrained (type taken from config.json), run the forward in eval mode on
// case/inputs.safetensors, write case/hftrain_output.safetensors {logits, loss} and save the loaded
// model to case/resaved. The script compares both against its own float64 forward.
#include "reference_case.h"

using namespace hftrain;
using namespace hftrain_test;

TEST_CASE("HF model directories made outside hftrain load and run (driven by hf_models_reference.py)",
          "[.][hfmodels_ref]") {
  for (const std::string& dir : reference_case_dirs("HFTRAIN_HF_REFERENCE_DIR")) {
    INFO(dir);
    ReferenceCase rc = load_reference_case(dir);
    rc.model->eval();
    torch::NoGradGuard no_grad;
    ModelOutput out = rc.model->forward(rc.batch);
    REQUIRE(out.loss.defined());
    save_safetensors(dir + "/hftrain_output.safetensors",
                     {{"logits", out.logits.contiguous()}, {"loss", out.loss.reshape({1}).contiguous()}});
    save_model_dir(dir + "/resaved", *rc.model);
  }
}

// The hftrain side of tests/reference/decoder_families_reference.py (hidden: run by it, which sets
// HFTRAIN_DECODER_REFERENCE_DIR): the llama-like families (qwen2, mistral, qwen3). For each case: load
// case/model through model.from_pretrained, run the forward in eval mode and backpropagate its loss, save
// the loaded model to case/resaved; case/hftrain_output.safetensors holds {logits, loss, grad.<parameter>...}.
TEST_CASE("HF decoder directories made outside hftrain load, run and save with every gradient (driven by "
          "decoder_families_reference.py)",
          "[.][decoder_ref]") {
  for (const std::string& dir : reference_case_dirs("HFTRAIN_DECODER_REFERENCE_DIR")) {
    INFO(dir);
    ReferenceCase rc = load_reference_case(dir);
    rc.model->eval();
    ModelOutput out = rc.model->forward(rc.batch);
    REQUIRE(out.loss.defined());
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    for (auto& np : rc.model->named_parameters()) {
      REQUIRE(np.value().grad().defined());
      written.emplace_back("grad." + np.key(), np.value().grad().clone());
    }
    save_safetensors(dir + "/hftrain_output.safetensors", written);
    save_model_dir(dir + "/resaved", *rc.model);
  }
}
