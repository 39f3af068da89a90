// Beam search for causal LMs with the semantics of HF generate() (num_beams > 1, do_sample false) for one
// prompt: num_beams running beams scored by summed log-probabilities, finished hypotheses kept as HF's
// BeamHypotheses keeps them (length penalty, early_stopping true / false / "never"), HF's forbidding
// processors (no_repeat_ngram_size, min_new_tokens) on the log-probabilities, num_return_sequences best
// hypotheses returned. Models with a KV cache run the prompt once and then one token per beam per step,
// the cache's rows following the beams. Encoder-decoder models encode the prompt once (its output and
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

// Row i of every cached layer (and of the encoder output, its mask and the cross-attention keys / values)
// becomes the old row rows[i] (rows: int64 [new batch]); beams that continue the same parent share them.
void select_cache_rows(KvCache& cache, const torch::Tensor& rows);

}  // namespace hftrain
