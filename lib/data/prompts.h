// The prompts of `hftrain predict --prompts FILE`, one per row, as users keep them: JSON Lines or a JSON
// array of objects (.jsonl / .json: the string field `column` of each object), CSV / TSV with a header row
// (.csv / .tsv: the column `column`) or plain text (any other name: each non-blank line, verbatim, without
// its line break).
// Nothing is packed, joined or truncated here. Free of LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain {

struct Prompt {
  std::string text;  // verbatim
  int64_t line = 0;  // 1-based line of the file where the row starts
  // JSON Lines rows with a `messages` list (and no prompt field): the conversation as JSON text, rendered with
  // the chat template and its generation prompt by `hftrain predict`; `text` is then empty.
  std::string messages;
};

// A JSON Lines row without the column but with a `messages` list is a conversation (Prompt::messages).
// ConfigError naming file:line for a row without the column, a value that is not a string, an empty
// value or invalid UTF-8, and for a file that cannot be read or holds no prompt.
std::vector<Prompt> read_prompts(const std::string& path, const std::string& column);

}  // namespace hftrain
