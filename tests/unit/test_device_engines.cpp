// Every ZeRO stage of the engine on the worker's device, for transformer families: three AdamW steps of
// gpt2, llama, t5 and bart at stages 0-3 (fp32, and bf16 with fp32 masters) on the device, with the engine's
// state saved to host tensors and loaded back before the last step (a checkpoint's round trip), against stage
// 0 on the host, and with zero.offload_optimizer cpu at stages 1-3 (masters and optimizer state in host memory);
// every parameter, master weight and optimizer state is walked to check where it lives. On a
// CUDA build with a GPU the device is cuda:0 (the run on a GPU, docs/gpu.md); the CPU build runs the same
// code with the host as the device, so it is compiled and checked in CI (torch's lazy device cannot hold
// ZeroEngine's flat buffers: test_device_placement.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>

#include "builtins/register_builtins.h"
#include "data/batch_placement.h"
#include "distributed/comm.h"
#include "engine/factory.h"
#include "lazy_device.h"
#include "models/construction.h"
#include "optim/adamw.h"
#include "seq2seq_model_helpers.h"
#include "train/training_loss.h"
#include "util/autocast.h"

using namespace hftrain;

namespace {

struct FamilyCase {
  std::string family, options;
  Batch batch;
};

Batch causal_batch(int64_t vocab) {
  torch::manual_seed(11);
  Batch b;
  b.input_ids = torch::randint(0, vocab, {2, 8}, torch::kLong);
  b.labels = b.input_ids.clone();
  return b;
}

// Dropout off: the host and a GPU draw their masks from different generators.
std::vector<FamilyCase> family_cases() {
  return {
      {"gpt2", "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, tie_word_embeddings: false, "
               "resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0}",
       causal_batch(29)},
      {"llama", "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
                "num_key_value_heads: 2, max_position_embeddings: 16}",
       causal_batch(37)},
      {"t5", "{vocab_size: 29, d_model: 32, d_kv: 8, d_ff: 48, num_layers: 2, num_decoder_layers: 2, num_heads: 4, "
             "relative_attention_num_buckets: 8, relative_attention_max_distance: 6, pad_token_id: 0, eos_token_id: 1, "
             "decoder_start_token_id: 0, dropout_rate: 0}",
       hftrain_test::seq2seq_batch(/*pad=*/0, /*eos=*/1)},
      {"bart", "{vocab_size: 29, d_model: 24, encoder_layers: 2, decoder_layers: 2, encoder_attention_heads: 4, "
               "decoder_attention_heads: 2, encoder_ffn_dim: 40, decoder_ffn_dim: 36, max_position_embeddings: 16, "
               "dropout: 0, attention_dropout: 0, activation_dropout: 0}",
       hftrain_test::seq2seq_batch(/*pad=*/1, /*eos=*/2)},
  };
}

struct StageRun {
  std::vector<double> losses, norms;
  std::map<std::string, torch::Tensor> weights;  // on the host, after the steps
  int state_walked = 0;                          // optimizer state tensors whose device was checked
};

bool is_step_counter(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".step") == 0;
}

// What a checkpoint does to the engine's state between two steps: saved as host tensors, read back as host
// tensors (the files hold no device), loaded into the engine. The values are unchanged, so the run must go
// on as if nothing happened, and the state must be back on the engine's device.
void resume_from_host_copy(Engine& engine) {
  auto to_host = [](const torch::Tensor& t) { return t.detach().to(torch::kCPU).clone(); };
  if (engine.sharded()) {
    const EngineShard shard = engine.export_shard();
    std::map<std::string, torch::Tensor> saved;
    for (const auto& [name, tensor] : shard.tensors) saved[name] = to_host(tensor);
    engine.import_shard(saved, shard.metadata, "test shard");
    return;
  }
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : engine.optimizer_state()) saved[name] = to_host(tensor);
  engine.load_optimizer_state(saved);
}

// Three AdamW steps of `c` at `stage` on `device` in `dtype` (fp32, or bf16 parameters with fp32 masters);
// `offload`: zero.offload_optimizer cpu (masters and optimizer state in host memory).
StageRun train_stage(const FamilyCase& c, int stage, torch::Device device, torch::ScalarType dtype, bool offload = false) {
  StageRun r;
  std::shared_ptr<Model> model;
  {
    std::unique_ptr<DeviceConstruction> on_device;
    if (!device.is_cpu()) on_device = std::make_unique<DeviceConstruction>(device);
    model = hftrain_test::build_model(c.family, c.options, /*seed=*/5);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<std::string> names;
  for (auto& np : model->named_parameters()) {
    named.emplace_back(np.key(), np.value());
    names.push_back(np.key());
  }
  EngineSettings config = hftrain_test::adamw_engine_config(device, stage, /*max_grad_norm=*/1.0);
  config.precision.param_dtype = dtype;
  config.precision.reduce_dtype = dtype;
  config.persistence_threshold = 40;  // matrices partitioned at stage 3, norm weights whole
  config.offload_to_host = offload;
  if (stage == 3) config.gather_units = resolve_gather_units(*model, names);
  LocalComm comm;
  auto adamw = [](std::vector<ParamGroup> groups) {
    // Adam divides each gradient by its own magnitude: a gradient that is zero in exact arithmetic (a key
    // projection's bias) is rounding noise of 1e-9 on each device, which eps 1e-8 would turn into steps of
    // different size on the host and on the GPU. eps 1e-3 keeps such noise from moving the weights.
    OptimizerHyper hyper;
    hyper.eps = 1e-3;
    return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), hyper);
  };
  auto engine = make_engine(config, named, make_param_groups(named, 0.1), adamw, comm);
  CHECK((engine->describe().find("offloaded to host memory") != std::string::npos) == offload);
  if (engine->gather_hooks()) model->set_gather_hooks(engine->gather_hooks());
  model->train();
  const Batch batch = batch_on(c.batch, device);
  for (int step = 0; step < 3; ++step) {
    if (step == 2) resume_from_host_copy(*engine);
    engine->begin_step(1e-2);
    torch::Tensor loss;
    {
      AutocastScope autocast(dtype);
      loss = compute_loss(*model, batch, 0.0).loss;
    }
    CHECK(loss.device() == device);
    r.losses.push_back(loss.item<double>());
    engine->backward(loss, true);
    r.norms.push_back(engine->step(1e-2).grad_norm.value());
  }
  // exp_avg, exp_avg_sq and the fp32 masters: where DeepSpeed keeps them, on the device, or in host memory with offload
  const torch::Device state_device = offload ? torch::Device(torch::kCPU) : device;
  for (const auto& [name, tensor] : engine->optimizer_state()) {
    INFO("optimizer state " << name);
    if (is_step_counter(name) || name.rfind("loss_scaler.", 0) == 0) continue;  // host counters, as torch keeps them
    CHECK(tensor.device() == state_device);
    CHECK(tensor.scalar_type() == torch::kFloat);
    ++r.state_walked;
  }
  if (dtype != torch::kFloat || offload) {  // masters of their own (fp32 without offload: the parameters themselves)
    const auto masters = engine->master_weights();
    CHECK(masters.size() == names.size());
    for (const auto& [name, master] : masters) {
      INFO("master " << name);
      CHECK(master.device() == state_device);
      CHECK(master.scalar_type() == torch::kFloat);
    }
  }
  engine->gather_full_parameters();
  model->set_gather_hooks(nullptr);
  for (const auto& np : model->named_parameters()) {
    INFO("parameter " << np.key());
    CHECK(np.value().device() == device);
    CHECK(np.value().scalar_type() == dtype);
    r.weights[np.key()] = np.value().detach().to(torch::kCPU, torch::kFloat).clone();
  }
  for (const auto& nb : model->named_buffers()) {
    INFO("buffer " << nb.key());
    CHECK(nb.value().device() == device);
  }
  return r;
}

torch::Device engine_test_device() { return hftrain_test::gpu_or(torch::kCPU); }

// The same losses, gradient norms and final weights as `host` (stage 0 on the host), to the device's rounding.
void check_follows_host(const StageRun& run, const StageRun& host) {
  CHECK(run.weights.size() == host.weights.size());
  for (std::size_t s = 0; s < 3; ++s) {
    CHECK(run.losses[s] == Approx(host.losses[s]).epsilon(1e-4));
    CHECK(run.norms[s] == Approx(host.norms[s]).epsilon(1e-3));
  }
  for (const auto& [name, value] : host.weights) {
    INFO(name);
    CHECK(torch::allclose(run.weights.at(name), value, 1e-3, 1e-4));
  }
}

}  // namespace

TEST_CASE("device placement: every ZeRO stage trains transformer families on the device as stage 0 on the host, "
          "everything it holds on the device",
          "[device][gpu]") {
  const torch::Device device = engine_test_device();
  for (const auto& c : family_cases()) {
    const StageRun host = train_stage(c, /*stage=*/0, torch::kCPU, torch::kFloat);
    REQUIRE(host.losses.size() == 3u);
    CHECK(host.losses[2] < host.losses[0]);  // it trains
    for (int stage = 0; stage <= 3; ++stage) {
      INFO(c.family << " at stage " << stage << " on " << device);
      const StageRun run = train_stage(c, stage, device, torch::kFloat);
      CHECK(run.state_walked >= 2);  // exp_avg and exp_avg_sq, per parameter (stage 0) or per flat group
      check_follows_host(run, host);
    }
  }
}

TEST_CASE("device placement: bf16 parameters on the device keep fp32 masters and optimizer state there, and train "
          "close to fp32",
          "[device][gpu]") {
  const torch::Device device = engine_test_device();
  for (const auto& c : family_cases()) {
    const StageRun fp32 = train_stage(c, /*stage=*/0, torch::kCPU, torch::kFloat);
    for (int stage : {1, 3}) {
      INFO(c.family << " bf16 at stage " << stage << " on " << device);
      const StageRun run = train_stage(c, stage, device, torch::kBFloat16);
      // The first loss differs only by the weights' and activations' rounding to bf16 (8 bits of mantissa);
      // after that the bf16 steps follow their own rounding, so they are only asked to train.
      CHECK(run.losses[0] == Approx(fp32.losses[0]).epsilon(1e-2));
      for (double loss : run.losses) CHECK(std::isfinite(loss));
      CHECK(run.losses[2] < run.losses[0]);
    }
  }
}

TEST_CASE("device placement: zero.offload_optimizer cpu keeps the fp32 masters and optimizer state in host memory "
          "beside the device's parameters, and trains as without offload",
          "[device][gpu]") {
  // DeepSpeed's ZeRO-Offload: the partition's gradients go to the host, the update runs there, the new values come
  // back to the device. On the CPU build the device is the host and the engine offloads all the same: the fp32
  // runs must then equal the runs without offload bit for bit (the same arithmetic on copies).
  const torch::Device device = engine_test_device();
  for (const auto& c : family_cases()) {
    const StageRun host = train_stage(c, /*stage=*/0, torch::kCPU, torch::kFloat);
    for (int stage = 1; stage <= 3; ++stage) {
      INFO(c.family << " at stage " << stage << " on " << device << ", optimizer offloaded to the host");
      const StageRun run = train_stage(c, stage, device, torch::kFloat, /*offload=*/true);
      CHECK(run.state_walked >= 2);
      check_follows_host(run, host);
      if (!device.is_cpu()) continue;
      const StageRun plain = train_stage(c, stage, device, torch::kFloat);
      CHECK(run.losses == plain.losses);
      CHECK(run.norms == plain.norms);
      for (const auto& [name, value] : plain.weights) {
        INFO(name);
        CHECK(torch::equal(run.weights.at(name), value));
      }
    }
    INFO(c.family << " bf16 at stage 2, optimizer offloaded to the host");
    const StageRun bf16 = train_stage(c, /*stage=*/2, device, torch::kBFloat16, /*offload=*/true);
    CHECK(bf16.losses[0] == Approx(host.losses[0]).epsilon(1e-2));
    for (double loss : bf16.losses) CHECK(std::isfinite(loss));
    CHECK(bf16.losses[2] < bf16.losses[0]);
  }
}
