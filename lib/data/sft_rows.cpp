// TRL's tokenization of SFT rows (see sft_rows.h).
#include "data/sft_rows.h"

#include <algorithm>

#include "util/error.h"
#include "util/strings.h"

namespace hftrain {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void row_error(const std::string& column, const std::string& reason) {
  throw SftRowError{RowIssue{column, reason}};
}

const std::string& string_field(const Row& row, const std::string& column) {
  auto it = row.fields.find(column);
  if (it == row.fields.end()) row_error(column, "missing column");
  if (!it->second) row_error(column, "null value");
  auto s = row.is_string.find(column);
  if (s != row.is_string.end() && !s->second) row_error(column, "not a string");
  return *it->second;
}

// A column holding a list of {role, content, ...} messages (JSON text in the row).
Json message_list(const Row& row, const std::string& column) {
  auto it = row.fields.find(column);
  if (it == row.fields.end()) row_error(column, "missing column");
  if (!it->second) row_error(column, "null value");
  auto s = row.is_string.find(column);
  if (s != row.is_string.end() && s->second) row_error(column, "a string, not a list of messages");
  Json list;
  try {
    list = Json::parse(*it->second);
  } catch (const Json::parse_error&) {
    row_error(column, "not a list of messages");
  }
  if (!list.is_array()) row_error(column, "not a list of messages");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Json& m = list[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      row_error(column, "message " + std::to_string(i) + " has no string 'role'");
  }
  return list;
}

Json tools_of(const Row& row) {
  auto it = row.fields.find("tools");
  if (it == row.fields.end() || !it->second) return nullptr;
  try {
    return Json::parse(*it->second);
  } catch (const Json::parse_error&) {
    row_error("tools", "not a JSON list of tools");
  }
}

std::string with_eos(const std::string& text, const std::string& eos) {
  return eos.empty() || ends_with(text, eos) ? text : text + eos;
}

// The ids of a rendered template (apply_chat_template(tokenize=True): no special tokens added).
std::vector<int64_t> chat_ids(const SftSettings& s, const std::string& text) { return s.tokenizer->encode(text); }

// A template without {% generation %} markers: each assistant message's bytes are what rendering
// messages[:i + 1] adds to messages[:i] rendered with the generation prompt. Both renders must be the start of
// the whole conversation's text `full` (the prefix property); a template that changes earlier turns once later
// ones exist (a system prompt before the last user turn, reasoning kept on the last turn only, an eos after
// the last message) fails it, and the row is refused naming the template and the message.
std::vector<jinja::GenerationSpan> prefix_spans(const SftSettings& s, const Json& messages, const Json& tools,
                                                const std::string& full) {
  std::vector<jinja::GenerationSpan> spans;
  Json before = Json::array();
  for (std::size_t i = 0; i < messages.size(); before.push_back(messages[i]), ++i) {
    if (messages[i]["role"] != "assistant") continue;
    Json through = before;
    through.push_back(messages[i]);
    const std::string prompt = s.chat->render(before, true, tools).text;
    const std::string turn = s.chat->render(through, false, tools).text;
    const char* broken = !starts_with(full, prompt) ? "messages[:i] with the generation prompt"
                         : !starts_with(full, turn) || turn.size() < prompt.size() ? "messages[:i + 1]"
                                                                                     : nullptr;
    if (broken)
      throw ConfigError("data.assistant_only_loss: the chat template " + s.chat->name() +
                        " has no {% generation %} markers, and rendering prefixes does not find the assistant's "
                        "tokens: for message " + std::to_string(i) + " (assistant), " + broken +
                        " does not render as the start of the whole conversation (the template changes earlier "
                        "turns when later ones follow); mark the assistant's turns with {% generation %} or set "
                        "assistant_only_loss: false");
    spans.push_back({prompt.size(), turn.size()});
  }
  return spans;
}

// transformers' return_assistant_tokens_mask over the generation spans, else the prefix renders' spans.
void apply_assistant_mask(const SftSettings& s, const jinja::RenderResult& r, const Json& messages, const Json& tools,
                          const std::vector<int64_t>& ids, std::vector<int64_t>& labels) {
  auto offsets = token_byte_offsets(*s.tokenizer, r.text, ids);
  if (!offsets)
    throw ConfigError("data.assistant_only_loss: the tokenizer's tokens, decoded one by one, do not spell the rendered "
                      "text, so their offsets are not known; assistant-only masks need a tokenizer whose tokens map to "
                      "bytes (bytes, byte-level BPE)");
  const std::vector<jinja::GenerationSpan> spans =
      s.chat->has_generation_markers() ? r.generation_spans : prefix_spans(s, messages, tools, r.text);
  const std::vector<int64_t> mask = assistant_token_mask(*offsets, spans);
  if (std::find(mask.begin(), mask.end(), 1) == mask.end())
    throw ConfigError("data.assistant_only_loss: an example has no assistant tokens (chat template " + s.chat->name() +
                      "); TRL refuses such examples too");
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (!mask[i]) labels[i] = -100;
}

Example finish(std::vector<int64_t> ids, std::vector<int64_t> labels, int64_t prompt_tokens, const SftSettings& s) {
  if (s.max_length > 0 && static_cast<int64_t>(ids.size()) > s.max_length) {
    ids.resize(static_cast<std::size_t>(s.max_length));
    labels.resize(static_cast<std::size_t>(s.max_length));
  }
  Example ex;
  ex.input_ids = std::move(ids);
  ex.labels = std::move(labels);
  const auto n = static_cast<int64_t>(ex.input_ids.size());
  ex.prompt_length = prompt_tokens >= 0 ? std::min(prompt_tokens, n) : n / 2;
  return ex;
}

Example language_modeling(const Row& row, const SftSettings& s) {
  std::vector<int64_t> ids =
      s.tokenizer->encode_for_model(with_eos(string_field(row, s.text_field), s.eos_token), nullptr, 0).input_ids;
  std::vector<int64_t> labels = ids;
  return finish(std::move(ids), std::move(labels), -1, s);
}

Example prompt_completion(const Row& row, const SftSettings& s) {
  const std::string& prompt = string_field(row, "prompt");
  const std::string completion = with_eos(string_field(row, "completion"), s.eos_token);
  const auto prompt_ids = s.tokenizer->encode_for_model(prompt, nullptr, 0).input_ids;
  std::vector<int64_t> ids = s.tokenizer->encode_for_model(prompt + completion, nullptr, 0).input_ids;
  std::vector<int64_t> labels = ids;
  const std::size_t cut = std::min(prompt_ids.size(), ids.size());
  if (s.completion_only_loss) std::fill(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(cut), -100);
  return finish(std::move(ids), std::move(labels), static_cast<int64_t>(cut), s);
}

Example conversational(const Row& row, const SftSettings& s) {
  const Json messages = message_list(row, "messages");
  const Json tools = tools_of(row);
  const jinja::RenderResult r = s.chat->render(messages, false, tools);
  std::vector<int64_t> ids = chat_ids(s, r.text);
  std::vector<int64_t> labels = ids;
  int64_t prompt_tokens = -1;
  if (s.assistant_only_loss) {
    apply_assistant_mask(s, r, messages, tools, ids, labels);
    prompt_tokens = std::find_if(labels.begin(), labels.end(), [](int64_t l) { return l != -100; }) - labels.begin();
  }
  return finish(std::move(ids), std::move(labels), prompt_tokens, s);
}

Example conversational_prompt_completion(const Row& row, const SftSettings& s) {
  const Json prompt = message_list(row, "prompt");
  const Json completion = message_list(row, "completion");
  Json all = prompt;
  for (const auto& m : completion) all.push_back(m);
  const Json tools = tools_of(row);
  const auto prompt_ids = chat_ids(s, s.chat->render(prompt, true, tools).text);
  const jinja::RenderResult r = s.chat->render(all, false, tools);
  std::vector<int64_t> ids = chat_ids(s, r.text);
  std::vector<int64_t> labels = ids;
  const std::size_t cut = std::min(prompt_ids.size(), ids.size());
  if (s.completion_only_loss) std::fill(labels.begin(), labels.begin() + static_cast<std::ptrdiff_t>(cut), -100);
  if (s.assistant_only_loss) apply_assistant_mask(s, r, all, tools, ids, labels);
  return finish(std::move(ids), std::move(labels), static_cast<int64_t>(cut), s);
}

bool is_string_column(const Row& row, const std::string& column) {
  auto s = row.is_string.find(column);
  return s == row.is_string.end() || s->second;
}

}  // namespace

std::string describe_sft_format(SftFormat format, const std::string& text_field) {
  switch (format) {
    case SftFormat::kPlain: return "language modeling (text_column, as run_clm: no EOS added)";
    case SftFormat::kLanguageModeling: return "language modeling (dataset_text_field '" + text_field + "', EOS appended)";
    case SftFormat::kPromptCompletion: return "prompt-completion (columns 'prompt', 'completion')";
    case SftFormat::kConversational: return "conversational (column 'messages')";
    case SftFormat::kConversationalPromptCompletion:
      return "conversational prompt-completion (columns 'prompt', 'completion' as message lists)";
  }
  return "?";
}

SftFormat detect_sft_format(const std::vector<Row>& rows, const std::string& dataset_text_field,
                            const std::string& text_column) {
  if (!dataset_text_field.empty()) return SftFormat::kLanguageModeling;
  for (const Row& row : rows) {
    if (!row.problem.empty()) continue;
    if (row.fields.count(text_column)) return SftFormat::kPlain;
    if (row.fields.count("messages")) return SftFormat::kConversational;
    if (row.fields.count("prompt") && row.fields.count("completion"))
      return is_string_column(row, "prompt") ? SftFormat::kPromptCompletion : SftFormat::kConversationalPromptCompletion;
    return SftFormat::kPlain;
  }
  return SftFormat::kPlain;
}

Example make_sft_example(const Row& row, SftFormat format, const SftSettings& settings) {
  switch (format) {
    case SftFormat::kLanguageModeling: return language_modeling(row, settings);
    case SftFormat::kPromptCompletion: return prompt_completion(row, settings);
    case SftFormat::kConversational: return conversational(row, settings);
    case SftFormat::kConversationalPromptCompletion: return conversational_prompt_completion(row, settings);
    case SftFormat::kPlain: break;
  }
  throw RuntimeFailure("make_sft_example: the plain format is the file source's own");
}

std::optional<std::vector<std::pair<std::size_t, std::size_t>>> token_byte_offsets(const Tokenizer& tokenizer,
                                                                                   const std::string& text,
                                                                                   const std::vector<int64_t>& ids) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  out.reserve(ids.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < ids.size();) {
    // A token alone, or (a character split over byte-level tokens, which decode alone to U+FFFD) up to four
    // together: each token of the group spans the group's bytes, as HF's offsets give each the character.
    std::size_t k = 1;
    for (; k <= 4 && i + k <= ids.size(); ++k) {
      const std::string piece = tokenizer.decode(std::vector<int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(i),
                                                                      ids.begin() + static_cast<std::ptrdiff_t>(i + k)));
      if ((k == 1 || !piece.empty()) && text.compare(at, piece.size(), piece) == 0) {
        for (std::size_t t = 0; t < k; ++t) out.emplace_back(at, at + piece.size());
        at += piece.size();
        break;
      }
    }
    if (k > 4 || i + k > ids.size()) return std::nullopt;
    i += k;
  }
  if (at != text.size()) return std::nullopt;
  return out;
}

std::vector<int64_t> assistant_token_mask(const std::vector<std::pair<std::size_t, std::size_t>>& offsets,
                                          const std::vector<jinja::GenerationSpan>& spans) {
  std::vector<int64_t> mask(offsets.size(), 0);
  // The token holding byte b (the first whose span ends past it; empty tokens hold nothing).
  auto token_at = [&](std::size_t b) -> std::optional<std::size_t> {
    for (std::size_t t = 0; t < offsets.size(); ++t)
      if (offsets[t].first <= b && b < offsets[t].second) return t;
    return std::nullopt;
  };
  for (const auto& span : spans) {
    if (span.end <= span.begin) continue;
    const auto first = token_at(span.begin);
    if (!first) continue;
    const auto last = token_at(span.end - 1);
    const std::size_t stop = last ? *last + 1 : offsets.size();
    for (std::size_t t = *first; t < stop; ++t) mask[t] = 1;
  }
  return mask;
}

}  // namespace hftrain
