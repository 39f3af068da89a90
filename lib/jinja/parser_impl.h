// The parser's state and its members, shared by parser.cpp (statements) and parse_expression.cpp
// (expressions); internal to lib/jinja.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/error.h"
#include "jinja/lexer.h"

namespace hftrain::jinja {

using Type = Token::Type;

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : tokens_(std::move(tokens)), name_(name) {}

  Body parse() { return subparse({}); }

 private:
  std::vector<Token> tokens_;
  const std::string& name_;
  size_t i_ = 0;
  std::vector<std::string> open_tags_;  // the statements being parsed, innermost last
  int loop_depth_ = 0;

  const Token& cur() const { return tokens_[i_]; }
  const Token& peek() const { return tokens_[std::min(i_ + 1, tokens_.size() - 1)]; }
  Token next() { return tokens_[i_ < tokens_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* op) const { return cur().type == Type::Operator && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Type::Name && cur().text == n; }
  bool skip_op(const char* op) { return is_op(op) ? (next(), true) : false; }
  bool skip_name(const char* n) { return is_name(n) ? (next(), true) : false; }

  [[noreturn]] void fail(const Token& at, const std::string& problem) const {
    throw TemplateError(name_, at.line, at.column, problem);
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Type::Eof: return "end of template";
      case Type::BlockEnd: return "end of statement block";
      case Type::VariableEnd: return "end of print statement";
      case Type::BlockBegin: return "begin of statement block";
      case Type::VariableBegin: return "begin of print statement";
      case Type::String: return "string";
      case Type::Integer: return "integer";
      case Type::Float: return "float";
      default: return t.text;
    }
  }

  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur(), std::string("expected token '") + op + "', got '" + describe(cur()) + "'");
    next();
  }
  void expect(Type type, const char* what) {
    if (cur().type != type) fail(cur(), std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Type::Name) fail(cur(), "expected token 'name', got '" + describe(cur()) + "'");
    return next().text;
  }

  ExprPtr node(Expr::Kind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }
  ExprPtr node(Expr::Kind kind, const Token& at, ExprPtr a, ExprPtr b = nullptr) const {
    auto e = node(kind, at);
    e->args.push_back(std::move(a));
    if (b) e->args.push_back(std::move(b));
    return e;
  }

  // statements (parser.cpp)
  static std::string join_tags(const std::vector<std::string>& tags);
  std::string looking_for(const std::vector<std::string>& end_tags) const;
  Body subparse(const std::vector<std::string>& end_tags);
  Body parse_statements(const std::vector<std::string>& end_tags, bool drop_needle);
  Stmt start(Stmt::Kind kind, const Token& at) const;
  void parse_statement(Body& out, const std::vector<std::string>& end_tags);
  Stmt parse_loop_control();
  Stmt parse_block(Stmt::Kind kind, const char* end_tag);
  void parse_print(Body& out);
  void check_target(const Expr& target, const Token& at) const;
  Stmt parse_for();
  Stmt parse_if();
  Stmt parse_if_rest(const Token& at);
  Stmt parse_set();
  Stmt parse_macro();
  Stmt parse_filter_block();
  Stmt parse_with();

  // expressions (parse_expression.cpp)
  ExprPtr name_expr(const Token& t) const;
  bool is_tuple_end(const std::vector<std::string>& extra) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(ExprPtr left, const Token& at, ExprPtr right) const;
  ExprPtr parse_concat();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_collection(bool dict);
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter(ExprPtr input, bool start_inline);
  ExprPtr parse_test(ExprPtr subject);
  ExprPtr parse_math1();
  ExprPtr parse_math2();
};

}  // namespace hftrain::jinja
