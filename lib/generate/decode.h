// The one decode loop behind every generation entry point (generate.h, batch_generate.h, beam_search.h):
// each step a Feeder runs the model for the next-token logits of the rows being decoded, and a
// TokenPicker chooses their next tokens (greedy or sampling: one row per prompt; beam search: num_beams
// rows per prompt, BeamState's rules). A prompt whose search is done leaves the batch with its rows. A
// single prompt is a batch of one, decoded without padding, as HF's generate() decodes one prompt.
#pragma once

#include <memory>
#include <vector>

#include "generate/generate.h"

namespace hftrain {

// The decoded rows: each row's whole sequence (the prompt or the decoder start token, then the tokens
// picked so far), the unfinished prompts' rows in prompt order, rows_per_prompt of each.
using DecodeRows = std::vector<const std::vector<int64_t>*>;

// How the model is run for the next-token logits (feeders.cpp): KV-cached decoder-only (left-padded
// prompts with per-row positions when there are several; past max_context it hands over to the window),
// encoder-decoder with cached self- and cross-attention (right-padded sources, their mask on
// cross-attention), or the context window rerun each step (models without a KV cache).
class Feeder {
 public:
  virtual ~Feeder() = default;
  // The next-token logits [rows, V] (on the model's device) of `rows`.
  virtual torch::Tensor next_logits(const DecodeRows& rows) = 0;
  // The next call's rows continue these rows of the last call (a finished prompt's rows are left out;
  // beams that continue one parent repeat it), so the cache's rows follow them.
  virtual void keep_rows(const std::vector<int64_t>& rows) = 0;
};

// The feeder for `prompts` decoded together, rows_per_prompt rows each. The rerun window serves one
// prompt only (its rows are of one length): RuntimeFailure for several prompts and a model without a
// KV cache.
std::unique_ptr<Feeder> make_feeder(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                    const GenerationConfig& config, int64_t rows_per_prompt);

// How the next tokens are chosen (token_pickers.cpp).
enum class Picking { kGreedyOrSampling, kBeams };
// kBeams when config.num_beams > 1 (HF generate()'s dispatch), else kGreedyOrSampling.
Picking picking_for(const GenerationConfig& config);

class TokenPicker {
 public:
  virtual ~TokenPicker() = default;
  virtual std::size_t prompts() const = 0;
  virtual int64_t rows_per_prompt() const = 0;  // 1, or num_beams
  // Prompt p's rows (start + picked tokens) and whether its search is done.
  virtual const std::vector<std::vector<int64_t>>& rows(std::size_t prompt) const = 0;
  virtual bool finished(std::size_t prompt) const = 0;
  // One step for the unfinished prompts `active` from their rows' next-token logits [rows, V] (any device
  // and dtype; processed on the host): each row gets its next token. Returns, per active prompt, each new
  // row's parent among the prompt's rows before the step.
  virtual std::vector<std::vector<int64_t>> pick(const torch::Tensor& logits, const std::vector<std::size_t>& active) = 0;
  // Prompt p's sequences after its start, as GeneratedSequence (beams: the num_return_sequences best).
  virtual std::vector<GeneratedSequence> result(std::size_t prompt) = 0;
};

// A picker over `starts` (each prompt's start: the prompt, or the decoder start token). Greedy decoding
// or sampling (config.do_sample; sampling draws every row's token from one multinomial over [rows, V], as
// HF's batched sampling does) advances `generator`; beams ignore it.
std::unique_ptr<TokenPicker> make_token_picker(Picking picking, std::vector<std::vector<int64_t>> starts,
                                               const GenerationConfig& config, at::Generator& generator);

// Every prompt's sequences (one for greedy / sampling, num_return_sequences for beams), in order. Prompts
// that the rerun window decodes (a model without a KV cache, or a decoder-only prompt whose prompt plus
// budget outgrows max_context) are decoded one at a time first, in order; the others together. Checks the
// settings first (ConfigError) and refuses an empty prompt (RuntimeFailure).
std::vector<std::vector<GeneratedSequence>> decode_prompts(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                                           const GenerationConfig& config, at::Generator& generator,
                                                           Picking picking);

}  // namespace hftrain
