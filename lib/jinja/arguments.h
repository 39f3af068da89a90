// Binds a call's arguments to a Python-style parameter list (positional, then by keyword), for the
// filters, tests, methods and globals; a missing one is absent, an extra or unknown one a Problem.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jinja/error.h"
#include "jinja/value.h"

namespace hftrain::jinja {

class Arguments {
 public:
  // `what` names the callee in errors ("filter 'join'"); with `varargs`, positional arguments past the
  // named parameters are kept in rest() instead of refused.
  Arguments(const std::string& what, const CallArgs& args, std::vector<std::string> names, bool varargs = false)
      : values_(names.size()), given_(names.size(), false) {
    size_t i = 0;
    for (; i < args.positional.size() && i < names.size(); ++i) {
      values_[i] = args.positional[i];
      given_[i] = true;
    }
    for (; i < args.positional.size(); ++i) {
      if (!varargs)
        throw Problem(what + " takes at most " + std::to_string(names.size()) + " argument(s), " +
                      std::to_string(args.positional.size()) + " given");
      rest_.push_back(args.positional[i]);
    }
    for (const auto& [key, value] : args.keywords) {
      size_t k = 0;
      while (k < names.size() && names[k] != key) ++k;
      if (k == names.size()) throw Problem(what + " got an unexpected keyword argument '" + key + "'");
      if (given_[k]) throw Problem(what + " got multiple values for argument '" + key + "'");
      values_[k] = value;
      given_[k] = true;
    }
  }

  bool has(size_t i) const { return given_[i]; }
  bool has_value(size_t i) const { return given_[i] && !values_[i].is_none(); }  // given and not None
  const Value& get(size_t i) const { return values_[i]; }
  Value get_or(size_t i, Value fallback) const { return given_[i] ? values_[i] : std::move(fallback); }
  const std::vector<Value>& rest() const { return rest_; }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
  std::vector<Value> rest_;
};

// The value as an int for a parameter that takes one (bools count, as in Python).
inline int64_t int_argument(const Value& v, const std::string& what) {
  if (v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool) return v.as_int();
  throw Problem(what + " must be an integer, not '" + type_name(v) + "'");
}

inline const std::string& string_argument(const Value& v, const std::string& what) {
  if (!v.is_string()) throw Problem(what + " must be a string, not '" + type_name(v) + "'");
  return v.str();
}

}  // namespace hftrain::jinja
