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
