// Text generation as HF generate() does it: greedy decoding, sampling after HF's logits warpers
// (temperature, then top-k, then top-p) with a seeded generator, or beam search (beam_search.h); up to
// the token budget, stopping after the eos token; HF's forbidding processors (no_repeat_ngram_size,
// min_length, min_new_tokens, forced bos / eos) apply to all three. One decode loop (generate/decode.h)
// serves a single prompt and a batch of them: a feeder runs the model for the next-token logits (KV-cached
// decoder-only, encoder-decoder with cached self- and cross-attention, or the context window rerun each
// step for models without a cache and past max_context) and a token picker chooses from them (greedy,
// sampling, or beams through BeamState). Encoder-decoder models (t5, bart) encode the prompt once and
// decode from their decoder start token; the returned tokens are those after the start token.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "models/model.h"
#include "runspec/sections.h"

namespace hftrain {

// The run spec's generation settings (GenerationArgs: the field list, its defaults and their meaning)
// as generation reads them, plus what the model at hand adds. generation_config (train/evaluation.h)
// builds one from a pipeline: the eos token from the tokenizer when the spec names none, max_context from
// the model's config.json. HF's rule for the length: max_new_tokens when set, else max_length, else 16.
struct GenerationConfig : GenerationArgs {
  int64_t max_context = 0;  // > 0: the model sees only the last max_context tokens (decoder-only models)
};

// max_new_tokens when neither it nor max_length is set (HF's default).
constexpr int64_t kDefaultMaxNewTokens = 16;

// How many tokens may be generated after a start of `start_length` tokens (the prompt, or the decoder
// start token): max_new_tokens when set, else max_length - start_length when max_length is set
// (ConfigError when that is not positive, as HF refuses it), else kDefaultMaxNewTokens.
int64_t new_token_budget(const GenerationConfig& config, int64_t start_length);

// One generated continuation: the tokens after the prompt (ending with eos when it finished by eos) and,
// for beam search, its length-penalised score (0 for greedy and sampling).
struct GeneratedSequence {
  std::vector<int64_t> tokens;
  double score = 0;
};

// Checks the combination of settings (num_return_sequences <= num_beams, no beam sampling, ...);
// throws ConfigError naming the generation.* option.
void validate_generation_config(const GenerationConfig& config);

// HF's logits processors that forbid or force tokens, on next-token scores [rows, V] for the sequences
// `rows` (prompt included; `prompt_length` tokens of each are the prompt), in HF's order: NoRepeatNGram
// (a token that would complete an n-gram already in the row), MinLength (eos while the row is shorter than
// min_length) and MinNewTokensLength (eos while fewer than min_new_tokens were generated) set -inf;
// ForcedBOS (a row of length 1) and ForcedEOS (a row one token short of its length limit) set every
// score to -inf but the forced token's, which becomes 0.
void mask_forbidden_tokens(torch::Tensor& scores, const std::vector<std::vector<int64_t>>& rows, int64_t prompt_length,
                           const GenerationConfig& config);

// HF's sampling warpers on one row of next-token logits [V]: divide by temperature, keep the top_k
// largest (others -inf), keep the smallest set whose probability reaches top_p (at least one token).
torch::Tensor warp_logits(const torch::Tensor& logits, const GenerationConfig& config);

// The generated continuation of `prompt` (without the prompt) by greedy decoding or sampling (num_beams
// is not read). `generator` is advanced by sampling.
std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator);

// num_return_sequences continuations of `prompt`: beam search when num_beams > 1, else one sequence from
// greedy decoding or sampling. HF generate()'s dispatch.
std::vector<GeneratedSequence> generate_sequences(Model& model, const std::vector<int64_t>& prompt,
                                                  const GenerationConfig& config, at::Generator& generator);

// A CPU generator seeded like torch.Generator().manual_seed(seed).
at::Generator make_generator(uint64_t seed);

// The longest context the model accepts according to its config.json (n_positions,
// max_position_embeddings); 0 when it names none.
int64_t model_max_context(const Model& model);

}  // namespace hftrain
