// Beam search for causal LMs with the semantics of HF generate() (num_beams > 1, do_sample false) for one
// prompt: num_beams running beams scored by summed log-probabilities, finished hypotheses kept as HF's
// BeamHypotheses keeps them (length penalty, early_stopping true / false / "never"), HF's forbidding
// processors (no_repeat_ngram_size, min_new_tokens) on the log-probabilities, num_return_sequences best
// hypotheses returned. Models with a KV cache run the prompt once and then one token per beam per step,
// the cache's rows following the beams (KvCache::keep_rows). The rules of a step are BeamState's. Encoder-decoder models encode the prompt once (its output and
// cross-attention keys / values copied to every beam) and their beams are decoder sequences from the
// decoder start token, which takes the prompt's place in lengths and processors (as in HF).
#pragma once

#include <vector>

#include "generate/generate.h"

namespace hftrain {

// The best config.num_return_sequences hypotheses, best first: tokens after the prompt (with the final eos
// for those that ended with it) and score = sum of token log-probabilities / generated_length **
// length_penalty, the generated length counting the eos.
std::vector<GeneratedSequence> beam_search(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config);

// beam_search for several prompts at once (HF generate() over a batch with num_beams): batch x num_beams
// rows through the model, decoder-only prompts left-padded (KvCache::key_mask / positions), encoder-decoder
// sources right-padded and encoded once; a prompt whose search is done leaves the batch with its beams.
// The same hypotheses as beam_search prompt by prompt. Models without a KV cache, and decoder-only
// prompts that outgrow max_context (the window slides), are searched one at a time.
std::vector<std::vector<GeneratedSequence>> beam_search_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                              const GenerationConfig& config);

}  // namespace hftrain
