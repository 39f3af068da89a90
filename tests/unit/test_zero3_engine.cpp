// The ZeRO-3 engine in one process: a gpt whose parameters the engine partitions holds no parameter
// memory outside its gather units, and its forward pass, evaluation and KV-cache generation (which run
// the units through the coordinator's hooks) give exactly what the same model unpartitioned gives.
#include <catch2/catch.hpp>

#include "dist/comm.h"
#include "engine/data_parallel.h"
#include "generate/generate.h"
#include "models/gpt.h"
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
  DataParallelOptions options;
  options.stage = 3;
  options.report_memory = false;
  options.persistence_threshold = 20;  // matrices partitioned, 16-element vectors whole
  options.gather_units = resolve_gather_units(*model, names);
  REQUIRE(options.gather_units.size() == 4);  // embeddings, 2 blocks, head
  LocalComm comm;
  auto adamw = [](std::vector<ParamGroup> groups) {
    return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), OptimizerHyper{});
  };
  DataParallelEngine engine(make_param_groups(named, 0.0), names, adamw, options, comm);
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
