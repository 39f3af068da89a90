// Splits a chat template into tokens as jinja2's lexer does with HF's settings: newlines normalised and
// one trailing newline dropped (keep_trailing_newline off), trim_blocks and lstrip_blocks on, the
// whitespace control signs {%- -%} {{- -}} {#- -#} and {%+ +%}, comments dropped, {% raw %} kept as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hftrain::jinja {

struct Token {
  enum class Type { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };
  Type type = Type::Eof;
  std::string text;  // data, a name, a string's decoded value, an operator
  int64_t integer = 0;
  double number = 0;
  int line = 1;
  int column = 1;
};

// Throws TemplateError (naming `template_name`, line and column) on text the lexer cannot read.
std::vector<Token> tokenize(const std::string& source, const std::string& template_name);

}  // namespace hftrain::jinja
