// Builds the syntax tree from the tokens as jinja2's parser does (precedence, tuples, filters and tests,
// the statements HF's environment has: for, if, set, macro, filter, with, print, generation, break,
// continue). Filter and test names are checked here, as jinja2 checks them when it compiles.
#pragma once

#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace hftrain::jinja {

// Throws TemplateError naming the template, the line and column, and the problem.
Body parse_template(std::vector<Token> tokens, const std::string& template_name);

}  // namespace hftrain::jinja
