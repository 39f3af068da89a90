// The ZeRO-3 engine in one process: a gpt whose parameters the engine partitions holds no parameter
// memory outside its gather units, and its forward pass, evaluation and KV-cache generation (which run
// the units through the coordinator's hooks) give exactly what the same model unpartitioned gives.
#include <catch2/catch.hpp>

#include "distributed/comm.h"
#include "engine/zero_engine.h"
#include "generate/generate.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/mlp.h"
#include "optim/adamw.h"

using namespace hftrain;

TEST_CASE("a stage-3 gpt gathers per unit: same logits and generation, no parameter memory between units",
          "[unit][zero3]") {
  Gpt::Options o;
  o.n_layer = 2;
  o.n_head = 2;
  o.n_embd = 16;
  ModelContext context;
  context.vocab_size = 11;
  context.max_length = 24;
  torch::manual_seed(3);
  auto reference = std::make_shared<Gpt>(o, context);
  torch::manual_seed(3);
  auto model = std::make_shared<Gpt>(o, context);

  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<std::string> names;
  for (auto& np : model->named_parameters()) {
    named.emplace_back(np.key(), np.value());
    names.push_back(np.key());
  }
  ZeroOptions options;
  options.stage = 3;
  options.report_memory = false;
  options.persistence_threshold = 20;  // matrices partitioned, 16-element vectors whole
  options.gather_units = resolve_gather_units(*model, names);
  REQUIRE(options.gather_units.size() == 4);  // embeddings, 2 blocks, head
  LocalComm comm;
  auto adamw = [](std::vector<ParamGroup> groups) {
    return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), OptimizerHyper{});
  };
  ZeroEngine engine(make_param_groups(named, 0.0), names, adamw, options, comm);
  model->set_gather_hooks(engine.gather_hooks());

  auto storage_bytes = [&](const std::string& name) { return model->named_parameters()[name].storage().nbytes(); };
  CHECK(storage_bytes("transformer.h.0.attn.c_attn.weight") == 0);  // released
  CHECK(storage_bytes("transformer.wte.weight") == 0);
  CHECK(storage_bytes("transformer.h.0.ln_1.weight") > 0);  // persistent
  CHECK(model->named_parameters()["transformer.h.0.attn.c_attn.weight"].sizes() == torch::IntArrayRef({48, 16}));

  model->eval();
  reference->eval();
  torch::NoGradGuard no_grad;
  Batch batch;
  batch.input_ids = torch::randint(0, 11, {3, 9}, torch::kLong);
  CHECK(torch::equal(model->forward(batch).logits, reference->forward(batch).logits));
  CHECK(storage_bytes("transformer.h.1.mlp.c_fc.weight") == 0);

  GenerationConfig config;
  config.max_new_tokens = 8;
  at::Generator g1 = make_generator(1), g2 = make_generator(1);
  const std::vector<int64_t> prompt = {1, 4, 2, 7};
  const auto got = generate(*model, prompt, config, g1);
  CHECK(got == generate(*reference, prompt, config, g2));
  CHECK(got.size() == 8u);
  CHECK(storage_bytes("transformer.wte.weight") == 0);

  // After training the model is gathered whole for good and works without the engine.
  engine.gather_full_parameters();
  model->set_gather_hooks(nullptr);
  CHECK(storage_bytes("transformer.h.0.attn.c_attn.weight") > 0);
  CHECK(torch::equal(model->forward(batch).logits, reference->forward(batch).logits));
}

// zero.Init at the model level: built under DeferredInit a family holds no parameter memory, leaves the
// generator where a whole construction leaves it, and materialises exactly the whole construction's
// values, one parameter at a time; gpt (one pass), gpt2 (two passes) and mlp (torch's Linear init,
// drawn in the layers' constructors) cover the three ways families initialise.
TEST_CASE("a model built under DeferredInit holds no parameter memory and materialises the whole construction's values",
          "[unit][zero3]") {
  ModelContext context;
  context.vocab_size = 11;
  context.max_length = 24;
  context.num_labels = 3;
  context.num_features = 5;
  std::vector<std::pair<std::string, std::function<std::shared_ptr<Model>()>>> families = {
      {"gpt", [&] {
         Gpt::Options o;
         o.n_layer = 2, o.n_head = 2, o.n_embd = 16;
         return std::make_shared<Gpt>(o, context);
       }},
      {"gpt2", [&] {
         Gpt2::Options o;
         o.n_layer = 2, o.n_head = 2, o.n_embd = 16;
         return std::make_shared<Gpt2>(o, context);
       }},
      {"mlp", [&] {
         MlpClassifier::Options o;
         o.hidden_sizes = {8, 8};
         return std::make_shared<MlpClassifier>(o, context);
       }}};
  for (const auto& [family, build] : families) {
    INFO(family);
    torch::manual_seed(7);
    const std::shared_ptr<Model> whole = build();
    const torch::Tensor after_whole = at::detail::getDefaultCPUGenerator().get_state();
    torch::manual_seed(7);
    std::shared_ptr<Model> deferred;
    {
      DeferredInit scope(true);
      deferred = build();
    }
    CHECK(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), after_whole));
    REQUIRE(deferred->initialisation_deferred());
    for (const auto& np : deferred->named_parameters()) CHECK(np.value().storage().nbytes() == 0);

    torch::manual_seed(99);  // whatever ran in between: the replay draws from the saved state
    const torch::Tensor before = at::detail::getDefaultCPUGenerator().get_state();
    std::map<std::string, torch::Tensor> whole_values;
    for (const auto& np : whole->named_parameters()) whole_values[np.key()] = np.value();
    std::size_t seen = 0;
    deferred->materialise_parameters([&](const std::string& name, const torch::Tensor& value) {
      INFO(name);
      CHECK(torch::equal(value, whole_values.at(name)));
      ++seen;
      return name.find("bias") != std::string::npos;  // keep some whole, release the rest
    });
    CHECK(seen == whole_values.size());
    CHECK(torch::equal(at::detail::getDefaultCPUGenerator().get_state(), before));
    for (const auto& np : deferred->named_parameters()) {
      INFO(np.key());
      if (np.key().find("bias") != std::string::npos)
        CHECK(torch::equal(np.value(), whole_values.at(np.key())));
      else
        CHECK(np.value().storage().nbytes() == 0);
    }
    CHECK_THROWS_WITH(deferred->materialise_parameters([](const std::string&, const torch::Tensor&) { return false; }),
                      Catch::Contains("not waiting to be materialised"));
  }
}
