// The hftrain side of tests/reference/lora_reference.py (hidden: run by that script, which sets
// HFTRAIN_LORA_REFERENCE_DIR). For each case directory the script made: load case/model through
// model.from_pretrained, attach the PEFT adapter case/adapter (as model.peft_adapter does), run the forward in
// eval mode on case/inputs.safetensors and backpropagate its loss; write case/hftrain_output.safetensors
// {logits, loss, grad.<PEFT tensor name>...}, the adapter saved again (case/resaved) and the merged plain
// model (case/merged, as hftrain merge-adapter writes it). The script compares them with the LoRA / DoRA
// formulas over its own float64 forward.
#include "reference_case.h"

#include "models/lora.h"

using namespace hftrain;
using namespace hftrain_test;

TEST_CASE("PEFT adapters made outside hftrain load, run, save and merge (driven by lora_reference.py)", "[.][lora_ref]") {
  for (const std::string& dir : reference_case_dirs("HFTRAIN_LORA_REFERENCE_DIR")) {
    INFO(dir);
    ReferenceCase rc = load_reference_case(dir);
    Model& model = *rc.model;
    attach_adapter_dir(model, rc.type, dir + "/adapter", dir + "/model");
    REQUIRE(model.adapter() != nullptr);
    model.eval();
    ModelOutput out = model.forward(rc.batch);
    REQUIRE(out.loss.defined());
    out.loss.backward();
    NamedTensors written = {{"logits", out.logits.detach().contiguous()}, {"loss", out.loss.detach().reshape({1}).contiguous()}};
    for (auto& np : model.named_parameters()) {
      if (!model.adapter()->holds(np.key())) {
        REQUIRE_FALSE(np.value().requires_grad());  // the frozen base
        continue;
      }
      REQUIRE(np.value().grad().defined());
      written.emplace_back("grad." + peft_tensor_name(*model.adapter(), np.key()), np.value().grad().clone());
    }
    save_safetensors(dir + "/hftrain_output.safetensors", written);
    save_model_dir(dir + "/resaved", model);

    const Components& c = builtin_components();
    std::shared_ptr<Model> plain = c.models.build(rc.type, load_run_spec(dir + "/spec.yaml", {}, c.catalog()).model.options,
                                                  ModelContext{});
    load_pretrained(dir + "/model", *plain);
    merge_adapter_into(model, *plain);
    plain->set_loaded_config(nlohmann::json::parse(read_text_file(dir + "/model/config.json")), nullptr);
    save_model_dir(dir + "/merged", *plain);
  }
}
