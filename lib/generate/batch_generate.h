// Generation for several prompts at once, as HF generate() runs a batch (the decode loop, decode.h):
// decoder-only prompts left-padded with an attention mask and position ids counted from each row's first
// token, encoder-decoder sources right-padded and encoded once; a row that finished (eos, or its token
// budget) leaves the batch and its KV cache. HF's processors apply to each row with its own prompt.
#pragma once

#include <vector>

#include "generate/generate.h"

namespace hftrain {

// The continuation of each prompt, as generate() returns it. Greedy decoding gives the tokens generate()
// gives prompt by prompt (the padded positions are masked out exactly). Sampling draws each step's tokens of
// all unfinished rows from one [rows, V] multinomial, as HF's batched sampling does, so it is not the same
// stream as sampling prompt by prompt. Prompts that the rerun window decodes (a model without a KV cache,
// or a row whose prompt and budget outgrow max_context) are generated one at a time, before the others.
std::vector<std::vector<int64_t>> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                 const GenerationConfig& config, at::Generator& generator);

// generate_sequences for each prompt: greedy and sampling as generate_batch, beam search (num_beams > 1)
// as beam_search_batch.
std::vector<std::vector<GeneratedSequence>> generate_sequences_batch(Model& model,
                                                                     const std::vector<std::vector<int64_t>>& prompts,
                                                                     const GenerationConfig& config,
                                                                     at::Generator& generator);

}  // namespace hftrain
