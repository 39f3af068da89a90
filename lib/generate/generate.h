// Text generation for causal LMs, as HF generate() does it for one prompt: greedy decoding, or
// sampling after HF's logits warpers (temperature, then top-k, then top-p) with a seeded generator;
// up to max_new_tokens, stopping after the eos token; HF's no_repeat_ngram_size and min_new_tokens
// processors apply to both (beam search is beam_search.h; generate_sequences picks the method). Models with a KV cache (gpt, gpt2, llama) run the
// prompt once and then one token per step; once the context outgrows max_context the window slides and
// each step reruns it (positions move), as models without a cache always do. Encoder-decoder models (t5)
// encode the prompt once and decode from their decoder start token with cached self- and cross-attention
// keys / values; the returned tokens are those after the start token (HF's generate() for seq2seq).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "models/model.h"

namespace hftrain {

struct GenerationConfig {
  int64_t max_new_tokens = 16;
  // HF max_length: the whole sequence's length (prompt + generated for decoder-only models; the decoder
  // start token + generated for encoder-decoder models). Set, it replaces max_new_tokens (new_token_budget).
  std::optional<int64_t> max_length;
  std::optional<int64_t> min_length;  // HF min_length: eos is masked while the sequence is shorter
  bool do_sample = false;
  double temperature = 1.0;   // 1 = unchanged
  int64_t top_k = 50;         // 0 = off
  double top_p = 1.0;         // 1 = off
  std::optional<int64_t> eos_token_id;  // stop after generating it (it is kept in the output)
  int64_t max_context = 0;    // > 0: the model sees only the last max_context tokens
  int64_t min_new_tokens = 0;         // eos is masked until this many tokens were generated
  int64_t no_repeat_ngram_size = 0;   // > 0: no n-gram of this size (prompt included) occurs twice
  // Beam search (beam_search.h) when num_beams > 1.
  int64_t num_beams = 1;
  double length_penalty = 1.0;        // a finished beam scores sum_logprobs / generated_length ** length_penalty
  enum class EarlyStopping { kFalse, kTrue, kNever };
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int64_t num_return_sequences = 1;   // <= num_beams
  // HF ForcedBOS / ForcedEOS processors: the first token of the decoder (a sequence of length 1) must be
  // forced_bos_token_id; the token that reaches the length limit must be forced_eos_token_id.
  std::optional<int64_t> forced_bos_token_id;
  std::optional<int64_t> forced_eos_token_id;
};

// How many tokens may be generated after a start of `start_length` tokens (the prompt, or the decoder
// start token): max_length - start_length when max_length is set (ConfigError when that is not positive,
// as HF refuses it), else max_new_tokens.
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

// Picks the next token from logits [V]: argmax, or a draw from softmax(warp_logits) using `generator`.
int64_t next_token(const torch::Tensor& logits, const GenerationConfig& config, at::Generator& generator);

// The generated continuation of `prompt` (without the prompt). `generator` is advanced by sampling.
std::vector<int64_t> generate(Model& model, const std::vector<int64_t>& prompt, const GenerationConfig& config,
                              at::Generator& generator);

// num_return_sequences continuations of `prompt`: beam search when num_beams > 1, else one sequence from
// generate(). HF generate()'s dispatch for decoder-only models.
std::vector<GeneratedSequence> generate_sequences(Model& model, const std::vector<int64_t>& prompt,
                                                  const GenerationConfig& config, at::Generator& generator);

// A CPU generator seeded like torch.Generator().manual_seed(seed).
at::Generator make_generator(uint64_t seed);

// The longest context the model accepts according to its config.json (n_positions,
// max_position_embeddings); 0 when it names none.
int64_t model_max_context(const Model& model);

// Token ids as a [1, n] (or, from rows of equal length, [rows, n]) int64 tensor on the model's device:
// generation feeds the model there and processes each step's last logits on the host.
torch::Device model_device(const Model& model);
torch::Tensor token_ids_on(const std::vector<int64_t>& ids, const torch::Device& device);

// Batched generation's blocks (batch_generate.h, beam_search_batch). Decoder-only prompts left-padded into
// [rows, longest] with cache.key_mask (1 = token, 0 = padding) and cache.positions (HF: each row's tokens
// counted from its first) set for them; returns the block.
torch::Tensor left_padded_prompts(const std::vector<std::vector<int64_t>>& prompts, KvCache& cache, const torch::Device& device);
// The next step of left-padded rows: one new token per row at `positions` (its index in the unpadded row).
void extend_left_padded(KvCache& cache, const std::vector<int64_t>& positions, const torch::Device& device);
// Encoder sources right-padded into [rows, longest] and their mask.
std::pair<torch::Tensor, torch::Tensor> right_padded_sources(const std::vector<std::vector<int64_t>>& sources,
                                                             const torch::Device& device);

}  // namespace hftrain
