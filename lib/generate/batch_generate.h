// Generation for several prompts at once, as HF generate() runs a batch: a decoder-only model gets the
// prompts left-padded into one block with an attention mask and position ids counted from each row's first
// token (KvCache::key_mask / positions); an encoder-decoder model encodes the right-padded sources once
// (their mask goes to cross-attention) and decodes every row from its start token. Each step feeds one
// token per unfinished row; a row that finished (eos, or its token budget) leaves the batch and its cache
// (KvCache::keep_rows), so it costs nothing more. HF's processors apply to each row with its own prompt.
#pragma once

#include <vector>

#include "generate/generate.h"

namespace hftrain {

// The continuation of each prompt, as generate() returns it. Greedy decoding gives the tokens generate()
// gives prompt by prompt (the padded positions are masked out exactly). Sampling draws each step's tokens of
// all unfinished rows from one [rows, V] multinomial, as HF's batched sampling does, so it is not the same
// stream as sampling prompt by prompt. Prompts that generate() would not run with a KV cache (a model
// without one, or a row whose prompt and budget outgrow max_context, where the window slides) are
// generated one at a time.
std::vector<std::vector<int64_t>> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                 const GenerationConfig& config, at::Generator& generator);

// generate_sequences for each prompt: greedy and sampling through generate_batch, beam search
// (num_beams > 1) through beam_search_batch.
std::vector<std::vector<GeneratedSequence>> generate_sequences_batch(Model& model,
                                                                     const std::vector<std::vector<int64_t>>& prompts,
                                                                     const GenerationConfig& config,
                                                                     at::Generator& generator);

}  // namespace hftrain
