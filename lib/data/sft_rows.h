// Supervised fine-tuning rows as TRL's SFTTrainer tokenizes them: the dataset format told from the columns
// (language modeling through dataset_text_field, prompt-completion, conversational `messages`,
// conversational prompt-completion), chat templates applied, EOS appended to non-conversational text and
// completions that do not end with it, and the label masks: completion_only_loss (the prompt's tokens -100)
// and assistant_only_loss (only the assistant's tokens scored: the template's {% generation %} spans, else the
// turns found by rendering prefixes, mapped from bytes to tokens through each token's offsets). Truncation
// to max_length keeps the start. Free of LibTorch.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/row_checks.h"
#include "data/text_rows.h"

namespace hftrain {

// kPlain: the file source's own causal-LM path (text_column, as HF run_clm: no EOS added).
enum class SftFormat { kPlain, kLanguageModeling, kPromptCompletion, kConversational, kConversationalPromptCompletion };

// "conversational (column 'messages')" and the like, for the line printed at start.
std::string describe_sft_format(SftFormat format, const std::string& text_field);

// The format of `rows`, told from the first well-formed row's columns: `dataset_text_field` when given (TRL
// language modeling), else kPlain when the row has `text_column` (as before chat data was read), else
// `messages` (conversational), else `prompt` and `completion` (conversational when the prompt is a list of
// messages), else kPlain.
SftFormat detect_sft_format(const std::vector<Row>& rows, const std::string& dataset_text_field,
                            const std::string& text_column = "text");

struct SftSettings {
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat = nullptr;  // required by the conversational formats
  std::string text_field;              // kLanguageModeling: the column
  bool completion_only_loss = true;    // kPromptCompletion / kConversationalPromptCompletion
  bool assistant_only_loss = false;    // the conversational formats
  std::string eos_token;               // appended to text / completions that do not end with it
  int64_t max_length = 0;              // > 0: each example truncated to this many tokens (its start kept)
};

// A row that cannot become an example: the column and the reason (the caller errors or skips it).
struct SftRowError {
  RowIssue issue;
};

// One row as an example: input_ids, labels (-100 where masked), prompt_length (the prompt's tokens for the
// prompt-completion formats). Throws SftRowError for a row without the format's columns or with a malformed
// message list, and ConfigError for a template's error, an assistant_only_loss example without assistant
// tokens (TRL's refusal) or, for a template without generation markers, one whose prefix renders are not the
// start of the whole conversation's text (the message named).
Example make_sft_example(const Row& row, SftFormat format, const SftSettings& settings);

// The byte span [begin, end) of each of `ids` in `text`, from each token decoded alone (the tokens of a
// character split over byte-level tokens decoded together, each spanning it); nullopt when the pieces do not
// spell `text` exactly (a tokenizer whose decoding is not a concatenation of its tokens).
std::optional<std::vector<std::pair<std::size_t, std::size_t>>> token_byte_offsets(const Tokenizer& tokenizer,
                                                                                   const std::string& text,
                                                                                   const std::vector<int64_t>& ids);

// transformers' return_assistant_tokens_mask: 1 for each token from the one holding a span's first byte to
// the one holding its last byte, for every non-empty span.
std::vector<int64_t> assistant_token_mask(const std::vector<std::pair<std::size_t, std::size_t>>& offsets,
                                          const std::vector<jinja::GenerationSpan>& spans);

}  // namespace hftrain
