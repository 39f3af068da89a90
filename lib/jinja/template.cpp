// Template::parse / render (see template.h): tokens, tree, then a Renderer over HF's globals and the
// caller's variables.
#include "jinja/template.h"

#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace hftrain::jinja {

Template Template::parse(const std::string& source, const std::string& name) {
  Template t;
  t.name_ = name;
  t.body_ = std::make_shared<const Body>(parse_template(tokenize(source, name), name));
  return t;
}

RenderResult Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) throw ConfigError("chat template " + name_ + ": the render context must be a JSON object");
  auto variables = std::make_shared<Scope>(make_global_scope());
  for (auto it = context.begin(); it != context.end(); ++it) variables->set(it.key(), from_json(it.value()));
  Renderer renderer(name_, std::make_shared<Scope>(variables));
  return renderer.run(*body_);
}

RenderResult Template::render_chat(const ChatTemplateInputs& inputs) const {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = inputs.messages;
  context["tools"] = inputs.tools;
  context["documents"] = inputs.documents;
  context["add_generation_prompt"] = inputs.add_generation_prompt;
  if (!inputs.variables.is_object() && !inputs.variables.is_null())
    throw ConfigError("chat template " + name_ + ": the template variables must be a JSON object");
  for (auto it = inputs.variables.begin(); inputs.variables.is_object() && it != inputs.variables.end(); ++it) {
    if (context.contains(it.key()))
      throw ConfigError("chat template " + name_ + ": the variable '" + it.key() +
                        "' is set by the renderer itself (messages, tools, documents, add_generation_prompt)");
    context[it.key()] = it.value();
  }
  return render(context);
}

}  // namespace hftrain::jinja
