// hftrain's interpreter of HF chat templates: a template is parsed once and rendered many times, with
// HF's fixed environment (jinja2's ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks on,
// keep_trailing_newline off, loop controls, the {% generation %} tag, HF's tojson, raise_exception and
// strftime_now). Its output equals python3-jinja2's byte for byte (docs/chat.md lists what is covered
// and what is refused). Errors are TemplateError (a ConfigError) naming the template, line and column.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jinja/ast.h"
#include "jinja/error.h"

namespace hftrain::jinja {

// The bytes [begin, end) of the rendered text that a {% generation %} block produced (transformers'
// AssistantTracker: where a model's own turns are, for assistant-only loss masks).
struct GenerationSpan {
  size_t begin = 0;
  size_t end = 0;
};

struct RenderResult {
  std::string text;
  std::vector<GenerationSpan> generation_spans;
};

// What transformers' apply_chat_template passes to a template: messages, tools (null: none),
// documents (null: none), add_generation_prompt, and the rest by name (the tokenizer's special tokens
// such as bos_token / eos_token, and any template kwargs; a token left out is undefined, not none).
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  bool add_generation_prompt = false;
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
};

class Template {
 public:
  // `name` appears in every error (a file name, or e.g. "tokenizer_config.json chat_template").
  static Template parse(const std::string& source, const std::string& name);

  // Renders with `context` (a JSON object) as the template's variables.
  RenderResult render(const nlohmann::ordered_json& context) const;
  RenderResult render_chat(const ChatTemplateInputs& inputs) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace hftrain::jinja
