// What the trainer asks the engine layer instead of reading zero.stage and the precision flags itself: the
// precision policy (engine/precision.h), the construction plan of zero.Init (engine/construction_plan.h), and
// the built engine's answers about the state's layout and the final save (engine/engine.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "builtins/register_builtins.h"
#include "engine/construction_plan.h"
#include "engine/engine_builder.h"
#include "engine/precision.h"
#include "train/model_and_data.h"

using namespace hftrain;

namespace {

// A small gpt run spec with `extra` sections and `training` keys, loaded through the built-in components.
RunSpec spec_with(const std::string& extra, const std::string& training = "") {
  const auto dir = std::filesystem::temp_directory_path() / ("hftrain_unit_engine_plan_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "spec.yaml").string();
  std::ofstream(path) << "model: {type: gpt, n_embd: 16, n_layer: 1, n_head: 2}\n"
                         "data: {type: digit_reversal, num_digits: 2, train_size: 8, eval_size: 4, test_size: 2}\n"
                         "training: {output_dir: " << (dir / "out").string() << training << "}\n"
                      << extra;
  RunSpec spec = load_run_spec(path, {}, builtin_components().catalog());
  std::filesystem::remove_all(dir);
  return spec;
}

// The engine the trainer would build for `spec` in one process.
std::unique_ptr<Engine> engine_for(const RunSpec& spec, LocalComm& comm) {
  const auto& c = builtin_components();
  ModelAndData p = build_model_and_data(spec, c, /*for_training=*/true);
  auto build_optimizer = [&](std::vector<ParamGroup> groups) {
    return c.optimizers.build(spec.optimizer.type, spec.optimizer.options, std::move(groups), OptimizerHyper{});
  };
  return build_engine({spec, p.precision, p.model, p.deferred_weights, c.optimizers.traits(spec.optimizer.type),
                       build_optimizer, comm, torch::kCPU});
}

}  // namespace

TEST_CASE("precision policy: precision.*, zero.reduce_dtype and the full-eval flags read once", "[unit][engine_plan]") {
  const PrecisionPolicy fp32 = precision_policy(spec_with(""));
  CHECK(fp32.compute_dtype() == torch::kFloat);
  CHECK_FALSE(fp32.training.enabled());
  CHECK(fp32.saved_dtype == torch::kFloat);
  CHECK(fp32.full_eval_dtype == torch::kFloat);

  const PrecisionPolicy bf16 = precision_policy(spec_with("precision: {bf16: true, save_dtype: bf16}\nzero: {reduce_dtype: fp32}\n"));
  CHECK(bf16.compute_dtype() == torch::kBFloat16);
  CHECK(bf16.training.param_dtype == torch::kBFloat16);
  CHECK(bf16.training.reduce_dtype == torch::kFloat);
  CHECK(bf16.saved_dtype == torch::kBFloat16);
  CHECK_FALSE(bf16.training.scaler.dynamic);  // no loss scaling without fp16

  const PrecisionPolicy kept = precision_policy(spec_with("precision: {bf16: true}\n"));
  CHECK(kept.training.reduce_dtype == torch::kBFloat16);  // auto: the parameters' dtype
  CHECK(kept.saved_dtype == torch::kFloat);               // the fp32 masters are saved unless save_dtype says

  CHECK(precision_policy(spec_with("", ", bf16_full_eval: true")).full_eval_dtype == torch::kBFloat16);
}

TEST_CASE("construction plan: zero.Init only for training at stage 3 with zero3_init_flag and no adapter",
          "[unit][engine_plan]") {
  const RunSpec stage3 = spec_with("zero: {stage: 3}\n");
  const ConstructionPlan training = plan_construction(stage3, /*for_training=*/true);
  CHECK(training.deferred);
  CHECK(training.sharded_init);
  CHECK(training.parameters_sharded);
  CHECK(training.partitions_adapters);

  const ConstructionPlan evaluating = plan_construction(stage3, /*for_training=*/false);
  CHECK_FALSE(evaluating.deferred);
  CHECK(evaluating.parameters_sharded);  // forwards still gather collectively
  CHECK_FALSE(evaluating.partitions_adapters);

  const ConstructionPlan no_init = plan_construction(spec_with("zero: {stage: 3, zero3_init_flag: false}\n"), true);
  CHECK_FALSE(no_init.deferred);
  CHECK_FALSE(no_init.sharded_init);
  CHECK(no_init.parameters_sharded);

  const ConstructionPlan adapter = plan_construction(spec_with("zero: {stage: 3}\npeft: {r: 2, target_modules: [c_attn]}\n"), true);
  CHECK_FALSE(adapter.deferred);  // the adapters attach to a base built whole
  CHECK(adapter.partitions_adapters);

  const ConstructionPlan stage2 = plan_construction(spec_with("zero: {stage: 2}\n"), true);
  CHECK_FALSE(stage2.deferred);
  CHECK_FALSE(stage2.parameters_sharded);
}

TEST_CASE("the engine answers what the trainer saves: layout, shards kept as the model, its log line",
          "[unit][engine_plan]") {
  LocalComm comm;
  const auto local = engine_for(spec_with(""), comm);
  CHECK(local->describe().empty());  // the single-process fp32 engine: nothing to log
  CHECK_FALSE(local->keeps_model_in_shards());
  CHECK(local->layout()["zero_stage"] == 0);
  CHECK(local->layout()["dtypes"]["parameters"] == "fp32");
  CHECK(local->layout()["optimizer_state"] == "optimizer.safetensors");
  CHECK_FALSE(local->layout().contains("partition"));

  const auto bf16 = engine_for(spec_with("precision: {bf16: true}\nzero: {stage: 1}\n"), comm);
  CHECK_FALSE(bf16->describe().empty());
  CHECK(bf16->layout()["zero_stage"] == 1);
  CHECK(bf16->layout()["dtypes"]["parameters"] == "bf16");
  CHECK(bf16->layout()["optimizer_state"] == "ZeRO shards (latest)");
  CHECK(bf16->layout().contains("partition"));
  CHECK_FALSE(bf16->keeps_model_in_shards());

  CHECK_FALSE(engine_for(spec_with("zero: {stage: 3}\n"), comm)->keeps_model_in_shards());
  const auto shards = engine_for(spec_with("zero: {stage: 3, stage3_gather_16bit_weights_on_model_save: false}\n"), comm);
  CHECK(shards->keeps_model_in_shards());
  CHECK(shards->layout()["zero_stage"] == 3);
}

TEST_CASE("engine settings: one struct from the spec, its defaults the spec schema's", "[unit][engine_plan]") {
  const auto& c = builtin_components();
  auto settings_for = [&](const RunSpec& spec) {
    ModelAndData p = build_model_and_data(spec, c, /*for_training=*/false);
    LocalComm comm;
    return engine_config_for({spec, p.precision, p.model, nullptr, c.optimizers.traits(spec.optimizer.type), nullptr,
                              comm, torch::kCPU});
  };
  const EngineSettings defaults;
  const EngineSettings built = settings_for(spec_with("zero: {stage: 3}\n"));
  CHECK(built.stage == 3);
  CHECK(built.persistence_threshold == defaults.persistence_threshold);
  CHECK(built.gather_limits.prefetch_elements == defaults.gather_limits.prefetch_elements);
  CHECK(built.gather_limits.max_live_elements == defaults.gather_limits.max_live_elements);
  CHECK(built.gather_16bit_weights_on_model_save == defaults.gather_16bit_weights_on_model_save);
  CHECK(built.bucket_cap_mb == defaults.bucket_cap_mb);
  CHECK(defaults.gather_limits.prefetch_elements > 0);  // a prefetch budget, not "none"

  const EngineSettings given = settings_for(
      spec_with("zero: {stage: 3, stage3_param_persistence_threshold: 7, stage3_prefetch_bucket_size: 11, "
                "stage3_max_live_parameters: 13, stage3_gather_16bit_weights_on_model_save: false}\n"
                "distributed: {ddp_bucket_cap_mb: 3}\n",
                ", max_grad_norm: 0.25"));
  CHECK(given.persistence_threshold == 7);
  CHECK(given.gather_limits.prefetch_elements == 11);
  CHECK(given.gather_limits.max_live_elements == 13);
  CHECK_FALSE(given.gather_16bit_weights_on_model_save);
  CHECK(given.bucket_cap_mb == 3);
  CHECK(given.max_grad_norm == 0.25);
  CHECK(given.gather_units.size() == 3);  // the embeddings, the block, the head
}
