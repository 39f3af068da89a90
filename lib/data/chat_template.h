// A model's chat template as transformers' apply_chat_template finds and renders it: from the tokenizer's
// directory (chat_template.jinja, else tokenizer_config.json's `chat_template`, a string or a list of
// {name, template}; chat_template.json of older processors) or a file the spec names (data.chat_template,
// TRL's chat_template_path: a .jinja file or a tokenizer directory), rendered through lib/jinja with HF's
// variables (messages, tools, add_generation_prompt and the special tokens of tokenizer_config.json /
// special_tokens_map.json). Free of LibTorch.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "jinja/template.h"

namespace hftrain {

struct ChatTemplateSource {
  std::string tokenizer;  // data.tokenizer: a tokenizer file or directory ("bytes": none)
  std::string file;       // data.chat_template: a template file or tokenizer directory; "" = the tokenizer's
  std::string name;       // data.chat_template_name: which of a named list; "" = "default"
  std::string eos_token;  // data.eos_token: replaces the tokenizer's eos_token variable; "" = keep
  std::string pad_token;  // data.pad_token: likewise pad_token
};

class ChatTemplate {
 public:
  // The template `source` names, or nullopt when there is none (no file given and the tokenizer has none).
  // ConfigError names the file and key for an unreadable or malformed file, a named list without the name
  // asked for, and (TemplateError) a template that does not parse.
  static std::optional<ChatTemplate> load(const ChatTemplateSource& source);
  // A template from its text (tests); `variables` are the special tokens.
  ChatTemplate(const std::string& text, const std::string& name, nlohmann::ordered_json variables);

  // apply_chat_template(messages, tools=tools, add_generation_prompt=...): the text and the byte spans of
  // its {% generation %} blocks. `tools` null = none.
  jinja::RenderResult render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                             const nlohmann::ordered_json& tools = nullptr) const;
  const std::string& name() const { return template_.name(); }
  const std::string& text() const { return text_; }
  // Whether the template has {% generation %} blocks (transformers' test for return_assistant_tokens_mask).
  bool has_generation_markers() const { return has_generation_; }
  // The special token `key` ("eos_token") as the template sees it, or "" when it is not set.
  std::string special_token(const std::string& key) const;

 private:
  std::string text_;
  jinja::Template template_;
  nlohmann::ordered_json variables_;
  bool has_generation_ = false;
};

}  // namespace hftrain
