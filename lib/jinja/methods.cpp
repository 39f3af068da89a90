// The methods templates call on values (see library.h): str's (startswith, split, strip, replace,
// format, ...), dict's items / keys / values / get / copy, list's index / count. Methods that change a
// list or dict are refused as jinja2's ImmutableSandboxedEnvironment refuses them.
#include <algorithm>

#include "jinja/arguments.h"
#include "jinja/library.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

using Method = Value (*)(const Value& self, const Arguments& a);

struct MethodSpec {
  const char* name;
  std::vector<std::string> params;
  Method fn;
};

bool prefix_test(const Value& self, const Value& arg, bool start) {
  std::vector<Value> options = arg.is_list() ? arg.list_data().items : std::vector<Value>{arg};
  for (const Value& o : options) {
    const std::string& p = string_argument(o, start ? "startswith's argument" : "endswith's argument");
    const std::string& s = self.str();
    if (start ? s.compare(0, p.size(), p) == 0 : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
      return true;
  }
  return false;
}

const std::string* optional_string(const Arguments& a, size_t i, const char* what) {
  return a.has_value(i) ? &string_argument(a.get(i), what) : nullptr;
}

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out(parts.begin(), parts.end());
  return Value::list(std::move(out));
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  const auto cps = decode_utf8(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

// str.format with automatic or numbered or named fields and !s / !r conversions (no format specs).
Value format(const Value& self, const CallArgs& args) {
  const std::string& f = self.str();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}', ++i;
    } else if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{', ++i;
    } else if (f[i] == '{') {
      const size_t close = f.find('}', i);
      if (close == std::string::npos) throw Problem("Single '{' encountered in format string");
      std::string field = f.substr(i + 1, close - i - 1);
      bool as_repr = false;
      if (field.size() >= 2 && field[field.size() - 2] == '!') {
        as_repr = field.back() == 'r';
        field.resize(field.size() - 2);
      }
      if (field.find(':') != std::string::npos) throw Problem("format specs in str.format are not supported in chat templates");
      Value v;
      if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
        const size_t index = field.empty() ? auto_index++ : std::stoul(field);
        if (index >= args.positional.size()) throw Problem("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
        v = args.positional[index];
      } else {
        auto it = std::find_if(args.keywords.begin(), args.keywords.end(), [&](const auto& kw) { return kw.first == field; });
        if (it == args.keywords.end()) throw Problem("'" + field + "'");
        v = it->second;
      }
      out += as_repr ? repr(v) : to_str(v);
      i = close;
    } else if (f[i] == '}') {
      throw Problem("Single '}' encountered in format string");
    } else {
      out += f[i];
    }
  }
  return Value(std::move(out));
}

const std::vector<MethodSpec>& string_methods() {
  static const std::vector<MethodSpec> methods = {
      {"startswith", {"prefix"}, [](const Value& s, const Arguments& a) { return Value(prefix_test(s, a.get(0), true)); }},
      {"endswith", {"suffix"}, [](const Value& s, const Arguments& a) { return Value(prefix_test(s, a.get(0), false)); }},
      {"split", {"sep", "maxsplit"}, [](const Value& s, const Arguments& a) {
         const std::string* sep = optional_string(a, 0, "split's separator");
         if (sep && sep->empty()) throw Problem("empty separator");
         return strings(split(s.str(), sep, a.has(1) ? int_argument(a.get(1), "maxsplit") : -1));
       }},
      {"strip", {"chars"}, [](const Value& s, const Arguments& a) { return Value(strip(s.str(), optional_string(a, 0, "strip's chars"), true, true)); }},
      {"lstrip", {"chars"}, [](const Value& s, const Arguments& a) { return Value(strip(s.str(), optional_string(a, 0, "lstrip's chars"), true, false)); }},
      {"rstrip", {"chars"}, [](const Value& s, const Arguments& a) { return Value(strip(s.str(), optional_string(a, 0, "rstrip's chars"), false, true)); }},
      {"replace", {"old", "new", "count"}, [](const Value& s, const Arguments& a) {
         return Value(replace(s.str(), string_argument(a.get(0), "replace's old"), string_argument(a.get(1), "replace's new"),
                              a.has(2) ? int_argument(a.get(2), "replace's count") : -1));
       }},
      {"upper", {}, [](const Value& s, const Arguments&) { return Value(upper(s.str())); }},
      {"lower", {}, [](const Value& s, const Arguments&) { return Value(lower(s.str())); }},
      {"title", {}, [](const Value& s, const Arguments&) { return Value(py_title(s.str())); }},
      {"capitalize", {}, [](const Value& s, const Arguments&) { return Value(capitalize(s.str())); }},
      {"find", {"sub"}, [](const Value& s, const Arguments& a) {
         const size_t at = s.str().find(string_argument(a.get(0), "find's argument"));
         return Value(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(code_point_count(s.str().substr(0, at))));
       }},
      {"count", {"sub"}, [](const Value& s, const Arguments& a) {
         const std::string& sub = string_argument(a.get(0), "count's argument");
         if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(s.str()) + 1));
         int64_t n = 0;
         for (size_t at = s.str().find(sub); at != std::string::npos; at = s.str().find(sub, at + sub.size())) ++n;
         return Value(n);
       }},
      {"join", {"iterable"}, [](const Value& s, const Arguments& a) {
         std::string out;
         const auto items = iterate(a.get(0));
         for (size_t i = 0; i < items.size(); ++i) {
           if (!items[i].is_string())
             throw Problem("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) + " found");
           out += (i ? s.str() : "") + items[i].str();
         }
         return Value(std::move(out));
       }},
      {"splitlines", {}, [](const Value& s, const Arguments&) { return strings(split_lines(s.str())); }},
      {"isdigit", {}, [](const Value& s, const Arguments&) { return Value(all_chars(s.str(), py_isdigit)); }},
      {"isalpha", {}, [](const Value& s, const Arguments&) { return Value(all_chars(s.str(), py_isalpha)); }},
      {"isspace", {}, [](const Value& s, const Arguments&) { return Value(all_chars(s.str(), py_isspace)); }},
      {"islower", {}, [](const Value& s, const Arguments&) { return Value(str_islower(s.str())); }},
      {"isupper", {}, [](const Value& s, const Arguments&) { return Value(str_isupper(s.str())); }},
  };
  return methods;
}

Value dict_view(const Value& d, const char* which) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict_data().entries) {
    if (which[0] == 'i') out.push_back(Value::tuple({k, v}));
    else out.push_back(which[0] == 'k' ? k : v);
  }
  return Value::list(std::move(out), Value::Shape::View, std::string("dict_") + which);
}

const std::vector<MethodSpec>& dict_methods() {
  static const std::vector<MethodSpec> methods = {
      {"items", {}, [](const Value& d, const Arguments&) { return dict_view(d, "items"); }},
      {"keys", {}, [](const Value& d, const Arguments&) { return dict_view(d, "keys"); }},
      {"values", {}, [](const Value& d, const Arguments&) { return dict_view(d, "values"); }},
      {"get", {"key", "default"}, [](const Value& d, const Arguments& a) {
         const Value* v = d.dict_data().find(a.get(0));
         return v ? *v : a.get_or(1, Value::none());
       }},
      {"copy", {}, [](const Value& d, const Arguments&) { return Value::dict(std::make_shared<DictData>(d.dict_data())); }},
  };
  return methods;
}

const std::vector<MethodSpec>& list_methods() {
  static const std::vector<MethodSpec> methods = {
      {"index", {"value"}, [](const Value& l, const Arguments& a) {
         const auto& items = l.list_data().items;
         for (size_t i = 0; i < items.size(); ++i)
           if (equals(items[i], a.get(0))) return Value(static_cast<int64_t>(i));
         throw Problem(repr(a.get(0)) + " is not in list");
       }},
      {"count", {"value"}, [](const Value& l, const Arguments& a) {
         const auto& items = l.list_data().items;
         return Value(static_cast<int64_t>(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, a.get(0)); })));
       }},
  };
  return methods;
}

bool bind(const Value& obj, const std::string& name, const std::vector<MethodSpec>& methods, Value& out) {
  for (const MethodSpec& m : methods) {
    if (name != m.name) continue;
    const MethodSpec* spec = &m;
    const std::string what = type_name(obj) + "." + name + "()";
    if (name == "format") return false;
    out = Value::function(what, [obj, spec, what](Renderer&, CallArgs& args) {
      return spec->fn(obj, Arguments(what, args, spec->params));
    });
    return true;
  }
  return false;
}

bool refuse(const Value& obj, const std::string& name, std::initializer_list<const char*> mutating, Value& out) {
  for (const char* m : mutating)
    if (name == m) {
      out = Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
      return true;
    }
  return false;
}

}  // namespace

bool bind_method(const Value& obj, const std::string& name, Value& out) {
  if (obj.is_string()) {
    if (name == "format") {
      out = Value::function("str.format()", [obj](Renderer&, CallArgs& args) { return format(obj, args); });
      return true;
    }
    return bind(obj, name, string_methods(), out);
  }
  if (obj.is_dict())
    return bind(obj, name, dict_methods(), out) ||
           refuse(obj, name, {"pop", "popitem", "setdefault", "update", "clear"}, out);
  if (obj.is_list() && (obj.list_data().shape == Value::Shape::List || obj.list_data().shape == Value::Shape::Tuple))
    return bind(obj, name, list_methods(), out) ||
           (obj.list_data().shape == Value::Shape::List &&
            refuse(obj, name, {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"}, out));
  return false;
}

}  // namespace hftrain::jinja
