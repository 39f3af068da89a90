// The expressions of a template, evaluated as jinja2's compiled code evaluates them (see renderer.h).
#include "jinja/error.h"
#include "jinja/library.h"
#include "jinja/renderer.h"

namespace hftrain::jinja {

Value Renderer::eval(const Expr& e) {
  try {
    return eval_node(e);
  } catch (const Problem& p) {
    throw TemplateError(name_, e.line, e.column, p.what());
  }
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  for (const auto& [key, value] : e.kwargs) args.keywords.emplace_back(key, eval(*value));
  return args;
}

Value Renderer::eval_call(const Expr& e) {
  const Value callee = eval(*e.args[0]);
  CallArgs args = eval_args(e, 1);
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind() != Value::Kind::Callable) throw Problem("'" + type_name(callee) + "' object is not callable");
  return callee.callable().fn(*this, args);
}

Value Renderer::eval_filter(const Expr& e) {
  Value input;
  if (e.args[0]) {
    input = eval(*e.args[0]);
  } else {
    input = block_inputs_.back();
  }
  CallArgs args = eval_args(e, 1);
  return (*find_filter(e.name))(input, args);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.args[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1]);
    if (!compare(e.ops[i], left, right)) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Renderer::eval_collection(const Expr& e) {
  if (e.kind != Expr::Kind::Dict) {
    std::vector<Value> items;
    for (const auto& item : e.args) items.push_back(eval(*item));
    return Value::list(std::move(items), e.kind == Expr::Kind::Tuple ? Value::Shape::Tuple : Value::Shape::List);
  }
  Value d = Value::new_dict();
  for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
    Value key = eval(*e.args[i]);
    if (key.is_list() || key.is_dict()) throw Problem("unhashable type: '" + type_name(key) + "'");
    d.dict_data().set(key, eval(*e.args[i + 1]));
  }
  return d;
}

Value Renderer::eval_subscript(const Expr& e) {
  const Value obj = eval(*e.args[0]);
  const Expr& sub = *e.args[1];
  if (sub.kind != Expr::Kind::Slice) return get_item(obj, eval(sub));
  auto part = [&](size_t i) { return sub.args[i] ? eval(*sub.args[i]) : Value::none(); };
  return slice(obj, part(0), part(1), part(2));
}

Value Renderer::eval_node(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Const: return e.value;
    case Expr::Kind::Name: {
      const Value* v = scope_->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple:
    case Expr::Kind::Dict: return eval_collection(e);
    case Expr::Kind::GetAttr: return get_attr(eval(*e.args[0]), e.name);
    case Expr::Kind::GetItem: return eval_subscript(e);
    case Expr::Kind::Slice: throw Problem("a slice outside a subscript");
    case Expr::Kind::Call: return eval_call(e);
    case Expr::Kind::Filter: return eval_filter(e);
    case Expr::Kind::Test: {
      const Value subject = eval(*e.args[0]);
      CallArgs args = eval_args(e, 1);
      return Value((*find_test(e.name))(subject, args));
    }
    case Expr::Kind::Neg: return negate(eval(*e.args[0]), true);
    case Expr::Kind::Pos: return negate(eval(*e.args[0]), false);
    case Expr::Kind::Not: return Value(!truthy(eval(*e.args[0])));
    case Expr::Kind::Binary: {
      const Value left = eval(*e.args[0]);
      return binary_op(e.name, left, eval(*e.args[1]));
    }
    case Expr::Kind::And: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? eval(*e.args[1]) : left;
    }
    case Expr::Kind::Or: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? left : eval(*e.args[1]);
    }
    case Expr::Kind::Compare: return eval_compare(e);
    case Expr::Kind::Concat: {
      std::string out;
      for (const auto& part : e.args) out += to_str(eval(*part));
      return Value(std::move(out));
    }
    case Expr::Kind::CondExpr:
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

}  // namespace hftrain::jinja
