// The evaluation loop over a split of the data source (prediction: train/prediction.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "generate/generate.h"
#include "log/loop_progress.h"
#include "train/example_generation.h"
#include "train/model_and_data.h"

namespace hftrain {

// Runs the model over `split` (no grad, eval mode) and returns HF-style metrics:
// {prefix_loss, prefix_<metric>..., prefix_runtime, prefix_samples_per_second, prefix_steps_per_second};
// the speed metrics time the whole loop, generation included (HF speed_metrics).
// With pipeline.predict_with_generate (HF Seq2SeqTrainer) every example is also generated from (the
// `generation` settings); text metrics (rouge, bleu, exact_match) score the decoded generations against
// the decoded references, and prefix_gen_len is the mean length of what HF generate() returns (the decoder
// start token or the prompt, then the generated tokens) counting tokens other than padding.
// `progress`: how the loop shows its progress (LoopProgress), titled `prefix`.
nlohmann::json evaluate(ModelAndData& pipeline, const Components& components, const std::string& split,
                        int64_t batch_size, const std::string& prefix,
                        LoopProgress::Mode progress = LoopProgress::Mode::kOff);

// evaluate() scoring generations made already (`known`, in loader order: predict's) instead of
// generating again; the loss and token metrics are computed as evaluate() does.
nlohmann::json evaluate_generations(ModelAndData& pipeline, const Components& components, const std::string& split,
                                    int64_t batch_size, const std::string& prefix, const SplitGenerations& known);

// The generation settings of pipeline.generation for this pipeline's model and tokenizer (eos from the
// tokenizer when not given, the context limit from the model's config); throws ConfigError naming the
// generation.* option that is wrong.
GenerationConfig generation_config(const ModelAndData& pipeline);

}  // namespace hftrain
