// Long-context settings: the tiled MLP hands each parameter its gradient in one accumulation per backward (what a
// data-parallel gradient sync's hooks count on); activation-checkpoint offload (models/checkpointing ActivationOffloadScope) gives a
// llama's loss and every gradient bit for bit as checkpointing without it, with and without the tiled MLP, and
// the recomputation really reads the kept copy; the names users write for it (HF gradient_checkpointing_kwargs'
// offload, DeepSpeed's activation_checkpointing.cpu_checkpointing, ALST's activation_checkpoint_cpu_offload) and
// HF TrainingArguments' parallelism_config (Accelerate's ParallelismConfig fields) land in the spec or are refused
// by name.
#include <catch2/catch.hpp>

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <map>

#include "builtins/register_builtins.h"
#include "models/activation_copies.h"
#include "models/checkpointing.h"
#include "runspec/run_spec.h"
#include "scratch_files.h"
#include "spec_test_helpers.h"

namespace {

struct OffloadRun {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
};

// One training forward and backward of a small GQA llama with checkpointing (attention dropout on, so that the
// recomputation must replay the forward's random state), its inputs kept in host memory when `offload`.
OffloadRun offload_llama_run(bool offload, bool tiled, bool count_accumulations = false,
                             torch::Device device = torch::kCPU) {
  const auto& c = hftrain::builtin_components();
  hftrain::Issues issues("test");
  const auto opts = c.models.parse("llama",
                                   YAML::Load("{vocab_size: 37, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 3, "
                                              "num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32, "
                                              "attention_dropout: 0.1}"),
                                   "model", issues, {});
  REQUIRE(issues.empty());
  torch::manual_seed(11);
  auto model = c.models.build("llama", opts, {});
  model->enable_gradient_checkpointing();
  if (tiled) model->enable_tiled_mlp(3);
  model->to(device);
  model->train();
  hftrain::Batch batch;
  batch.input_ids = torch::arange(2, 26, torch::kLong).remainder(37).reshape({2, 12});
  batch.attention_mask = torch::ones({2, 12}, torch::kLong);
  batch.attention_mask.index_put_({1, torch::indexing::Slice(9)}, 0);
  batch.labels = batch.input_ids.masked_fill(batch.attention_mask.eq(0), -100);
  for (torch::Tensor* t : {&batch.input_ids, &batch.attention_mask, &batch.labels}) *t = t->to(device);
  std::map<std::string, int> accumulations;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks;
  for (auto& np : model->named_parameters()) {
    if (!count_accumulations) break;
    auto acc = torch::autograd::impl::grad_accumulator(np.value());
    const std::string name = np.key();
    hooks.emplace_back(acc, acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
                                [&accumulations, name](const torch::autograd::variable_list& out, const torch::autograd::variable_list&) {
                                  ++accumulations[name];
                                  return out;
                                })));
  }
  torch::manual_seed(3);  // the dropout masks' stream
  torch::Tensor loss;
  {
    hftrain::ActivationOffloadScope scope(offload);
    loss = model->forward(batch).loss;
  }
  loss.backward();  // outside the scope, as the trainer's backward is
  OffloadRun run{loss.item<double>(), {}};
  for (auto& np : model->named_parameters()) run.grads[np.key()] = np.value().grad().cpu();
  for (auto& [acc, key] : hooks) acc->del_post_hook(key);
  for (auto& np : model->named_parameters()) {
    if (!count_accumulations) break;
    INFO(np.key());
    CHECK(accumulations[np.key()] == 1);
  }
  return run;
}

}  // namespace

TEST_CASE("activation-checkpoint offload: a llama's loss and every gradient equal checkpointing without it",
          "[unit][checkpoint_offload]") {
  for (const bool tiled : {false, true}) {
    INFO("tiled MLP " << tiled);
    const OffloadRun kept = offload_llama_run(false, tiled), offloaded = offload_llama_run(true, tiled);
    CHECK(offloaded.loss == kept.loss);
    REQUIRE(offloaded.grads.size() == kept.grads.size());
    for (const auto& [name, grad] : kept.grads) {
      INFO(name);
      CHECK(torch::equal(grad, offloaded.grads.at(name)));
    }
  }
  CHECK_FALSE(hftrain::activation_offload_active());  // the scope put the mode back
}

#if HFTRAIN_WITH_CUDA
TEST_CASE("activation-checkpoint offload on a GPU: the copies on the side stream give the loss and every gradient of "
          "checkpointing without it",
          "[gpu][checkpoint_offload]") {
  REQUIRE(torch::cuda::is_available());
  const torch::Device gpu(torch::kCUDA, 0);
  // Each copy first waits ~10^7 GPU cycles on the side stream, far longer than the small model's compute: a copy
  // that forward or the recomputation did not wait for would be read unfinished.
  hftrain::delay_cuda_offload_copies(10000000);
  for (const bool tiled : {false, true}) {
    INFO("tiled MLP " << tiled);
    const OffloadRun kept = offload_llama_run(false, tiled, false, gpu), offloaded = offload_llama_run(true, tiled, false, gpu);
    CHECK(offloaded.loss == Approx(kept.loss).epsilon(1e-6));
    REQUIRE(offloaded.grads.size() == kept.grads.size());
    for (const auto& [name, grad] : kept.grads) {
      INFO(name);  // a copy read before it was complete would differ by far more than the GPU's reduction order
      CHECK(torch::allclose(grad, offloaded.grads.at(name), 1e-5, 1e-7));
    }
  }
  hftrain::delay_cuda_offload_copies(0);
}
#endif

TEST_CASE("tiled MLP: each parameter's gradient accumulates once per backward, as a data-parallel sync expects",
          "[unit][checkpoint_offload]") {
  offload_llama_run(false, true, /*count_accumulations=*/true);
  offload_llama_run(true, true, /*count_accumulations=*/true);
}

TEST_CASE("activation-checkpoint offload: the recomputation reads the copy kept in host memory, one input or two",
          "[unit][checkpoint_offload]") {
  const torch::Tensor weight = torch::randn({4, 4}).requires_grad_(true);
  std::vector<const void*> seen;  // the input the block ran on: forward, then the recomputation
  const std::function<torch::Tensor(const torch::Tensor&)> block = [&](const torch::Tensor& in) {
    seen.push_back(in.data_ptr());
    return torch::tanh(in.matmul(weight));
  };
  const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)> pair =
      [&](const torch::Tensor& in, const torch::Tensor& memory) {
        seen.push_back(in.data_ptr());
        return torch::tanh(in.matmul(weight) + memory);
      };
  for (const bool offload : {false, true}) {
    INFO("offload " << offload);
    const torch::Tensor x = torch::randn({3, 4}).requires_grad_(true), memory = torch::randn({3, 4}).requires_grad_(true);
    seen.clear();
    torch::Tensor y, z;
    {
      hftrain::ActivationOffloadScope scope(offload);
      CHECK(hftrain::activation_offload_active() == offload);
      y = hftrain::checkpointed(block, x * 1.0);
      z = hftrain::checkpointed(pair, x * 2.0, memory);
    }
    y.sum().backward();
    z.sum().backward();
    REQUIRE(seen.size() == 4);               // forward y, forward z, then the recomputations of y and z
    CHECK((seen[2] != seen[0]) == offload);  // offloaded: the recomputation runs on the kept copy
    CHECK((seen[3] != seen[1]) == offload);
    const torch::Tensor expected_x = x.grad().clone(), expected_m = memory.grad().clone();
    x.grad().zero_();
    memory.grad().zero_();
    weight.grad().zero_();
    (torch::tanh((x * 1.0).matmul(weight)).sum() + torch::tanh((x * 2.0).matmul(weight) + memory).sum()).backward();
    CHECK(torch::equal(x.grad(), expected_x));
    CHECK(torch::equal(memory.grad(), expected_m));
    weight.grad().zero_();
  }
}

TEST_CASE("activation-checkpoint offload: HF's, DeepSpeed's and ALST's names, and what is refused",
          "[unit][checkpoint_offload]") {
  using hftrain_test::has_note;
  using hftrain_test::load;
  using hftrain_test::load_error;
  using hftrain_test::write_spec;
  const std::string base = "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, "
                           "num_attention_heads: 4, num_key_value_heads: 2}\ndata: {type: digit_reversal}\n";
  const std::string spec = write_spec("offload.yaml", base + "training: {output_dir: /tmp/x, gradient_checkpointing: true}\n");
  CHECK_FALSE(load(spec).training.gradient_checkpointing_offload);
  CHECK(load(spec, {"training.gradient_checkpointing_kwargs={offload: true, use_reentrant: false}"})
            .training.gradient_checkpointing_offload);
  CHECK(load(spec, {"training.activation_checkpoint_cpu_offload=true"}).training.gradient_checkpointing_offload);
  CHECK(load(spec, {"training.tiled_mlp_compute=true"}).training.tiled_mlp);
  // HF's command line passes the mapping as JSON text
  const std::string text = write_spec("offload_text.yaml", base + "training: {output_dir: /tmp/x, gradient_checkpointing: true, "
                                                                  "gradient_checkpointing_kwargs: '{\"offload\": true}'}\n");
  CHECK(load(text).training.gradient_checkpointing_offload);
  CHECK_THAT(load_error(spec, {"training.gradient_checkpointing_kwargs={offlod: true}"}),
             Catch::Contains("training.gradient_checkpointing_kwargs.offlod") && Catch::Contains("did you mean 'offload'"));
  CHECK_THAT(load_error(spec, {"training.gradient_checkpointing_kwargs={preserve_rng_state: false}"}),
             Catch::Contains("preserve_rng_state") && Catch::Contains("only true"));
  CHECK_THAT(load_error(spec, {"training.gradient_checkpointing=false", "training.gradient_checkpointing_kwargs={offload: true}"}),
             Catch::Contains("training.gradient_checkpointing_offload") && Catch::Contains("gradient_checkpointing is false"));
  // DeepSpeed's activation_checkpointing section
  const std::string ds = write_spec("offload_ds.yaml", base + "training: {output_dir: /tmp/x, gradient_checkpointing: true, "
                                                              "deepspeed: {activation_checkpointing: {cpu_checkpointing: true, "
                                                              "partition_activations: true, number_checkpoints: 4}}}\n");
  const hftrain::RunSpec from_ds = load(ds);
  CHECK(from_ds.training.gradient_checkpointing_offload);
  CHECK(has_note(from_ds, "activation_checkpointing.partition_activations"));
  const std::string ds_typo = write_spec("offload_ds_typo.yaml", base + "training: {output_dir: /tmp/x, deepspeed: "
                                                                        "{activation_checkpointing: {cpu_checkpoint: true}}}\n");
  CHECK_THAT(load_error(ds_typo), Catch::Contains("activation_checkpointing.cpu_checkpoint") &&
                                      Catch::Contains("did you mean 'cpu_checkpointing'"));
  // the command line wins over the file in any spelling; the same setting written twice in the file is a conflict
  CHECK_FALSE(load(ds, {"training.gradient_checkpointing_kwargs={offload: false}"}).training.gradient_checkpointing_offload);
  const std::string twice = write_spec("offload_twice.yaml", base + "training: {output_dir: /tmp/x, gradient_checkpointing: true, "
                                                                    "gradient_checkpointing_kwargs: {offload: false}, deepspeed: "
                                                                    "{activation_checkpointing: {cpu_checkpointing: true}}}\n");
  CHECK_THAT(load_error(twice), Catch::Contains("disagrees"));
}

TEST_CASE("parallelism_config as HF TrainingArguments takes it: sp_size is distributed.sequence_parallel_size",
          "[unit][checkpoint_offload][sequence_parallel]") {
  using hftrain_test::has_note;
  using hftrain_test::load;
  using hftrain_test::load_error;
  const std::string spec = hftrain_test::write_spec(
      "parallelism.yaml", "model: {type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, "
                          "num_attention_heads: 4, num_key_value_heads: 2}\ndata: {type: digit_reversal}\n"
                          "training:\n  output_dir: /tmp/x\n  parallelism_config:\n    sp_backend: deepspeed\n    sp_size: 2\n"
                          "    dp_replicate_size: 1\n    dp_shard_size: 2\n    tp_size: 1\n    cp_size: 1\n    sp_handler:\n"
                          "      sp_seq_length_is_variable: true\n      sp_attn_implementation: sdpa\n");
  const hftrain::RunSpec s = load(spec);
  CHECK(s.distributed.sequence_parallel_size == 2);
  CHECK(has_note(s, "training.parallelism_config.sp_handler"));
  CHECK(has_note(s, "training.parallelism_config.dp_shard_size"));
  CHECK(load(spec, {"training.parallelism_config={sp_size: 4}"}).distributed.sequence_parallel_size == 4);
  CHECK(load(spec, {"training.parallelism_config=null"}).distributed.sequence_parallel_size == 1);
  CHECK_THAT(load_error(spec, {"training.parallelism_config={sp_size: 2, tp_size: 2}"}),
             Catch::Contains("training.parallelism_config.tp_size") && Catch::Contains("tensor parallelism is not available"));
  CHECK_THAT(load_error(spec, {"training.parallelism_config={cp_size: 2}"}),
             Catch::Contains("training.parallelism_config.cp_size") && Catch::Contains("context parallelism"));
  CHECK_THAT(load_error(spec, {"training.parallelism_config={sp_size: 2, sp_backend: torch}"}),
             Catch::Contains("sp_backend") && Catch::Contains("only deepspeed"));
  CHECK_THAT(load_error(spec, {"training.parallelism_config={sp_sise: 2}"}),
             Catch::Contains("training.parallelism_config.sp_sise") && Catch::Contains("did you mean 'sp_size'"));
  CHECK_THAT(load_error(spec, {"distributed.sequence_parallel_size=4", "training.parallelism_config={sp_size: 2}"}),
             Catch::Contains("disagrees"));
}
