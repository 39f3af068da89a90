// The ZeRO-3 engine in one process: a gpt whose parameters the engine partitions holds no parameter
// memory outside its gather units, and its forward pass, evaluation and KV-cache generation (which run
// the units through the coordinator's hooks) give exactly what the same model unpartitioned gives.
#include <catch2/catch.hpp>

#include "distributed/comm.h"
#include "engine/zero_engine.h"
#include "generate/generate.h"
#include "models/gpt.h"
#include "models/gpt2.h"
#include "models/lora.h"
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
  EngineSettings options;
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

// An adapter's frozen base at stage 3: partitioned like the trainable parameters and gathered per unit, held
// in backward only while backward is inside a unit that uses it (also when the unit is recomputed), so that
// the gathered peak stays near two blocks' worth rather than the whole base. One AdamW step gives the
// parameters of the same model under the stage-0 engine.
TEST_CASE("a stage-3 LoRA gpt partitions its frozen base and releases it as backward leaves each unit", "[unit][zero3][peft]") {
  for (const bool checkpointing : {false, true}) {
    INFO("gradient checkpointing " << checkpointing);
    Gpt::Options o;
    o.n_layer = 4;
    o.n_head = 2;
    o.n_embd = 32;
    o.dropout = 0.0;
    ModelContext context;
    context.vocab_size = 11;
    context.max_length = 24;
    auto build = [&](int stage, std::shared_ptr<Gpt>& model, std::unique_ptr<ZeroEngine>& engine, LocalComm& comm) {
      torch::manual_seed(5);
      model = std::make_shared<Gpt>(o, context);
      PeftArgs args;
      args.r = 4;
      args.lora_alpha = 8;
      args.init_lora_weights = "gaussian";
      attach_lora(*model, "gpt", args, "peft");
      if (checkpointing) model->enable_gradient_checkpointing();
      std::vector<std::pair<std::string, torch::Tensor>> trainable;
      std::vector<std::string> names, frozen_names;
      EngineSettings options;
      options.stage = stage;
      options.report_memory = false;
      options.persistence_threshold = 20;
      options.gather_limits.prefetch_elements = 0;  // no prefetch: what is live is what the units hold
      for (auto& np : model->named_parameters()) {
        if (np.value().requires_grad()) {
          trainable.emplace_back(np.key(), np.value());
          names.push_back(np.key());
        } else {
          options.frozen.emplace_back(np.key(), np.value());
          frozen_names.push_back(np.key());
        }
      }
      if (stage == 3) {
        options.gather_units = resolve_gather_units(*model, names);
        options.frozen_gather_units = resolve_gather_units(*model, frozen_names);
      }
      auto adamw = [](std::vector<ParamGroup> groups) {
        return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), OptimizerHyper{});
      };
      engine = std::make_unique<ZeroEngine>(make_param_groups(trainable, 0.0), names, adamw, options, comm);
      model->set_gather_hooks(engine->gather_hooks());
    };
    LocalComm comm0, comm3;
    std::shared_ptr<Gpt> reference, model;
    std::unique_ptr<ZeroEngine> whole, partitioned;
    build(0, reference, whole, comm0);
    build(3, model, partitioned, comm3);

    int64_t frozen_elements = 0, block_elements = 0;
    for (auto& np : model->named_parameters())
      if (!np.value().requires_grad()) {
        frozen_elements += np.value().numel();
        if (np.key().rfind("transformer.h.0.", 0) == 0) block_elements += np.value().numel();
      }
    CHECK(model->named_parameters()["transformer.h.1.attn.c_attn.weight"].storage().nbytes() == 0);
    const int64_t frozen_bytes = partitioned->memory().frozen_param_bytes;
    CHECK(frozen_bytes >= 4 * frozen_elements);  // one process: its shard is the whole (padded) base

    Batch batch;
    torch::manual_seed(9);
    batch.input_ids = torch::randint(0, 11, {3, 12}, torch::kLong);
    batch.labels = batch.input_ids.clone();
    for (auto* m : {reference.get(), model.get()}) m->train();
    whole->backward(reference->forward(batch).loss, true);
    partitioned->backward(model->forward(batch).loss, true);
    // Gathered at once in backward: the unit entered plus the one just left (trainable groups included), far
    // below the whole base that holding every frozen group until the end of backward would reach.
    const int64_t peak = partitioned->memory().param_gathered_peak / 4;
    CHECK(peak < 3 * block_elements);  // (the whole base: more than 4 blocks)
    CHECK(frozen_elements > 4 * block_elements);
    CHECK(model->named_parameters()["transformer.h.1.attn.c_attn.weight"].storage().nbytes() == 0);
    whole->step(1e-2);
    partitioned->step(1e-2);

    model->eval();
    reference->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor expected = reference->forward(batch).logits, got = model->forward(batch).logits;
    CHECK((got - expected).abs().max().item<double>() < 1e-5);
    CHECK(!torch::equal(expected, [&] {  // the step changed the adapters: the comparison is not of the base alone
      torch::manual_seed(5);
      auto base = std::make_shared<Gpt>(o, context);
      base->eval();
      return base->forward(batch).logits;
    }()));
  }
}
