// jinja2's parser, its statements (see parser.h): the template body, for, if / elif / else, set (also
// namespace attributes and {% set %} blocks), macro, filter, with, print, generation, break, continue.
#include "jinja/parser.h"

#include "jinja/parser_impl.h"

namespace hftrain::jinja {

std::string Parser::join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (size_t i = 0; i < tags.size(); ++i) out += (i ? " or '" : "'") + tags[i] + "'";
  return out;
}

std::string Parser::looking_for(const std::vector<std::string>& end_tags) const {
  if (end_tags.empty()) return "";
  return " Jinja was looking for the following tags: " + join_tags(end_tags) +
         ". The innermost block that needs to be closed is '" + open_tags_.back() + "'.";
}

Body Parser::subparse(const std::vector<std::string>& end_tags) {
  Body body;
  while (cur().type != Type::Eof) {
    const Token t = cur();
    if (t.type == Type::Data) {
      Stmt s;
      s.kind = Stmt::Kind::Text;
      s.line = t.line;
      s.column = t.column;
      s.text = t.text;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Type::VariableBegin) {
      next();
      Stmt s;
      s.kind = Stmt::Kind::Print;
      s.line = cur().line;
      s.column = cur().column;
      s.expr = parse_tuple(false, true, {}, false);
      expect(Type::VariableEnd, "end of print statement");
      body.push_back(std::move(s));
    } else {
      next();
      for (const auto& tag : end_tags)
        if (is_name(tag.c_str())) return body;
      parse_statement(body, end_tags);
      expect(Type::BlockEnd, "end of statement block");
    }
  }
  if (!end_tags.empty()) fail(cur(), "Unexpected end of template." + looking_for(end_tags));
  return body;
}

Body Parser::parse_statements(const std::vector<std::string>& end_tags, bool drop_needle) {
  skip_op(":");
  expect(Type::BlockEnd, "end of statement block");
  Body body = subparse(end_tags);
  if (drop_needle) next();
  return body;
}

Stmt Parser::start(Stmt::Kind kind, const Token& at) const {
  Stmt s;
  s.kind = kind;
  s.line = at.line;
  s.column = at.column;
  return s;
}

void Parser::parse_statement(Body& out, const std::vector<std::string>& end_tags) {
  const Token t = cur();
  if (t.type != Type::Name) fail(t, "tag name expected");
  static const char* refused[] = {"block", "extends", "include", "import", "from", "call", "autoescape"};
  for (const char* r : refused)
    if (t.text == r)
      fail(t, "the tag '" + t.text + "' is not supported in chat templates (a chat template is rendered alone)");
  open_tags_.push_back(t.text);
  if (t.text == "for") out.push_back(parse_for());
  else if (t.text == "if") out.push_back(parse_if());
  else if (t.text == "set") out.push_back(parse_set());
  else if (t.text == "macro") out.push_back(parse_macro());
  else if (t.text == "filter") out.push_back(parse_filter_block());
  else if (t.text == "with") out.push_back(parse_with());
  else if (t.text == "generation") out.push_back(parse_block(Stmt::Kind::Generation, "endgeneration"));
  else if (t.text == "print") parse_print(out);
  else if (t.text == "break" || t.text == "continue") out.push_back(parse_loop_control());
  else {
    open_tags_.pop_back();
    fail(t, "Encountered unknown tag '" + t.text + "'." + looking_for(end_tags));
  }
  open_tags_.pop_back();
}

Stmt Parser::parse_loop_control() {
  const Token t = next();
  if (loop_depth_ == 0) fail(t, "'" + t.text + "' outside of a loop");
  return start(t.text == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, t);
}

Stmt Parser::parse_block(Stmt::Kind kind, const char* end_tag) {
  Stmt s = start(kind, next());
  s.body = parse_statements({end_tag}, true);
  return s;
}

void Parser::parse_print(Body& out) {
  next();
  for (bool first = true; cur().type != Type::BlockEnd; first = false) {
    if (!first) expect_op(",");
    Stmt s = start(Stmt::Kind::Print, cur());
    s.expr = parse_expression(true);
    out.push_back(std::move(s));
  }
}

void Parser::check_target(const Expr& target, const Token& at) const {
  bool ok = target.kind == Expr::Kind::Name;
  if (target.kind == Expr::Kind::Tuple) {
    ok = true;
    for (const auto& item : target.args) ok = ok && item->kind == Expr::Kind::Name;
  }
  if (!ok) fail(at, "can't assign to this expression (a name or a tuple of names)");
}

Stmt Parser::parse_for() {
  Stmt s = start(Stmt::Kind::For, next());
  const Token target_at = cur();
  s.target = parse_tuple(true, true, {"in"}, false);
  check_target(*s.target, target_at);
  if (!skip_name("in")) fail(cur(), "expected token 'in', got '" + describe(cur()) + "'");
  s.expr = parse_tuple(false, false, {"recursive"}, false);
  if (skip_name("if")) s.loop_filter = parse_expression(true);
  if (is_name("recursive")) fail(cur(), "recursive loops are not supported in chat templates");
  ++loop_depth_;
  s.body = parse_statements({"endfor", "else"}, false);
  --loop_depth_;
  if (next().text == "else") s.else_body = parse_statements({"endfor"}, true);
  return s;
}

Stmt Parser::parse_if() {
  Stmt s = start(Stmt::Kind::If, next());
  s.expr = parse_tuple(false, false, {}, false);
  s.body = parse_statements({"elif", "else", "endif"}, false);
  const Token t = next();
  if (t.text == "elif") {
    Stmt elif = parse_if_rest(t);
    s.else_body.push_back(std::move(elif));
  } else if (t.text == "else") {
    s.else_body = parse_statements({"endif"}, true);
  }
  return s;
}

// An elif: the same as an if whose `if` token was `at`.
Stmt Parser::parse_if_rest(const Token& at) {
  --i_;  // step back onto `elif` so that parse_if consumes it as its keyword
  Stmt s = parse_if();
  s.line = at.line;
  s.column = at.column;
  return s;
}

Stmt Parser::parse_set() {
  const Token at = next();
  Stmt s = start(Stmt::Kind::Set, at);
  if (cur().type == Type::Name && peek().type == Type::Operator && peek().text == ".") {
    const Token ns = next();
    next();
    auto target = node(Expr::Kind::GetAttr, ns, name_expr(ns));
    target->name = expect_name();
    s.target = std::move(target);
  } else {
    const Token target_at = cur();
    s.target = parse_tuple(true, true, {}, false);
    check_target(*s.target, target_at);
  }
  if (skip_op("=")) {
    s.expr = parse_tuple(false, true, {}, false);
    return s;
  }
  if (s.target->kind != Expr::Kind::Name) fail(at, "a {% set %} block assigns to one name");
  s.kind = Stmt::Kind::SetBlock;
  if (is_op("|")) s.expr = parse_filter(nullptr, false);
  s.body = parse_statements({"endset"}, true);
  return s;
}

Stmt Parser::parse_macro() {
  Stmt s = start(Stmt::Kind::Macro, next());
  s.name = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    if (!s.params.empty()) expect_op(",");
    s.params.push_back(expect_name());
    if (skip_op("=")) {
      s.defaults.push_back(parse_expression(true));
    } else if (!s.defaults.empty()) {
      fail(cur(), "non-default argument follows default argument");
    }
  }
  expect_op(")");
  const int outer_loops = loop_depth_;
  loop_depth_ = 0;
  s.body = parse_statements({"endmacro"}, true);
  loop_depth_ = outer_loops;
  return s;
}

Stmt Parser::parse_filter_block() {
  Stmt s = start(Stmt::Kind::FilterBlock, next());
  s.expr = parse_filter(nullptr, true);
  s.body = parse_statements({"endfilter"}, true);
  return s;
}

Stmt Parser::parse_with() {
  Stmt s = start(Stmt::Kind::With, next());
  while (cur().type != Type::BlockEnd) {
    if (!s.with_targets.empty()) expect_op(",");
    const Token t = cur();
    s.with_targets.push_back(name_expr(t));
    expect_name();
    expect_op("=");
    s.with_values.push_back(parse_expression(true));
  }
  s.body = parse_statements({"endwith"}, true);
  return s;
}

Body parse_template(std::vector<Token> tokens, const std::string& template_name) {
  return Parser(std::move(tokens), template_name).parse();
}

}  // namespace hftrain::jinja
