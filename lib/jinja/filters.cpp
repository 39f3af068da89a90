// jinja2's filters on single values (strings and numbers) and HF's tojson, and the table of every filter
// (the sequence filters are in sequence_filters.cpp). Each follows jinja2 3.1's function of the same name.
#include <cmath>
#include <cstdlib>
#include <map>

#include "jinja/arguments.h"
#include "jinja/library.h"
#include "jinja/sequence_filters.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

Value f_trim(const Value& v, CallArgs& args) {
  Arguments a("filter 'trim'", args, {"chars"});
  const std::string* chars = a.has_value(0) ? &string_argument(a.get(0), "trim's chars") : nullptr;
  return Value(strip(to_str(v), chars, true, true));
}

// HF's tojson: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False).
Value f_tojson(const Value& v, CallArgs& args) {
  Arguments a("filter 'tojson'", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = truthy(a.get_or(0, Value(false)));
  o.sort_keys = truthy(a.get_or(3, Value(false)));
  if (a.has_value(1)) {
    o.has_indent = true;
    o.indent = a.get(1).is_string() ? a.get(1).str() : std::string(std::max<int64_t>(0, int_argument(a.get(1), "indent")), ' ');
    o.item_separator = ",";
  }
  if (a.has_value(2)) {
    const auto parts = iterate(a.get(2));
    if (parts.size() != 2) throw Problem("tojson's separators must be (item_separator, key_separator)");
    o.item_separator = string_argument(parts[0], "separators' item separator");
    o.key_separator = string_argument(parts[1], "separators' key separator");
  }
  return Value(json_dumps(v, o));
}

Value f_length(const Value& v, CallArgs& args) {
  Arguments("filter 'length'", args, {});
  return Value(length(v));
}

Value f_upper(const Value& v, CallArgs& args) { return Arguments("filter 'upper'", args, {}), Value(upper(to_str(v))); }
Value f_lower(const Value& v, CallArgs& args) { return Arguments("filter 'lower'", args, {}), Value(lower(to_str(v))); }
Value f_capitalize(const Value& v, CallArgs& args) {
  return Arguments("filter 'capitalize'", args, {}), Value(capitalize(to_str(v)));
}

// jinja2's title: words begin after runs of whitespace, '-', '(', '{', '[' or '<'.
Value f_title(const Value& v, CallArgs& args) {
  Arguments("filter 'title'", args, {});
  std::string out;
  bool word_start = true;
  for (char32_t cp : decode_utf8(to_str(v))) {
    const bool separator = py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    append_utf8(out, separator ? cp : word_start ? to_upper(cp) : to_lower(cp));
    word_start = separator;
  }
  return Value(std::move(out));
}

Value f_default(const Value& v, CallArgs& args) {
  Arguments a("filter 'default'", args, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(a.get_or(1, Value(false))) && !truthy(v))) return a.get_or(0, Value(""));
  return v;
}

Value f_replace(const Value& v, CallArgs& args) {
  Arguments a("filter 'replace'", args, {"old", "new", "count"});
  return Value(replace(to_str(v), to_str(a.get(0)), to_str(a.get(1)), a.has_value(2) ? int_argument(a.get(2), "count") : -1));
}

Value f_string(const Value& v, CallArgs& args) { return Arguments("filter 'string'", args, {}), Value(to_str(v)); }
Value f_safe(const Value& v, CallArgs& args) { return Arguments("filter 'safe'", args, {}), Value(to_str(v)); }

// Python's float(str): surrounding whitespace, sign, decimal or exponent notation, inf / nan.
bool parse_float(const std::string& text, double& out) {
  const std::string s = strip(text, nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  const std::string l = lower(s);
  return l.find('x') == std::string::npos && (std::isfinite(out) || l.find("inf") != std::string::npos || l.find("nan") != std::string::npos);
}

Value f_int(const Value& v, CallArgs& args) {
  Arguments a("filter 'int'", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value(0));
  if (v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool) return Value(v.as_int());
  if (v.kind() == Value::Kind::Float) {
    if (!std::isfinite(v.as_float())) throw Problem("cannot convert float " + py_float_repr(v.as_float()) + " to integer");
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (!v.is_string()) return fallback;
  const int base = a.has(1) ? static_cast<int>(int_argument(a.get(1), "base")) : 10;
  const std::string s = strip(v.str(), nullptr, true, true);
  char* end = nullptr;
  const long long parsed = s.empty() ? 0 : std::strtoll(s.c_str(), &end, base);
  if (!s.empty() && end == s.c_str() + s.size() && s.find_first_of(" \t") == std::string::npos) return Value(static_cast<int64_t>(parsed));
  double d = 0;
  if (parse_float(s, d) && std::isfinite(d)) return Value(static_cast<int64_t>(d));
  return fallback;
}

Value f_float(const Value& v, CallArgs& args) {
  Arguments a("filter 'float'", args, {"default"});
  if (v.is_number()) return Value(v.as_float());
  double d = 0;
  if (v.is_string() && parse_float(v.str(), d)) return Value(d);
  return a.get_or(0, Value(0.0));
}

Value f_abs(const Value& v, CallArgs& args) {
  Arguments("filter 'abs'", args, {});
  if (!v.is_number()) throw Problem("bad operand type for abs(): '" + type_name(v) + "'");
  if (v.kind() == Value::Kind::Float) return Value(std::fabs(v.as_float()));
  return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

// Python's round(x, n) for a float: correctly rounded, ties to even (what printf's %.nf does with glibc).
double round_float(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
  return std::strtod(buf, nullptr);
}

Value f_round(const Value& v, CallArgs& args) {
  Arguments a("filter 'round'", args, {"precision", "method"});
  const int64_t precision = a.has(0) ? int_argument(a.get(0), "precision") : 0;
  const std::string method = a.has(1) ? string_argument(a.get(1), "method") : "common";
  if (method != "common" && method != "ceil" && method != "floor") throw Problem("method must be common, ceil or floor");
  if (!v.is_number()) throw Problem("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.kind() != Value::Kind::Float) return Value(v.as_int());
    return Value(round_float(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Value f_indent(const Value& v, CallArgs& args) {
  Arguments a("filter 'indent'", args, {"width", "first", "blank"});
  if (v.is_undefined()) fail_undefined(v);
  const Value width = a.get_or(0, Value(4));
  const std::string indention = width.is_string() ? width.str() : std::string(std::max<int64_t>(0, int_argument(width, "width")), ' ');
  const std::vector<std::string> lines = split_lines(to_str(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    const bool indent_line = i > 0 && (truthy(a.get_or(2, Value(false))) || !lines[i].empty());
    out += (indent_line ? indention : "") + lines[i];
  }
  if (truthy(a.get_or(1, Value(false)))) out = indention + out;
  return Value(std::move(out));
}

const std::map<std::string, FilterFunction>& table() {
  static const std::map<std::string, FilterFunction> filters = [] {
    std::map<std::string, FilterFunction> t = {
        {"trim", f_trim}, {"tojson", f_tojson}, {"length", f_length}, {"count", f_length},
        {"upper", f_upper}, {"lower", f_lower}, {"title", f_title}, {"capitalize", f_capitalize},
        {"default", f_default}, {"d", f_default}, {"replace", f_replace}, {"string", f_string},
        {"safe", f_safe}, {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round},
        {"indent", f_indent},
    };
    add_sequence_filters(t);
    return t;
  }();
  return filters;
}

}  // namespace

const FilterFunction* find_filter(const std::string& name) {
  const auto& t = table();
  const auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

}  // namespace hftrain::jinja
