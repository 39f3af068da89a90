// What a training step reads back to the host (issue 60: nothing, between logging steps). On the host: every
// fp32 engine and the layer-wise step leave the step's gradient norm a tensor (DeviceScalar::pending) that
// holds the norm of the gradients. On a GPU ([gpu]): the whole step -- placing an unpadded batch, forward, the
// loss tally, backward and the update of the fp32 engines at stages 0-3, with the loss from logits and chunked --
// runs with CUDA's synchronisation check set to fail (torch.cuda.set_sync_debug_mode("error")), phase by phase, so a read names its phase.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <tuple>

#include "builtins/register_builtins.h"
#include "data/batch_placement.h"
#include "distributed/comm.h"
#include "engine/factory.h"
#include "models/construction.h"
#include "optim/adamw.h"
#include "seq2seq_model_helpers.h"
#include "train/loss_tally.h"
#include "train/training_loss.h"

#if HFTRAIN_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

using namespace hftrain;

namespace {

const char* const kGpt2 =
    "{vocab_size: 29, n_positions: 16, n_embd: 32, n_layer: 2, n_head: 4, tie_word_embeddings: false, resid_pdrop: 0, "
    "embd_pdrop: 0, attn_pdrop: 0}";
const char* const kLlama =
    "{vocab_size: 37, hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, max_position_embeddings: 16}";

// An unpadded causal batch on the host, with an all-ones attention mask (as a collator writes it).
Batch host_batch(int64_t vocab) {
  torch::manual_seed(11);
  Batch b;
  b.input_ids = torch::randint(0, vocab, {2, 8}, torch::kLong);
  b.attention_mask = torch::ones({2, 8}, torch::kLong);
  b.labels = b.input_ids.clone();
  return b;
}

struct Stepping {
  std::shared_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  LocalComm comm;
};

// A model of `family` on `device` and the fp32 AdamW engine of `stage` over it, clipping at 0.5.
std::unique_ptr<Stepping> stepping(const std::string& family, const std::string& options, int stage, torch::Device device) {
  auto s = std::make_unique<Stepping>();
  {
    std::unique_ptr<DeviceConstruction> on_device;
    if (!device.is_cpu()) on_device = std::make_unique<DeviceConstruction>(device);
    s->model = hftrain_test::build_model(family, options, /*seed=*/5);
  }
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<std::string> names;
  for (auto& np : s->model->named_parameters()) {
    named.emplace_back(np.key(), np.value());
    names.push_back(np.key());
  }
  EngineSettings config = hftrain_test::adamw_engine_config(device, stage, /*max_grad_norm=*/0.5);
  config.persistence_threshold = 40;
  if (stage == 3) config.gather_units = resolve_gather_units(*s->model, names);
  auto adamw = [](std::vector<ParamGroup> groups) {
    return std::make_unique<AdamW>(AdamW::Options{}, std::move(groups), OptimizerHyper{});
  };
  s->engine = make_engine(config, named, make_param_groups(named, 0.1), adamw, s->comm);
  if (s->engine->gather_hooks()) s->model->set_gather_hooks(s->engine->gather_hooks());
  s->model->train();
  return s;
}

// The global L2 norm of the model's gradients, in double on the host.
double gradient_norm(Model& model) {
  double sum = 0;
  for (const auto& p : model.parameters())
    if (p.grad().defined()) sum += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sum);
}

}  // namespace

TEST_CASE("engines leave the step's gradient norm on its device, holding the norm of the gradients",
          "[unit][engine]") {
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("stage " << stage);
    // The reference: the same model's gradients of the same batch, before any engine touches them.
    auto reference = hftrain_test::build_model("gpt2", kGpt2, /*seed=*/5);
    reference->train();
    compute_loss(*reference, host_batch(29), 0.0).loss.backward();
    const double expected = gradient_norm(*reference);
    auto s = stepping("gpt2", kGpt2, stage, torch::kCPU);
    s->engine->begin_step(1e-2);
    s->engine->backward(compute_loss(*s->model, host_batch(29), 0.0).loss, true);
    const StepResult r = s->engine->step(1e-2);
    CHECK(r.grad_norm.pending());  // nothing read it: a logging step will
    CHECK(r.grad_norm.value() == Approx(expected).epsilon(1e-6));
    CHECK(expected > 0.5);  // so the step clipped, with the coefficient kept on the device
  }
}

#if HFTRAIN_WITH_CUDA
namespace {

// torch.cuda.set_sync_debug_mode("error") while alive: a call that waits for the device throws.
class FailOnDeviceWait {
 public:
  FailOnDeviceWait() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR); }
  ~FailOnDeviceWait() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
  FailOnDeviceWait(const FailOnDeviceWait&) = delete;
  FailOnDeviceWait& operator=(const FailOnDeviceWait&) = delete;
};

// Three steps of `family` at `stage` on the GPU; the last two run each phase with the synchronisation check on.
void check_steps_wait_nowhere(const std::string& family, const std::string& options, int64_t vocab, int stage, bool chunked) {
  const torch::Device gpu(torch::kCUDA, 0);
  auto s = stepping(family, options, stage, gpu);
  LmLossSettings loss_settings;
  loss_settings.chunked = chunked;  // training's default; the loss from logits is eval's and a spec's choice
  s->model->set_lm_loss(loss_settings);
  LossTally tally;
  Batch host = host_batch(vocab);
  note_scored_labels(*s->model, host);  // as LossNormaliser::prepare does, on the host
  for (int step = 0; step < 3; ++step) {  // the first step is the warm-up: allocations, kernel probes, handles
    INFO("step " << step);
    s->engine->begin_step(1e-2);
    torch::Tensor loss;
    StepResult r;
    const std::vector<std::pair<const char*, std::function<void()>>> phases = {
        {"placement and forward", [&] {
           loss = compute_loss(*s->model, batch_on(host, gpu, /*pin_memory=*/true), 0.0).loss;
           tally.add_micro_batch(loss.detach(), 1);
         }},
        {"backward", [&] { s->engine->backward(loss, true); }},
        {"update", [&] {
           r = s->engine->step(1e-2);
           tally.end_step();
         }}};
    for (const auto& [name, run] : phases) {
      INFO(name);
      if (step == 0) {
        run();
        continue;
      }
      FailOnDeviceWait strict;
      CHECK_NOTHROW(run());
    }
    CHECK(r.grad_norm.pending());
    CHECK(std::isfinite(r.grad_norm.value()));  // a logging step's read, outside the check
  }
  CHECK(std::isfinite(tally.total()));
}

}  // namespace

TEST_CASE("a training step on a GPU waits for the device nowhere: placement, forward, backward and the fp32 update",
          "[gpu][engine]") {
  REQUIRE(torch::cuda::is_available());
  for (const auto& [family, options, vocab] :
       std::vector<std::tuple<std::string, std::string, int64_t>>{{"gpt2", kGpt2, 29}, {"llama", kLlama, 37}})
    for (int stage = 0; stage <= 3; ++stage)
      for (const bool chunked : {false, true}) {
        INFO(family << " at stage " << stage << (chunked ? ", chunked loss" : ", loss from logits"));
        check_steps_wait_nowhere(family, options, vocab, stage, chunked);
      }
}
#endif
