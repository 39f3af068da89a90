// The hftrain side of the encoder-decoder reference scripts, tests/reference/t5_reference.py and
// bart_reference.py (hidden: run by them, which set HFTRAIN_SEQ2SEQ_REFERENCE_DIR). For each case
// directory a script made: load case/model through a run spec with model.from_pretrained (type taken
// from config.json), run the forward in eval mode on case/inputs.safetensors and backpropagate its loss,
// save the loaded model to case/resaved, then take a few AdamW steps in train mode and save
// case/trained; case/hftrain_output.safetensors holds {logits, loss, grad.<parameter>...,
// trained_logits}. The script compares them with its own float64 forward.
#include "reference_case.h"

using namespace hftrain;
using namespace hftrain_test;

TEST_CASE("HF encoder-decoder directories made outside hftrain load, run, train and save (driven by t5_reference.py and bart_reference.py)",
          "[.][seq2seq_ref]") {
  for (const std::string& dir : reference_case_dirs("HFTRAIN_SEQ2SEQ_REFERENCE_DIR")) {
    INFO(dir);
    ReferenceCase rc = load_reference_case(dir);
    Model& model = *rc.model;
    const Batch& batch = rc.batch;
    REQUIRE(model.is_encoder_decoder());

    model.eval();
    ModelOutput out = model.forward(batch);
    REQUIRE(out.loss.defined());
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    for (auto& np : model.named_parameters()) {
      REQUIRE(np.value().grad().defined());
      written.emplace_back("grad." + np.key(), np.value().grad().clone());  // the optimizer below zeroes .grad in place
    }
    save_model_dir(dir + "/resaved", model);

    // A few optimizer steps (dropout on where the case has it), then the trained model's logits and files.
    model.train();
    torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(1e-2));
    for (int step = 0; step < 3; ++step) {
      optimizer.zero_grad();
      model.forward(batch).loss.backward();
      optimizer.step();
    }
    model.eval();
    torch::NoGradGuard no_grad;
    written.emplace_back("trained_logits", model.forward(batch).logits.contiguous());
    save_model_dir(dir + "/trained", model);
    save_safetensors(dir + "/hftrain_output.safetensors", written);
  }
}
