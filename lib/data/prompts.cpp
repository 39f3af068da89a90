// Reading a prompts file (see prompts.h).
#include "data/prompts.h"

#include "data/text_rows.h"
#include "util/error.h"
#include "util/strings.h"

namespace hftrain {

std::vector<Prompt> read_prompts(const std::string& path, const std::string& column) {
  RowFormat format = RowFormat::kText;
  if (ends_with(path, ".jsonl") || ends_with(path, ".json")) format = RowFormat::kJsonl;
  else if (ends_with(path, ".csv")) format = RowFormat::kCsv;
  else if (ends_with(path, ".tsv")) format = RowFormat::kTsv;
  const bool text = format == RowFormat::kText;
  const std::string key = text ? "text" : column;
  std::vector<Prompt> prompts;
  for (const Row& row : read_rows(path, format)) {
    const std::string where = "--prompts " + row_location(path, row) + ": ";
    if (!row.problem.empty())
      throw ConfigError(where + (row.problem_column.empty() ? "" : "column '" + row.problem_column + "': ") + row.problem);
    auto it = row.fields.find(key);
    auto chat = row.fields.find("messages");
    if (it == row.fields.end() && format == RowFormat::kJsonl && chat != row.fields.end() && chat->second &&
        !row.is_string.at("messages") && chat->second->rfind("[", 0) == 0) {
      prompts.push_back(Prompt{"", row.line, *chat->second});
      continue;
    }
    if (it == row.fields.end())
      throw ConfigError(where + "no field '" + key + "' (--prompt-column names the field holding the prompt)");
    if (text && it->second && it->second->find_first_not_of(" \t") == std::string::npos) continue;  // blank line
    auto is_string = row.is_string.find(key);
    if (!it->second || (is_string != row.is_string.end() && !is_string->second))
      throw ConfigError(where + "field '" + key + "' is not a string");
    if (it->second->empty()) throw ConfigError(where + "field '" + key + "' is an empty prompt");
    Prompt prompt;
    prompt.text = *it->second;
    prompt.line = row.line;
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) throw ConfigError("--prompts " + path + ": the file holds no prompt");
  return prompts;
}

}  // namespace hftrain
