// Errors of the chat-template interpreter. A TemplateError is a ConfigError (exit 2) whose message names
// the template, the line and column and the problem; Problem is what the value operations throw before
// the evaluator knows where they happened (it adds the position).
#pragma once

#include <stdexcept>
#include <string>

#include "util/error.h"

namespace hftrain::jinja {

class TemplateError : public ConfigError {
 public:
  TemplateError(const std::string& template_name, int line, int column, const std::string& problem)
      : ConfigError("chat template " + template_name + ":" + std::to_string(line) + ":" + std::to_string(column) +
                    ": " + problem),
        template_name_(template_name), line_(line), column_(column), problem_(problem) {}
  const std::string& template_name() const { return template_name_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // The problem alone; for raise_exception(msg), msg verbatim.
  const std::string& problem() const { return problem_; }

 private:
  std::string template_name_;
  int line_;
  int column_;
  std::string problem_;
};

// A problem without a position yet (thrown by values, filters, tests and methods).
class Problem : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hftrain::jinja
