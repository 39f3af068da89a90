// Python's behaviour of the template values (see value.h).
#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/error.h"
#include "jinja/text.h"

namespace hftrain::jinja {

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.s_ = std::move(hint);
  v.unsafe_ = unsafe;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::list(std::vector<Value> items, Shape shape, std::string view_name) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->shape = shape;
  v.list_->view_name = std::move(view_name);
  return v;
}

Value Value::dict(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::move(data);
  return v;
}

Value Value::new_dict() { return dict(std::make_shared<DictData>()); }

Value Value::name_space(std::shared_ptr<DictData> data) {
  Value v = dict(std::move(data));
  v.kind_ = Kind::Namespace;
  return v;
}

Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn)});
  return v;
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void DictData::set(const Value& key, Value value) {
  for (auto& [k, v] : entries)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Callable: return "function";
    case Value::Kind::List: break;
  }
  switch (v.list_data().shape) {
    case Value::Shape::List: return "list";
    case Value::Shape::Tuple: return "tuple";
    case Value::Shape::Generator: return "generator";
    case Value::Shape::Range: return "range";
    case Value::Shape::View: break;
  }
  return v.list_data().view_name;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_float() != 0.0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List: return v.list_data().shape == Value::Shape::Generator || !v.list_data().items.empty();
    case Value::Kind::Dict: return !v.dict_data().entries.empty();
    default: return true;
  }
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 0; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const size_t e_at = text.find('e');
  const int exponent = std::atoi(text.c_str() + e_at + 1);
  std::string digits = text.substr(0, e_at);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -5 + 1 && exponent < 16) {
    if (exponent >= 0) {
      std::string whole = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      whole.append(exponent + 1 > static_cast<int>(whole.size()) ? exponent + 1 - whole.size() : 0, '0');
      const std::string frac = digits.size() > static_cast<size_t>(exponent + 1) ? digits.substr(exponent + 1) : "0";
      out += whole + "." + frac;
    } else {
      out += "0." + std::string(-exponent - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

static std::string join_repr(const std::vector<Value>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + repr(items[i]);
  return out;
}

static std::string dict_repr(const DictData& d) {
  std::string out = "{";
  for (size_t i = 0; i < d.entries.size(); ++i)
    out += (i ? ", " : "") + repr(d.entries[i].first) + ": " + repr(d.entries[i].second);
  return out + "}";
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::String: return v.str();
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return py_float_repr(v.as_float());
    case Value::Kind::String: return py_repr(v.str());
    case Value::Kind::Dict: return dict_repr(v.dict_data());
    case Value::Kind::Namespace: return "<Namespace " + dict_repr(v.dict_data()) + ">";
    case Value::Kind::Callable: return "<function " + v.callable().name + ">";
    case Value::Kind::List: break;
  }
  const ListData& l = v.list_data();
  switch (l.shape) {
    case Value::Shape::List: return "[" + join_repr(l.items) + "]";
    case Value::Shape::Tuple: return "(" + join_repr(l.items) + (l.items.size() == 1 ? ",)" : ")");
    case Value::Shape::Generator: return "<generator object>";
    case Value::Shape::Range: return l.view_name;
    case Value::Shape::View: return l.view_name + "([" + join_repr(l.items) + "])";
  }
  return "";
}

static bool numeric_equal(const Value& a, const Value& b) {
  if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return a.as_int() == b.as_int();
  return a.as_float() == b.as_float();
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return numeric_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      const ListData &x = a.list_data(), &y = b.list_data();
      if (&x == &y) return true;
      if (x.shape != y.shape || x.shape == Value::Shape::Generator || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals(x.items[i], y.items[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const DictData &x = a.dict_data(), &y = b.dict_data();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace: return a.dict_ptr() == b.dict_ptr();
    case Value::Kind::Callable: return &a.callable() == &b.callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list() && a.list_data().shape == b.list_data().shape &&
      (a.list_data().shape == Value::Shape::List || a.list_data().shape == Value::Shape::Tuple)) {
    const auto &x = a.list_data().items, &y = b.list_data().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  throw Problem("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(code_point_count(v.str()));
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict_data().entries.size());
    case Value::Kind::List:
      if (v.list_data().shape != Value::Shape::Generator) return static_cast<int64_t>(v.list_data().items.size());
      break;
    default: break;
  }
  throw Problem("object of type '" + type_name(v) + "' has no len()");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::String: {
      std::vector<Value> out;
      for (char32_t cp : decode_utf8(v.str())) {
        std::string one;
        append_utf8(one, cp);
        out.emplace_back(std::move(one));
      }
      return out;
    }
    case Value::Kind::Dict: {
      std::vector<Value> out;
      for (const auto& entry : v.dict_data().entries) out.push_back(entry.first);
      return out;
    }
    case Value::Kind::List: {
      ListData& l = v.list_data();
      if (l.shape != Value::Shape::Generator) return l.items;
      if (l.consumed) return {};
      l.consumed = true;
      return l.items;
    }
    default: throw Problem("'" + type_name(v) + "' object is not iterable");
  }
}

static void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  auto u_escape = [&](unsigned cp) {
    out += "\\u";
    for (int k = 3; k >= 0; --k) out += hex[(cp >> (4 * k)) & 0xF];
  };
  out += '"';
  for (char32_t cp : decode_utf8(s)) {
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E && cp != 0x7F)) {
          if (cp >= 0x10000) {
            u_escape(0xD800 + ((cp - 0x10000) >> 10));
            u_escape(0xDC00 + ((cp - 0x10000) & 0x3FF));
          } else {
            u_escape(static_cast<unsigned>(cp));
          }
        } else {
          append_utf8(out, cp);
        }
    }
  }
  out += '"';
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

static std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::String: return k.str();
    case Value::Kind::Int: return std::to_string(k.as_int());
    case Value::Kind::Float: return json_float(k.as_float());
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::None: return "null";
    default: throw Problem("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int level);

static void dump_newline(std::string& out, const JsonDumpOptions& o, int level) {
  if (!o.has_indent) return;
  out += '\n';
  for (int i = 0; i < level; ++i) out += o.indent;
}

static void dump_dict(std::string& out, const DictData& d, const JsonDumpOptions& o, int level) {
  if (d.entries.empty()) {
    out += "{}";
    return;
  }
  std::vector<const std::pair<Value, Value>*> entries;
  for (const auto& e : d.entries) entries.push_back(&e);
  if (o.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return less(a->first, b->first); });
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out += o.item_separator;
    dump_newline(out, o, level + 1);
    dump_string(out, json_key(entries[i]->first), o.ensure_ascii);
    out += o.key_separator;
    dump(out, entries[i]->second, o, level + 1);
  }
  dump_newline(out, o, level);
  out += '}';
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += json_float(v.as_float()); return;
    case Value::Kind::String: dump_string(out, v.str(), o.ensure_ascii); return;
    case Value::Kind::Dict: dump_dict(out, v.dict_data(), o, level); return;
    case Value::Kind::List: {
      const ListData& l = v.list_data();
      if (l.shape != Value::Shape::List && l.shape != Value::Shape::Tuple) break;
      if (l.items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += o.item_separator;
        dump_newline(out, o, level + 1);
        dump(out, l.items[i], o, level + 1);
      }
      dump_newline(out, o, level);
      out += ']';
      return;
    }
    default: break;
  }
  throw Problem("Object of type " + type_name(v) + " is not JSON serializable");
}

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  dump(out, v, options, 0);
  return out;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictData>();
      for (auto it = j.begin(); it != j.end(); ++it) d->entries.emplace_back(Value(it.key()), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: return Value::none();
  }
}

nlohmann::ordered_json to_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::None: return nullptr;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int();
    case Value::Kind::Float: return v.as_float();
    case Value::Kind::String: return v.str();
    case Value::Kind::Dict: {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [k, value] : v.dict_data().entries) out[json_key(k)] = to_json(value);
      return out;
    }
    case Value::Kind::List:
      if (v.list_data().shape == Value::Shape::List || v.list_data().shape == Value::Shape::Tuple) {
        nlohmann::ordered_json out = nlohmann::ordered_json::array();
        for (const Value& item : v.list_data().items) out.push_back(to_json(item));
        return out;
      }
      break;
    default: break;
  }
  throw Problem("Object of type " + type_name(v) + " is not JSON serializable");
}

}  // namespace hftrain::jinja
