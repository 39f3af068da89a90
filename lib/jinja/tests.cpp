// jinja2's tests (`x is defined`, `x is divisibleby 3`, select('equalto', ...)), each as jinja2 3.1's
// function of the same name decides it.
#include <map>

#include "jinja/arguments.h"
#include "jinja/library.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

using K = Value::Kind;

bool no_args(const char* name, const CallArgs& args) {
  Arguments(std::string("test '") + name + "'", args, {});
  return true;
}

const Value& one_arg(const char* name, const CallArgs& args) {
  static thread_local Value held;
  held = Arguments(std::string("test '") + name + "'", args, {"other"}).get(0);
  return held;
}

bool is_list_like(const Value& v) { return v.is_list() && v.list_data().shape != Value::Shape::Generator; }

int64_t int_of(const Value& v, const char* test) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.kind() != K::Int && v.kind() != K::Bool) throw Problem(std::string("test '") + test + "' needs an integer, not '" + type_name(v) + "'");
  return v.as_int();
}

const std::map<std::string, TestFunction>& table() {
  static const std::map<std::string, TestFunction> tests = {
      {"defined", [](const Value& v, CallArgs& a) { return no_args("defined", a) && !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs& a) { return no_args("undefined", a) && v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs& a) { return no_args("none", a) && v.is_none(); }},
      {"string", [](const Value& v, CallArgs& a) { return no_args("string", a) && v.is_string(); }},
      {"number", [](const Value& v, CallArgs& a) { return no_args("number", a) && v.is_number(); }},
      {"integer", [](const Value& v, CallArgs& a) { return no_args("integer", a) && v.kind() == K::Int; }},
      {"float", [](const Value& v, CallArgs& a) { return no_args("float", a) && v.kind() == K::Float; }},
      {"boolean", [](const Value& v, CallArgs& a) { return no_args("boolean", a) && v.kind() == K::Bool; }},
      {"true", [](const Value& v, CallArgs& a) { return no_args("true", a) && v.kind() == K::Bool && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs& a) { return no_args("false", a) && v.kind() == K::Bool && !v.as_bool(); }},
      // len() and [] both work: str, list, tuple, range, dict, and jinja2's Undefined
      {"sequence", [](const Value& v, CallArgs& a) {
         return no_args("sequence", a) && (v.is_string() || v.is_dict() || v.is_undefined() ||
                                           (is_list_like(v) && v.list_data().shape != Value::Shape::View));
       }},
      {"iterable", [](const Value& v, CallArgs& a) {
         return no_args("iterable", a) && (v.is_string() || v.is_dict() || v.is_list() || v.is_undefined());
       }},
      {"mapping", [](const Value& v, CallArgs& a) { return no_args("mapping", a) && v.is_dict(); }},
      {"callable", [](const Value& v, CallArgs& a) { return no_args("callable", a) && (v.kind() == K::Callable || v.is_undefined()); }},
      {"equalto", [](const Value& v, CallArgs& a) { return equals(v, one_arg("equalto", a)); }},
      {"eq", [](const Value& v, CallArgs& a) { return equals(v, one_arg("eq", a)); }},
      {"==", [](const Value& v, CallArgs& a) { return equals(v, one_arg("==", a)); }},
      {"ne", [](const Value& v, CallArgs& a) { return !equals(v, one_arg("ne", a)); }},
      {"!=", [](const Value& v, CallArgs& a) { return !equals(v, one_arg("!=", a)); }},
      {"gt", [](const Value& v, CallArgs& a) { return compare(">", v, one_arg("gt", a)); }},
      {"greaterthan", [](const Value& v, CallArgs& a) { return compare(">", v, one_arg("greaterthan", a)); }},
      {">", [](const Value& v, CallArgs& a) { return compare(">", v, one_arg(">", a)); }},
      {"ge", [](const Value& v, CallArgs& a) { return compare(">=", v, one_arg("ge", a)); }},
      {">=", [](const Value& v, CallArgs& a) { return compare(">=", v, one_arg(">=", a)); }},
      {"lt", [](const Value& v, CallArgs& a) { return compare("<", v, one_arg("lt", a)); }},
      {"lessthan", [](const Value& v, CallArgs& a) { return compare("<", v, one_arg("lessthan", a)); }},
      {"<", [](const Value& v, CallArgs& a) { return compare("<", v, one_arg("<", a)); }},
      {"le", [](const Value& v, CallArgs& a) { return compare("<=", v, one_arg("le", a)); }},
      {"<=", [](const Value& v, CallArgs& a) { return compare("<=", v, one_arg("<=", a)); }},
      {"in", [](const Value& v, CallArgs& a) { return contains(one_arg("in", a), v); }},
      {"odd", [](const Value& v, CallArgs& a) { return no_args("odd", a) && (int_of(v, "odd") % 2 != 0); }},
      {"even", [](const Value& v, CallArgs& a) { return no_args("even", a) && (int_of(v, "even") % 2 == 0); }},
      {"divisibleby", [](const Value& v, CallArgs& a) {
         const int64_t n = int_of(one_arg("divisibleby", a), "divisibleby");
         if (n == 0) throw Problem("integer division or modulo by zero");
         return int_of(v, "divisibleby") % n == 0;
       }},
      {"lower", [](const Value& v, CallArgs& a) { return no_args("lower", a) && str_islower(to_str(v)); }},
      {"upper", [](const Value& v, CallArgs& a) { return no_args("upper", a) && str_isupper(to_str(v)); }},
      {"sameas", [](const Value& v, CallArgs& a) {
         const Value& o = one_arg("sameas", a);
         if (v.kind() != o.kind()) return false;
         if (v.is_none() || v.is_undefined()) return v.is_none();
         if (v.kind() == K::Bool) return v.as_bool() == o.as_bool();
         if (v.is_list()) return &v.list_data() == &o.list_data();
         if (v.is_dict() || v.kind() == K::Namespace) return v.dict_ptr() == o.dict_ptr();
         return false;
       }},
      {"escaped", [](const Value&, CallArgs& a) { return no_args("escaped", a) && false; }},
      {"filter", [](const Value& v, CallArgs& a) { return no_args("filter", a) && v.is_string() && find_filter(v.str()); }},
      {"test", [](const Value& v, CallArgs& a) { return no_args("test", a) && v.is_string() && find_test(v.str()); }},
  };
  return tests;
}

}  // namespace

const TestFunction* find_test(const std::string& name) {
  const auto& t = table();
  const auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

}  // namespace hftrain::jinja
