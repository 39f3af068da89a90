// The evaluator behind Template::render (internal to lib/jinja): scopes as jinja2 frames them (each
// loop iteration and macro call its own, `if` none), output with captures (macros, {% set %} blocks,
// {% filter %}), generation spans, and expression evaluation (renderer.cpp: statements,
// expressions.cpp: expressions, globals.cpp: the globals of HF's environment).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/template.h"
#include "jinja/value.h"

namespace hftrain::jinja {

struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope = nullptr) : parent(std::move(parent_scope)) {}
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get())
      for (const auto& [k, v] : s->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars)
      if (k == name) {
        v = std::move(value);
        return;
      }
    vars.emplace_back(name, std::move(value));
  }
};

// range, namespace, dict, raise_exception, strftime_now.
std::shared_ptr<Scope> make_global_scope();

class Renderer {
 public:
  Renderer(const std::string& template_name, std::shared_ptr<Scope> scope)
      : name_(template_name), scope_(std::move(scope)) {}

  RenderResult run(const Body& body);
  Value call_macro(const Stmt& macro, const std::shared_ptr<Scope>& closure, CallArgs& args);

 private:
  enum class Flow { Normal, Break, Continue };
  struct ScopeGuard {
    Renderer& r;
    std::shared_ptr<Scope> saved;
    ~ScopeGuard() { r.scope_ = saved; }
  };

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_statement(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void exec_with(const Stmt& s);
  void define_macro(const Stmt& s);
  void generation(const Stmt& s);
  void assign(const Expr& target, const Value& value);
  std::string capture(const Body& body);
  Value apply_block_filter(const Expr& chain, Value input);
  std::vector<Value> loop_items(const Stmt& s);
  Value loop_object(const std::vector<Value>& items, size_t i);

  Value eval(const Expr& e);
  Value eval_node(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_collection(const Expr& e);
  Value eval_subscript(const Expr& e);
  Value eval_filter(const Expr& e);
  Value eval_compare(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);

  const std::string& name_;
  std::shared_ptr<Scope> scope_;
  std::string top_;
  std::string* out_ = &top_;
  std::vector<GenerationSpan> spans_;
  std::vector<Value> block_inputs_;
};

}  // namespace hftrain::jinja
