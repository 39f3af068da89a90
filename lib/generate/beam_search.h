// Beam search with the semantics of HF generate() (num_beams > 1, do_sample false): the decode loop
// (decode.h) with a beam picker, each prompt's step by its BeamState (beam_state.h: HF's scoring,
// BeamHypotheses, early_stopping true / false / "never", the processors on the log-probabilities). The
// KV cache's rows follow the beams (KvCache::keep_rows); an encoder-decoder model's beams are decoder
// sequences from the decoder start token, which takes the prompt's place in lengths and processors.
#pragma once

#include <vector>

#include "generate/generate.h"

namespace hftrain {

// The best config.num_return_sequences hypotheses, best first: tokens after the prompt (with the final eos
// for those that ended with it) and score = sum of token log-probabilities / generated_length **
// length_penalty, the generated length counting the eos.
std::vector<GeneratedSequence> beam_search(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config);

// beam_search for several prompts at once (HF generate() over a batch with num_beams): batch x num_beams
// rows through the model; a prompt whose search is done leaves the batch with its beams. The same
// hypotheses as beam_search prompt by prompt. Models without a KV cache, and decoder-only prompts that
// outgrow max_context (the window slides), are searched one at a time.
std::vector<std::vector<GeneratedSequence>> beam_search_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                              const GenerationConfig& config);

}  // namespace hftrain
