// The run spec's cross-section rules (see spec_rules.h), one function each.
#include "runspec/spec_rules.h"

#include "runspec/deepspeed_config.h"
#include "util/torch_compat.h"

namespace hftrain {
namespace {

YAML::Node at(const SpecRuleInput& in, const char* section, const char* key) {
  return lookup(lookup(in.root, section), key);
}

// --- training: ordering, evaluation and saving --------------------------------------------------------

void sortish_sampler_excludes_group_by_length(const SpecRuleInput& in) {
  if (in.spec.training.sortish_sampler && in.spec.training.group_by_length)
    in.issues.add("training.sortish_sampler", at(in, "training", "sortish_sampler"),
                  "and group_by_length both order the training set by length; choose one");
}

void best_model_needs_matching_strategies(const SpecRuleInput& in) {
  const TrainingArgs& t = in.spec.training;
  if (t.load_best_model_at_end && t.save_strategy != "best" && t.save_strategy != t.eval_strategy)
    in.issues.add("training.load_best_model_at_end", at(in, "training", "load_best_model_at_end"),
                  "needs save_strategy to match eval_strategy ('" + t.save_strategy + "' vs '" + t.eval_strategy + "')");
}

void best_save_strategy_needs_evaluation(const SpecRuleInput& in) {
  const TrainingArgs& t = in.spec.training;
  if (t.save_strategy == "best" && t.eval_strategy == "no")
    in.issues.add("training.save_strategy", at(in, "training", "save_strategy"),
                  "'best' needs an eval_strategy to find the best metric");
}

// --- training.deepspeed against the sections it was mapped into -----------------------------------------

// The model-derived "auto" values, and each DeepSpeed value against its TrainingArguments value.
void deepspeed_config_agrees_with_run(const SpecRuleInput& in) { finish_deepspeed_config(in.spec, in.catalog, in.issues); }

// --- zero offload against zero.stage (as DeepSpeed accepts it) --------------------------------------------

void optimizer_offload_needs_stage_1(const SpecRuleInput& in) {
  const ZeroArgs& z = in.spec.zero;
  if (z.offload_optimizer.device != "none" && z.stage == 0)
    in.issues.add("zero.offload_optimizer", at(in, "zero", "offload_optimizer"),
                  "offloading the optimizer state needs zero.stage 1, 2 or 3 (as in DeepSpeed)");
}

void parameter_offload_needs_stage_3(const SpecRuleInput& in) {
  if (in.spec.zero.offload_param != "none" && in.spec.zero.stage != 3)
    in.issues.add("zero.offload_param", at(in, "zero", "offload_param"),
                  "offloading parameters needs zero.stage 3 (as in DeepSpeed)");
}

void nvme_parameters_need_nvme_optimizer(const SpecRuleInput& in) {
  const ZeroArgs& z = in.spec.zero;
  if (z.offload_param == "nvme" && z.offload_optimizer.device != "nvme")
    in.issues.add("zero.offload_param", at(in, "zero", "offload_param"),
                  "device nvme keeps the parameter shards in the optimizer's swap files: set "
                  "zero.offload_optimizer.device nvme (and its nvme_path) as well");
}

void nvme_needs_path(const SpecRuleInput& in) {
  const ZeroArgs& z = in.spec.zero;
  if (z.offload_optimizer.device == "nvme" && z.offload_optimizer.nvme_path.empty())
    in.issues.add("zero.offload_optimizer.nvme_path", at(in, "zero", "offload_optimizer"),
                  "device nvme needs nvme_path: the directory for the swap files");
}

void nvme_block_size_aligned(const SpecRuleInput& in) {
  const ZeroArgs& z = in.spec.zero;
  if (z.offload_optimizer.device == "nvme" && z.aio.block_size % 4096 != 0)
    in.issues.add("zero.aio.block_size", lookup(at(in, "zero", "aio"), "block_size"),
                  "must be a multiple of 4096 (direct I/O alignment), got " + std::to_string(z.aio.block_size));
}

// A CPU build runs on the CPU, where offloaded state already lives: accepted, and said so once at the start
// (as is every other accepted setting that has no effect here). On a CUDA build a GPU worker offloads for real.
void settings_without_effect_noted(const SpecRuleInput& in) {
  const ZeroArgs& z = in.spec.zero;
  std::vector<std::string>& notes = in.spec.notes;
  if (z.offload_optimizer.device == "cpu" && !kCudaBuild)
    notes.push_back("zero.offload_optimizer cpu: this build runs on the CPU, where the optimizer state and fp32 "
                    "master weights already live; nothing is moved");
  if (in.spec.training.eval_accumulation_steps)
    notes.push_back("training.eval_accumulation_steps: accepted, nothing to do here: evaluation accumulates its "
                    "metrics batch by batch and keeps no logits or predictions");
  if (z.offload_param == "cpu" && !kCudaBuild)
    notes.push_back("zero.offload_param cpu: this build runs on the CPU, where the parameter shards already live; "
                    "nothing is moved");
}

// --- the build's devices ---------------------------------------------------------------------------------

void nccl_needs_cuda(const SpecRuleInput& in) {
  if (!kCudaBuild && in.spec.distributed.backend == "nccl")  // with CUDA: distributed/devices.h decides
    in.issues.add("distributed.backend", at(in, "distributed", "backend"),
                  "nccl needs CUDA, and this build runs on the CPU; use gloo (or auto)");
}

// --- sequence parallelism (Ulysses) against what cannot run over a slice of each sequence -----------------

// NEFTune scales its noise by the sequence length, which a rank holding a slice does not see.
void sequence_parallel_excludes_neftune(const SpecRuleInput& in) {
  if (in.spec.distributed.sequence_parallel_size > 1 && in.spec.training.neftune_noise_alpha > 0)
    in.issues.add("training.neftune_noise_alpha", at(in, "training", "neftune_noise_alpha"),
                  "scales its noise by the whole sequence's length, and with distributed.sequence_parallel_size " +
                      std::to_string(in.spec.distributed.sequence_parallel_size) +
                      " each rank embeds a slice of it; set one of them off");
}

void sequence_parallel_scope_noted(const SpecRuleInput& in) {
  if (in.spec.distributed.sequence_parallel_size > 1)
    in.spec.notes.push_back("distributed.sequence_parallel_size " + std::to_string(in.spec.distributed.sequence_parallel_size) +
                            ": training attends sequence parallel; evaluation and generation run whole sequences on "
                            "every worker");
}

// Offload keeps checkpointed block inputs in host memory: without checkpointing there are none to keep.
void checkpoint_offload_needs_checkpointing(const SpecRuleInput& in) {
  if (in.spec.training.gradient_checkpointing_offload && !in.spec.training.gradient_checkpointing)
    in.issues.add("training.gradient_checkpointing_offload", at(in, "training", "gradient_checkpointing_offload"),
                  "keeps the checkpointed input of each block in host memory, and training.gradient_checkpointing is "
                  "false (no block is checkpointed); set gradient_checkpointing: true or the offload off");
}

// --- precision against training and zero (HF TrainingArguments refuses the same combinations) -------------

void one_half_precision(const SpecRuleInput& in) {
  if (in.spec.precision.fp16 && in.spec.precision.bf16)
    in.issues.add("precision.fp16", at(in, "precision", "fp16"),
                  "precision.fp16 and precision.bf16 are both true; choose one");
}

// LibTorch's CPU kernels have no float16 matrix multiply: a build without CUDA refuses fp16 when the spec
// is read; a CUDA build refuses it for a worker placed on the CPU (train/model_and_data place_on_device).
void fp16_needs_cuda(const SpecRuleInput& in) {
  if constexpr (kCudaBuild) return;
  const char* hint = kFp16NeedsCuda;
  if (in.spec.precision.fp16) in.issues.add("precision.fp16", at(in, "precision", "fp16"), hint);
  if (in.spec.training.fp16_full_eval) in.issues.add("training.fp16_full_eval", at(in, "training", "fp16_full_eval"), hint);
}

// TF32 is a mode of NVIDIA GPUs: a build without CUDA refuses true when the spec is read; a CUDA build
// refuses it for a worker placed on the CPU and sets it for a GPU worker (train/model_and_data place_on_device).
void tf32_needs_cuda(const SpecRuleInput& in) {
  if constexpr (kCudaBuild) return;
  if (in.spec.training.tf32.value_or(false)) in.issues.add("training.tf32", at(in, "training", "tf32"), kTf32NeedsGpu);
}

void one_full_eval_precision(const SpecRuleInput& in) {
  if (in.spec.training.bf16_full_eval && in.spec.training.fp16_full_eval)
    in.issues.add("training.bf16_full_eval", at(in, "training", "bf16_full_eval"),
                  "training.bf16_full_eval and training.fp16_full_eval are both true; choose one");
}

void fp32_reduction_needs_mixed_precision(const SpecRuleInput& in) {
  const PrecisionArgs& p = in.spec.precision;
  if (in.spec.zero.reduce_dtype == "fp32" && !p.bf16 && !p.fp16)
    in.issues.add("zero.reduce_dtype", at(in, "zero", "reduce_dtype"),
                  "gradients are already fp32 without precision.bf16 / fp16; remove it or enable mixed precision");
}

// --- generation --------------------------------------------------------------------------------------------

void return_sequences_within_beams(const SpecRuleInput& in) {
  const GenerationArgs& g = in.spec.generation;
  if (g.num_return_sequences > g.num_beams)
    in.issues.add("generation.num_return_sequences", at(in, "generation", "num_return_sequences"),
                  "must be <= generation.num_beams (" + std::to_string(g.num_beams) + "), got " +
                      std::to_string(g.num_return_sequences) +
                      "; beam search returns at most its num_beams best hypotheses");
}

void beam_sampling_not_built(const SpecRuleInput& in) {
  const GenerationArgs& g = in.spec.generation;
  if (g.do_sample && g.num_beams > 1)
    in.issues.add("generation.num_beams", at(in, "generation", "num_beams"),
                  "do_sample with num_beams > 1 (HF's beam sampling) is not built; use do_sample: false for beam "
                  "search or num_beams: 1 for sampling");
}

}  // namespace

const std::vector<SpecRule>& spec_rules() {
  static const std::vector<SpecRule> rules = {
      {"sortish_sampler_excludes_group_by_length", sortish_sampler_excludes_group_by_length},
      {"best_model_needs_matching_strategies", best_model_needs_matching_strategies},
      {"best_save_strategy_needs_evaluation", best_save_strategy_needs_evaluation},
      {"deepspeed_config_agrees_with_run", deepspeed_config_agrees_with_run},
      {"optimizer_offload_needs_stage_1", optimizer_offload_needs_stage_1},
      {"parameter_offload_needs_stage_3", parameter_offload_needs_stage_3},
      {"nvme_parameters_need_nvme_optimizer", nvme_parameters_need_nvme_optimizer},
      {"nvme_needs_path", nvme_needs_path},
      {"nvme_block_size_aligned", nvme_block_size_aligned},
      {"settings_without_effect_noted", settings_without_effect_noted},
      {"nccl_needs_cuda", nccl_needs_cuda},
      {"sequence_parallel_excludes_neftune", sequence_parallel_excludes_neftune},
      {"sequence_parallel_scope_noted", sequence_parallel_scope_noted},
      {"checkpoint_offload_needs_checkpointing", checkpoint_offload_needs_checkpointing},
      {"one_half_precision", one_half_precision},
      {"fp16_needs_cuda", fp16_needs_cuda},
      {"tf32_needs_cuda", tf32_needs_cuda},
      {"one_full_eval_precision", one_full_eval_precision},
      {"fp32_reduction_needs_mixed_precision", fp32_reduction_needs_mixed_precision},
      {"return_sequences_within_beams", return_sequences_within_beams},
      {"beam_sampling_not_built", beam_sampling_not_built},
  };
  return rules;
}

void check_spec_rules(const SpecRuleInput& in) {
  for (const SpecRule& rule : spec_rules()) rule.check(in);
}

}  // namespace hftrain
