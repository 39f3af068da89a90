// jinja2's parser, its expressions: one function per level of precedence (condexpr, or, and, not,
// compare, + -, ~, * / // %, **, unary), then primaries, subscripts and slices, calls, filters and tests.
// Filter and test names are checked here, as jinja2 checks them when it compiles.
#include "jinja/library.h"
#include "jinja/parser_impl.h"

namespace hftrain::jinja {

ExprPtr Parser::name_expr(const Token& t) const {
  auto e = node(Expr::Kind::Name, t);
  e->name = t.text;
  return e;
}

bool Parser::is_tuple_end(const std::vector<std::string>& extra) const {
  if (cur().type == Type::VariableEnd || cur().type == Type::BlockEnd || is_op(")")) return true;
  for (const auto& e : extra)
    if (is_name(e.c_str())) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra, bool explicit_parens) {
  const Token at = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(cur(), "Expected an expression, got '" + describe(cur()) + "'");
  }
  auto e = node(Expr::Kind::Tuple, at);
  e->args = std::move(items);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  if (!with_condexpr) return parse_or();
  const Token at = cur();
  ExprPtr expr = parse_or();
  while (skip_name("if")) {
    ExprPtr test = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
    auto e = node(Expr::Kind::CondExpr, at, std::move(test), std::move(expr));
    e->args.push_back(std::move(otherwise));
    expr = std::move(e);
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Token at = next();
    left = node(Expr::Kind::Or, at, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Token at = next();
    left = node(Expr::Kind::And, at, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    const Token at = next();
    return node(Expr::Kind::Not, at, parse_not());
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token at = cur();
  ExprPtr first = parse_math1();
  auto e = node(Expr::Kind::Compare, at, std::move(first));
  static const char* ops[] = {"==", "!=", "<", "<=", ">", ">="};
  while (true) {
    std::string op;
    for (const char* o : ops)
      if (is_op(o)) op = o;
    if (!op.empty()) {
      next();
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && peek().type == Type::Name && peek().text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    e->ops.push_back(op);
    e->args.push_back(parse_math1());
  }
  if (e->ops.empty()) return std::move(e->args[0]);
  return e;
}

ExprPtr Parser::binary(ExprPtr left, const Token& at, ExprPtr right) const {
  auto e = node(Expr::Kind::Binary, at, std::move(left), std::move(right));
  e->name = at.text;
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token at = next();
    left = binary(std::move(left), at, parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const Token at = cur();
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = node(Expr::Kind::Concat, at, std::move(first));
  while (skip_op("~")) e->args.push_back(parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token at = next();
    left = binary(std::move(left), at, parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token at = next();
    left = binary(std::move(left), at, parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const Token at = cur();
  ExprPtr e;
  if (skip_op("-")) e = node(Expr::Kind::Neg, at, parse_unary(false));
  else if (skip_op("+")) e = node(Expr::Kind::Pos, at, parse_unary(false));
  else e = parse_primary();
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token t = cur();
  if (t.type == Type::Name) {
    next();
    auto e = node(Expr::Kind::Const, t);
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False")
      e->value = Value(t.text == "true" || t.text == "True");
    else if (t.text == "none" || t.text == "None") e->value = Value::none();
    else return name_expr(t);
    return e;
  }
  if (t.type == Type::String) {
    std::string text;
    while (cur().type == Type::String) text += next().text;
    auto e = node(Expr::Kind::Const, t);
    e->value = Value(std::move(text));
    return e;
  }
  if (t.type == Type::Integer || t.type == Type::Float) {
    next();
    auto e = node(Expr::Kind::Const, t);
    e->value = t.type == Type::Integer ? Value(t.integer) : Value(t.number);
    return e;
  }
  if (skip_op("(")) {
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[") || is_op("{")) return parse_collection(is_op("{"));
  fail(t, "unexpected '" + describe(t) + "'");
}

ExprPtr Parser::parse_collection(bool dict) {
  const Token at = next();
  auto e = node(dict ? Expr::Kind::Dict : Expr::Kind::List, at);
  const char* close = dict ? "}" : "]";
  while (!is_op(close)) {
    if (!e->args.empty()) expect_op(",");
    if (is_op(close)) break;
    e->args.push_back(parse_expression(true));
    if (dict) {
      expect_op(":");
      e->args.push_back(parse_expression(true));
    }
  }
  expect_op(close);
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
    else if (is_op("(")) e = parse_call(std::move(e));
    else return e;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) e = parse_filter(std::move(e), false);
    else if (is_name("is")) e = parse_test(std::move(e));
    else if (is_op("(")) e = parse_call(std::move(e));
    else return e;
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token at = next();
  if (at.text == ".") {
    const Token attr = next();
    if (attr.type == Type::Name) {
      auto e = node(Expr::Kind::GetAttr, at, std::move(obj));
      e->name = attr.text;
      return e;
    }
    if (attr.type != Type::Integer) fail(attr, "expected name or number");
    auto index = node(Expr::Kind::Const, attr);
    index->value = Value(attr.integer);
    return node(Expr::Kind::GetItem, at, std::move(obj), std::move(index));
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.size() == 1) return node(Expr::Kind::GetItem, at, std::move(obj), std::move(args[0]));
  auto tuple = node(Expr::Kind::Tuple, at);
  tuple->args = std::move(args);
  return node(Expr::Kind::GetItem, at, std::move(obj), std::move(tuple));
}

ExprPtr Parser::parse_subscribed() {
  const Token at = cur();
  auto s = node(Expr::Kind::Slice, at);
  if (skip_op(":")) {
    s->args.push_back(nullptr);
  } else {
    ExprPtr e = parse_expression(true);
    if (!skip_op(":")) return e;
    s->args.push_back(std::move(e));
  }
  auto optional = [&]() -> ExprPtr { return is_op("]") || is_op(",") || is_op(":") ? nullptr : parse_expression(true); };
  s->args.push_back(optional());
  s->args.push_back(skip_op(":") ? optional() : nullptr);
  return s;
}

void Parser::parse_call_args(Expr& e) {
  const Token at = cur();
  expect_op("(");
  bool require_comma = false;
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail(cur(), "calls with *args or **kwargs are not supported in chat templates");
    if (cur().type == Type::Name && peek().type == Type::Operator && peek().text == "=") {
      const std::string key = next().text;
      next();
      e.kwargs.emplace_back(key, parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail(at, "invalid syntax for function call expression");
      e.args.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(Expr::Kind::Call, cur(), std::move(callee));
  parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_filter(ExprPtr input, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const Token t = cur();
    const std::string filter = expect_name();
    if (!find_filter(filter)) fail(t, "No filter named '" + filter + "'.");
    auto e = node(Expr::Kind::Filter, t);
    e->name = filter;
    e->args.push_back(std::move(input));
    if (is_op("(")) parse_call_args(*e);
    input = std::move(e);
  }
  return input;
}

ExprPtr Parser::parse_test(ExprPtr subject) {
  const Token at = next();
  const bool negated = skip_name("not");
  const Token t = cur();
  const std::string test = expect_name();
  if (!find_test(test)) fail(t, "No test named '" + test + "'.");
  auto e = node(Expr::Kind::Test, at, std::move(subject));
  e->name = test;
  const bool arg_follows = cur().type == Type::Name || cur().type == Type::String || cur().type == Type::Integer ||
                           cur().type == Type::Float || is_op("[") || is_op("{");
  if (is_op("(")) {
    parse_call_args(*e);
  } else if (arg_follows && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail(cur(), "You cannot chain multiple tests with is");
    e->args.push_back(parse_postfix(parse_primary()));
  }
  return negated ? node(Expr::Kind::Not, at, std::move(e)) : std::move(e);
}

}  // namespace hftrain::jinja
