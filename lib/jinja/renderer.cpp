// The statements of a template, rendered as jinja2's compiled code runs them (see renderer.h).
#include "jinja/renderer.h"

#include "jinja/error.h"
#include "jinja/library.h"

namespace hftrain::jinja {

RenderResult Renderer::run(const Body& body) {
  exec(body);
  return RenderResult{std::move(top_), std::move(spans_)};
}

Renderer::Flow Renderer::exec(const Body& body) {
  for (const Stmt& s : body) {
    const Flow flow = exec(s);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  try {
    return exec_statement(s);
  } catch (const Problem& p) {
    throw TemplateError(name_, s.line, s.column, p.what());
  }
}

Renderer::Flow Renderer::exec_statement(const Stmt& s) {
  switch (s.kind) {
    case Stmt::Kind::Text: *out_ += s.text; break;
    case Stmt::Kind::Print: *out_ += to_str(eval(*s.expr)); break;
    case Stmt::Kind::If: return truthy(eval(*s.expr)) ? exec(s.body) : exec(s.else_body);
    case Stmt::Kind::For: return exec_for(s);
    case Stmt::Kind::Set: assign(*s.target, eval(*s.expr)); break;
    case Stmt::Kind::SetBlock: {
      Value text(capture(s.body));
      assign(*s.target, s.expr ? apply_block_filter(*s.expr, std::move(text)) : text);
      break;
    }
    case Stmt::Kind::FilterBlock: *out_ += to_str(apply_block_filter(*s.expr, Value(capture(s.body)))); break;
    case Stmt::Kind::Macro: define_macro(s); break;
    case Stmt::Kind::With: exec_with(s); break;
    case Stmt::Kind::Generation: generation(s); break;
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

std::string Renderer::capture(const Body& body) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Value Renderer::apply_block_filter(const Expr& chain, Value input) {
  block_inputs_.push_back(std::move(input));
  try {
    Value out = eval(chain);
    block_inputs_.pop_back();
    return out;
  } catch (...) {
    block_inputs_.pop_back();
    throw;
  }
}

// transformers' AssistantTracker: the span starts at the length of the output already yielded (the
// template's own output, not a macro's or a {% set %} block's), and is as long as the block's text.
void Renderer::generation(const Stmt& s) {
  const std::string text = capture(s.body);
  spans_.push_back(GenerationSpan{top_.size(), top_.size() + text.size()});
  *out_ += text;
}

void Renderer::assign(const Expr& target, const Value& value) {
  if (target.kind == Expr::Kind::Name) {
    scope_->set(target.name, value);
  } else if (target.kind == Expr::Kind::GetAttr) {
    const std::string& ns_name = target.args[0]->name;
    const Value* ns = scope_->find(ns_name);
    if (!ns || ns->kind() != Value::Kind::Namespace) throw Problem("cannot assign attribute on non-namespace object");
    ns->dict_data().set(Value(target.name), value);
  } else {
    if (!value.is_string() && !value.is_list() && !value.is_dict() && !value.is_undefined())
      throw Problem("cannot unpack non-iterable " + type_name(value) + " object");
    const auto items = iterate(value);
    const size_t want = target.args.size();
    if (items.size() > want) throw Problem("too many values to unpack (expected " + std::to_string(want) + ")");
    if (items.size() < want)
      throw Problem("not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < want; ++i) scope_->set(target.args[i]->name, items[i]);
  }
}

std::vector<Value> Renderer::loop_items(const Stmt& s) {
  const Value iterable = eval(*s.expr);
  std::vector<Value> items = iterate(iterable);
  if (!s.loop_filter) return items;
  std::vector<Value> kept;
  ScopeGuard guard{*this, scope_};
  for (const Value& item : items) {
    scope_ = std::make_shared<Scope>(guard.saved);
    assign(*s.target, item);
    if (truthy(eval(*s.loop_filter))) kept.push_back(item);
  }
  return kept;
}

Value Renderer::loop_object(const std::vector<Value>& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  auto d = std::make_shared<DictData>();
  auto put = [&](const char* key, Value v) { d->entries.emplace_back(Value(key), std::move(v)); };
  put("index", Value(k + 1));
  put("index0", Value(k));
  put("revindex", Value(n - k));
  put("revindex0", Value(n - k - 1));
  put("first", Value(k == 0));
  put("last", Value(k == n - 1));
  put("length", Value(n));
  put("depth", Value(1));
  put("depth0", Value(0));
  if (k > 0) put("previtem", items[i - 1]);
  if (k < n - 1) put("nextitem", items[i + 1]);
  put("cycle", Value::function("loop.cycle", [k](Renderer&, CallArgs& a) {
        if (a.positional.empty()) throw Problem("no items for cycling given");
        return a.positional[static_cast<size_t>(k) % a.positional.size()];
      }));
  return Value::dict(std::move(d));
}

Renderer::Flow Renderer::exec_for(const Stmt& s) {
  const std::vector<Value> items = loop_items(s);
  if (items.empty()) return exec(s.else_body);
  ScopeGuard guard{*this, scope_};
  for (size_t i = 0; i < items.size(); ++i) {
    scope_ = std::make_shared<Scope>(guard.saved);
    assign(*s.target, items[i]);
    scope_->set("loop", loop_object(items, i));
    if (exec(s.body) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Renderer::exec_with(const Stmt& s) {
  std::vector<Value> values;
  for (const auto& v : s.with_values) values.push_back(eval(*v));
  ScopeGuard guard{*this, scope_};
  scope_ = std::make_shared<Scope>(guard.saved);
  for (size_t i = 0; i < values.size(); ++i) scope_->set(s.with_targets[i]->name, values[i]);
  exec(s.body);
}

void Renderer::define_macro(const Stmt& s) {
  const Stmt* macro = &s;
  std::weak_ptr<Scope> closure = scope_;
  scope_->set(s.name, Value::function(s.name, [macro, closure](Renderer& r, CallArgs& args) {
                const auto scope = closure.lock();
                if (!scope) throw Problem("macro '" + macro->name + "' called after the block that defined it ended");
                return r.call_macro(*macro, scope, args);
              }));
}

Value Renderer::call_macro(const Stmt& macro, const std::shared_ptr<Scope>& closure, CallArgs& args) {
  const size_t n = macro.params.size();
  if (args.positional.size() > n)
    throw Problem("macro '" + macro.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  std::vector<bool> given(n, false);
  auto scope = std::make_shared<Scope>(closure);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    scope->set(macro.params[i], args.positional[i]);
    given[i] = true;
  }
  for (const auto& [key, value] : args.keywords) {
    size_t i = 0;
    while (i < n && macro.params[i] != key) ++i;
    if (i == n) throw Problem("macro '" + macro.name + "' takes no keyword argument '" + key + "'");
    if (given[i]) throw Problem("macro '" + macro.name + "' got multiple values for argument '" + key + "'");
    scope->set(key, value);
    given[i] = true;
  }
  ScopeGuard guard{*this, scope_};
  scope_ = scope;
  const size_t first_default = n - macro.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    scope->set(macro.params[i], i >= first_default ? eval(*macro.defaults[i - first_default])
                                                  : Value::undefined("parameter '" + macro.params[i] + "' was not provided"));
  }
  return Value(capture(macro.body));
}

}  // namespace hftrain::jinja
