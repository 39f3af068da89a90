// Model-level training features: HF label smoothing (checked against torch's own cross_entropy with
// label_smoothing), gradient checkpointing (identical gradients, lower peak memory) and NEFTune noise.
#include <catch2/catch.hpp>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <string>

#include "builtins/register_builtins.h"
#include "models/model.h"

using namespace hftrain;
namespace F = torch::nn::functional;

namespace {

std::shared_ptr<Model> make_gpt(const std::string& options, int64_t vocab, int64_t block) {
  const auto& c = builtin_components();
  Issues issues("test");
  auto opts = c.models.parse("gpt", YAML::Load(options), "model", issues, {});
  REQUIRE(issues.empty());
  torch::manual_seed(0);
  return c.models.build("gpt", opts, ModelContext{vocab, block, 0, 0});
}

std::map<std::string, torch::Tensor> gradients_after_step(Model& model, const Batch& batch, uint64_t seed) {
  for (auto& p : model.parameters())  // keep gradient buffers allocated (memory test measures activations)
    if (p.grad().defined()) p.mutable_grad().zero_();
  torch::manual_seed(seed);
  model.forward(batch).loss.backward();
  std::map<std::string, torch::Tensor> grads;
  for (auto& np : model.named_parameters()) grads[np.key()] = np.value().grad().clone();
  return grads;
}

// Resident memory in kB (from /proc/self/statm).
long rss_kb() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0;
  in >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// Peak RSS above the starting RSS while `fn` runs, sampled every 200 us by a background thread.
template <class Fn>
long peak_growth_kb(Fn fn) {
  const long start = rss_kb();
  std::atomic<bool> done{false};
  std::atomic<long> peak{start};
  std::thread sampler([&] {
    while (!done) {
      long now = rss_kb();
      if (now > peak) peak = now;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  fn();
  done = true;
  sampler.join();
  return peak - start;
}

}  // namespace

TEST_CASE("label smoothing equals torch's cross_entropy(label_smoothing) with -100 ignored", "[unit][loss]") {
  torch::manual_seed(1);
  auto logits = torch::randn({3, 5, 7});
  auto labels = torch::randint(0, 7, {3, 5});
  labels.index_put_({0, 1}, -100);
  labels.index_put_({2, 3}, -100);
  for (double eps : {0.0, 0.1, 0.3}) {
    auto ours = label_smoothed_loss(logits, labels, eps, /*shift_labels=*/false);
    auto reference = F::cross_entropy(logits.reshape({-1, 7}), labels.reshape({-1}),
                                      F::CrossEntropyFuncOptions().ignore_index(-100).label_smoothing(eps));
    CHECK(ours.item<double>() == Approx(reference.item<double>()).epsilon(1e-6));
  }
  // Causal shift: position t scores label t+1.
  auto shifted = label_smoothed_loss(logits, labels, 0.1, /*shift_labels=*/true);
  auto reference = F::cross_entropy(logits.slice(1, 0, 4).reshape({-1, 7}), labels.slice(1, 1, 5).reshape({-1}),
                                    F::CrossEntropyFuncOptions().ignore_index(-100).label_smoothing(0.1));
  CHECK(shifted.item<double>() == Approx(reference.item<double>()).epsilon(1e-6));
}

TEST_CASE("gradient checkpointing gives identical gradients (dropout included)", "[unit][checkpointing]") {
  auto plain = make_gpt("{n_layer: 3, n_head: 2, n_embd: 16, dropout: 0.2}", 11, 8);
  auto checkpointed = make_gpt("{n_layer: 3, n_head: 2, n_embd: 16, dropout: 0.2}", 11, 8);
  checkpointed->enable_gradient_checkpointing();
  Batch b;
  b.input_ids = torch::randint(0, 11, {4, 8});
  b.labels = b.input_ids.clone();
  auto g1 = gradients_after_step(*plain, b, 7);
  auto g2 = gradients_after_step(*checkpointed, b, 7);
  REQUIRE(g1.size() == g2.size());
  for (const auto& [name, g] : g1) {
    INFO(name);
    CHECK(torch::equal(g, g2.at(name)));
  }
  // The checkpoint must not change the forward result either.
  torch::manual_seed(3);
  auto l1 = plain->forward(b).loss.item<double>();
  torch::manual_seed(3);
  auto l2 = checkpointed->forward(b).loss.item<double>();
  CHECK(l1 == l2);
}

TEST_CASE("gradient checkpointing lowers peak memory of a training step", "[unit][checkpointing]") {
  // Activations of 12 blocks at batch 16 x 128 tokens x 128 wide dominate; checkpointing keeps each
  // block's input plus one block's activations during its recomputation.
  const std::string shape = "{n_layer: 12, n_head: 4, n_embd: 128}";
  Batch b;
  b.input_ids = torch::randint(0, 64, {16, 128});
  b.labels = b.input_ids.clone();
  // Make every large block an mmap returned to the OS on free (glibc otherwise raises its mmap threshold
  // after the first large free and keeps the memory resident), so RSS follows live tensor memory.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  auto measure = [&](bool checkpointing) {
    auto model = make_gpt(shape, 64, 128);
    if (checkpointing) model->enable_gradient_checkpointing();
    gradients_after_step(*model, b, 1);  // warm-up: allocate gradients and kernels' scratch once
    return peak_growth_kb([&] { gradients_after_step(*model, b, 1); });
  };
  const long with = measure(true), without = measure(false);
  INFO("peak growth with checkpointing " << with << " kB, without " << without << " kB");
  WARN("peak RSS growth of one step: " << with << " kB with checkpointing, " << without << " kB without");
  CHECK(with * 2 < without);
}

TEST_CASE("NEFTune perturbs embeddings in training only", "[unit][neftune]") {
  auto model = make_gpt("{n_layer: 1, n_head: 2, n_embd: 16}", 11, 8);
  Batch b;
  b.input_ids = torch::randint(0, 11, {2, 8});
  b.labels = b.input_ids.clone();
  model->train();
  auto clean = model->forward(b).loss.item<double>();
  model->set_neftune_noise_alpha(5.0);
  auto noisy = model->forward(b).loss.item<double>();
  CHECK(noisy != clean);
  model->eval();
  CHECK(model->forward(b).loss.item<double>() == clean);
  const auto& c = builtin_components();
  auto mlp = c.models.build("mlp", nullptr, ModelContext{0, 0, 3, 4});
  CHECK_THROWS_WITH(mlp->set_neftune_noise_alpha(1.0), Catch::Contains("training.neftune_noise_alpha"));
  CHECK_THROWS_WITH(mlp->enable_gradient_checkpointing(), Catch::Contains("training.gradient_checkpointing"));
}
