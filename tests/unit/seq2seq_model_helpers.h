// Helpers shared by the encoder-decoder model tests (test_t5.cpp, test_bart.cpp): building a registered
// model from YAML options with a seed, its parameters by name, a private scratch directory, and a small
// seq2seq batch written with the family's pad and eos ids; the engine settings of the device tests.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builtins/register_builtins.h"
#include "distributed/comm.h"
#include "engine/factory.h"
#include "engine/zero_engine.h"
#include "models/construction.h"
#include "optim/adamw.h"

namespace hftrain_test {

// An AdamW engine at `stage` on `device`, clipping at `max_grad_norm` (the device tests' engines).
inline hftrain::EngineSettings adamw_engine_config(torch::Device device, int stage, double max_grad_norm) {
  hftrain::EngineSettings config;
  config.device = device;
  config.stage = stage;
  config.max_grad_norm = max_grad_norm;
  config.optimizer_type = "adamw_torch";
  config.optimizer_traits = hftrain::AdamW::kTraits;
  return config;
}

inline std::shared_ptr<hftrain::Model> build_model(const std::string& type, const std::string& options, uint64_t seed = 0,
                                                   hftrain::ModelContext context = {}) {
  const auto& c = hftrain::builtin_components();
  hftrain::Issues issues("test");
  auto opts = c.models.parse(type, YAML::Load(options), "model", issues, {});
  REQUIRE(issues.empty());
  torch::manual_seed(seed);
  return c.models.build(type, opts, context);
}

inline std::map<std::string, torch::Tensor> parameters_by_name(hftrain::Model& m) {
  std::map<std::string, torch::Tensor> out;
  for (auto& np : m.named_parameters()) out[np.key()] = np.value();
  return out;
}

// A fresh directory private to this process: <tmp>/hftrain_<family>_<pid>_<name>.
inline std::string scratch_dir(const std::string& family, const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("hftrain_" + family + "_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Two sources (the second padded with `pad`) and their targets ending with `eos` (the second padded with -100).
inline hftrain::Batch seq2seq_batch(int64_t pad, int64_t eos) {
  hftrain::Batch b;
  b.input_ids = torch::tensor(std::vector<int64_t>{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, pad, pad, pad}).view({2, 7});
  b.attention_mask = torch::tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0}}, torch::kLong);
  b.labels = torch::tensor(std::vector<int64_t>{3, 4, 20, 21, eos, 22, 23, eos, -100, -100}).view({2, 5});
  return b;
}

// Trains a model from `make` (a fresh one per call, same seed) for 3 AdamW steps on `batch` at ZeRO stage
// 0 and at stage 3 (one rank, gather units, matrices partitioned) and checks that stage 3 partitions
// `partitioned_parameter`, gathers per unit, and follows stage 0: the same losses and final weights.
inline void check_zero3_trains_as_stage0(const std::function<std::shared_ptr<hftrain::Model>()>& make,
                                         const hftrain::Batch& batch, const std::string& partitioned_parameter) {
  using namespace hftrain;
  auto run = [&](int stage, std::vector<double>& losses) {
    auto model = make();
    std::vector<std::pair<std::string, torch::Tensor>> params;
    std::vector<std::string> names;
    for (auto& np : model->named_parameters()) {
      params.emplace_back(np.key(), np.value());
      names.push_back(np.key());
    }
    EngineSettings o;
    o.stage = stage;
    o.report_memory = false;
    o.persistence_threshold = 40;  // matrices partitioned, norm weights whole
    if (stage == 3) {
      o.gather_units = resolve_gather_units(*model, names);
      CHECK(o.gather_units.size() == model->gather_units().size());
    }
    LocalComm comm;
    auto adamw = [](std::vector<ParamGroup> groups) {
      return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), OptimizerHyper{});
    };
    ZeroEngine engine(make_param_groups(params, 0.0), names, adamw, o, comm);
    if (stage == 3) {
      model->set_gather_hooks(engine.gather_hooks());
      CHECK(model->named_parameters()[partitioned_parameter].storage().nbytes() == 0);
    }
    model->train();
    for (int step = 0; step < 3; ++step) {
      auto loss = model->forward(batch).loss;
      losses.push_back(loss.item<double>());
      engine.backward(loss, true);
      engine.step(1e-2);
    }
    engine.gather_full_parameters();
    model->set_gather_hooks(nullptr);
    return parameters_by_name(*model);
  };
  std::vector<double> losses0, losses3;
  auto w0 = run(0, losses0);
  auto w3 = run(3, losses3);
  REQUIRE(losses3.size() == 3u);
  for (std::size_t i = 0; i < 3; ++i) CHECK(losses3[i] == Approx(losses0[i]).epsilon(1e-6));
  CHECK(losses0[2] < losses0[0]);
  for (auto& kv : w0) {
    INFO(kv.first);
    CHECK(torch::allclose(kv.second, w3.at(kv.first), 1e-5, 1e-6));
  }
}

// A model built under DeferredInit holds no parameter memory and materialises exactly the values a whole
// construction from the same seed has (`make` builds one; it is called twice).
inline void check_deferred_init_matches_whole(const std::function<std::shared_ptr<hftrain::Model>()>& make) {
  const auto whole = make();
  std::shared_ptr<hftrain::Model> deferred;
  {
    hftrain::DeferredInit scope(true);
    deferred = make();
  }
  REQUIRE(deferred->initialisation_deferred());
  for (const auto& np : deferred->named_parameters()) CHECK(np.value().storage().nbytes() == 0);
  auto values = parameters_by_name(*whole);
  std::size_t seen = 0;
  deferred->materialise_parameters([&](const std::string& name, const torch::Tensor& value) {
    INFO(name);
    CHECK(torch::equal(value, values.at(name)));
    ++seen;
    return true;
  });
  CHECK(seen == values.size());
}

// On seq2seq_batch(...) in eval mode: the padded second source alone and unpadded gives the same logits, a
// different token under the padding mask changes nothing, and decoding `decoder_inputs` (the shifted
// labels) with the KV cache in pieces (2 tokens, then 1 at a time) gives the full forward's logits, with
// cross-attention keys / values kept for `decoder_layers` layers.
inline void check_padding_and_cached_decoding(hftrain::Model& m, const hftrain::Batch& b, const torch::Tensor& decoder_inputs,
                                              int64_t decoder_layers) {
  using hftrain::Batch;
  m.eval();
  torch::NoGradGuard no_grad;
  const auto full = m.forward(b).logits;
  Batch alone;
  alone.input_ids = b.input_ids.slice(0, 1, 2).slice(1, 0, 4);
  alone.labels = b.labels.slice(0, 1, 2);
  CHECK(torch::allclose(m.forward(alone).logits, full.slice(0, 1, 2), 1e-5, 1e-5));
  Batch other = b;
  other.input_ids = b.input_ids.clone();
  other.input_ids[1][5] = 17;
  CHECK(torch::allclose(m.forward(other).logits, full, 1e-6, 1e-6));

  REQUIRE(m.is_encoder_decoder());
  hftrain::KvCache cache;
  std::vector<torch::Tensor> parts = {m.forward_encoder_decoder_cached(b.input_ids, b.attention_mask, decoder_inputs.slice(1, 0, 2), cache)};
  for (int64_t t = 2; t < decoder_inputs.size(1); ++t)
    parts.push_back(m.forward_encoder_decoder_cached(torch::Tensor(), torch::Tensor(), decoder_inputs.slice(1, t, t + 1), cache));
  CHECK(cache.length == decoder_inputs.size(1));
  CHECK(cache.cross_keys.size() == static_cast<std::size_t>(decoder_layers));
  CHECK(torch::allclose(torch::cat(parts, 1), full, 1e-5, 1e-5));
}

// The parameter gradients of one training-mode backward of `batch` through a model from `make`, with
// gradient checkpointing on or off.
inline std::map<std::string, torch::Tensor> training_gradients(const std::function<std::shared_ptr<hftrain::Model>()>& make,
                                                               const hftrain::Batch& batch, bool checkpointing) {
  auto m = make();
  if (checkpointing) m->enable_gradient_checkpointing();
  m->train();
  m->forward(batch).loss.backward();
  std::map<std::string, torch::Tensor> g;
  for (auto& np : m->named_parameters()) {
    REQUIRE(np.value().grad().defined());
    g[np.key()] = np.value().grad().clone();
  }
  return g;
}

// Gradient checkpointing recomputes the blocks: every gradient equals the plain backward's (summed in
// another order) and none is all zero.
inline void check_checkpointing_keeps_gradients(const std::function<std::shared_ptr<hftrain::Model>()>& make,
                                                const hftrain::Batch& batch) {
  auto plain = training_gradients(make, batch, false), checkpointed = training_gradients(make, batch, true);
  for (auto& kv : plain) {
    INFO(kv.first << " max |difference| " << (kv.second - checkpointed.at(kv.first)).abs().max().item<double>()
                   << " max |gradient| " << kv.second.abs().max().item<double>());
    CHECK(kv.second.abs().sum().item<double>() > 0);
    CHECK(torch::allclose(kv.second, checkpointed.at(kv.first), 1e-5, 1e-6));
  }
}

// The parameter shapes of `type` with these options, read from its module tree built on meta (no storage).
inline std::vector<hftrain::ParameterShape> listed_shapes(const std::string& type, const std::string& options) {
  const auto& c = hftrain::builtin_components();
  hftrain::Issues issues("test");
  auto opts = c.models.parse(type, YAML::Load(options), "model", issues, {});
  REQUIRE(issues.empty());
  return hftrain::model_parameter_shapes(c.models, type, opts, hftrain::ModelContext{});
}

// The meta-built tree lists exactly the built model's parameters, in order, with their shapes.
inline void check_shapes_match_model(const std::string& type, const std::string& options) {
  auto built = build_model(type, options)->named_parameters();
  auto listed = listed_shapes(type, options);
  REQUIRE(listed.size() == built.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    CHECK(listed[i].name == built[i].key());
    CHECK(listed[i].shape == built[i].value().sizes().vec());
  }
}

}  // namespace hftrain_test
