// Attribute and item lookup, slicing and the operators, as jinja2's sandboxed environment runs them on
// Python values (see library.h).
#include <cmath>

#include "jinja/error.h"
#include "jinja/library.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

// jinja2's object_type_repr: "None", or "<type> object".
std::string object_repr(const Value& v) { return v.is_none() ? "None" : type_name(v) + " object"; }

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_repr(obj) + "' has no attribute '" + name + "'");
}

bool is_int(const Value& v) { return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool; }

bool indexable(const Value& v) {
  return v.is_string() ||
         (v.is_list() && v.list_data().shape != Value::Shape::Generator && v.list_data().shape != Value::Shape::View);
}

[[noreturn]] void overflow() { throw Problem("integer overflow (template integers are 64-bit)"); }

Value checked(bool overflowed, int64_t value) {
  if (overflowed) overflow();
  return Value(value);
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string())
    throw Problem("can only concatenate str (not \"" + type_name(b) + "\") to str");
  throw Problem("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

Value repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), seq.list_data().items.begin(), seq.list_data().items.end());
  return Value::list(std::move(out), seq.list_data().shape);
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") {
    const bool overflowed = __builtin_add_overflow(x, y, &r);
    return checked(overflowed, r);
  }
  if (op == "-") {
    const bool overflowed = __builtin_sub_overflow(x, y, &r);
    return checked(overflowed, r);
  }
  if (op == "*") {
    const bool overflowed = __builtin_mul_overflow(x, y, &r);
    return checked(overflowed, r);
  }
  if (op == "/") {
    if (y == 0) throw Problem("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw Problem("integer division or modulo by zero");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
    return Value(op == "//" ? q : m);
  }
  if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
  int64_t result = 1;
  for (int64_t i = 0; i < y; ++i)
    if (__builtin_mul_overflow(result, x, &result)) overflow();
  return Value(result);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) throw Problem(op == "/" ? "float division by zero" : op == "//" ? "float floor division by zero" : "float modulo");
  if (op == "/") return Value(x / y);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  if (op == "%") return Value(m);
  return Value(std::floor(x / y));
}

}  // namespace

[[noreturn]] void fail_undefined(const Value& v) {
  throw Problem(v.str().empty() ? std::string("undefined value") : v.str());
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  Value method;
  if (bind_method(obj, name, method)) return method;
  if (obj.kind() == Value::Kind::Dict || obj.kind() == Value::Kind::Namespace)
    if (const Value* v = obj.dict_data().find(name)) return *v;
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_data().find(key)) return *v;
  } else if (indexable(obj) && is_int(key)) {
    const int64_t n = length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (!obj.is_string()) return obj.list_data().items[static_cast<size_t>(i)];
      const auto cps = decode_utf8(obj.str());
      std::string one;
      append_utf8(one, cps[static_cast<size_t>(i)]);
      return Value(std::move(one));
    }
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(object_repr(obj) + " has no element " + repr(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  for (const Value* v : {&start, &stop, &step})
    if (!v->is_none() && !is_int(*v)) throw Problem("slice indices must be integers or None or have an __index__ method");
  if (!indexable(obj)) return Value::undefined(object_repr(obj) + " has no element slice");
  const int64_t n = length(obj);
  const int64_t s = step.is_none() ? 1 : step.as_int();
  if (s == 0) throw Problem("slice step cannot be zero");
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    const int64_t lower = s > 0 ? 0 : -1, upper = s > 0 ? n : n - 1;
    return i < lower ? lower : i > upper ? upper : i;
  };
  const int64_t b = adjust(start, s > 0 ? 0 : n - 1), e = adjust(stop, s > 0 ? n : -1);
  std::vector<size_t> picked;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) picked.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    const auto cps = decode_utf8(obj.str());
    std::string out;
    for (size_t i : picked) append_utf8(out, cps[i]);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  for (size_t i : picked) out.push_back(obj.list_data().items[i]);
  const auto shape = obj.list_data().shape == Value::Shape::Tuple ? Value::Shape::Tuple : Value::Shape::List;
  return Value::list(std::move(out), shape);
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return int_op(op, a.as_int(), b.as_int());
    return float_op(op, a.as_float(), b.as_float());
  }
  const bool a_seq = a.is_string() || (a.is_list() && (a.list_data().shape == Value::Shape::List ||
                                                       a.list_data().shape == Value::Shape::Tuple));
  if (op == "+" && a_seq && a.kind() == b.kind()) {
    if (a.is_string()) return Value(a.str() + b.str());
    if (a.list_data().shape == b.list_data().shape) {
      std::vector<Value> out = a.list_data().items;
      out.insert(out.end(), b.list_data().items.begin(), b.list_data().items.end());
      return Value::list(std::move(out), a.list_data().shape);
    }
  }
  if (op == "*" && a_seq && is_int(b)) return repeat(a, b.as_int());
  const bool b_seq = b.is_string() || (b.is_list() && (b.list_data().shape == Value::Shape::List ||
                                                       b.list_data().shape == Value::Shape::Tuple));
  if (op == "*" && b_seq && is_int(a)) return repeat(b, a.as_int());
  if (op == "%" && a.is_string()) throw Problem("'%' string formatting is not supported in chat templates");
  unsupported(op, a, b);
}

Value negate(const Value& v, bool minus) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) throw Problem(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + type_name(v) + "'");
  if (v.kind() == Value::Kind::Float) return Value(minus ? -v.as_float() : v.as_float());
  if (minus && v.as_int() == INT64_MIN) overflow();
  return Value(minus ? -v.as_int() : v.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string()) throw Problem("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::Dict: return container.dict_data().find(item) != nullptr;
    case Value::Kind::List:
      for (const Value& v : iterate(container))
        if (equals(v, item)) return true;
      return false;
    default: throw Problem("argument of type '" + type_name(container) + "' is not iterable");
  }
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return less(a, b) || equals(a, b);
  return less(b, a) || equals(a, b);
}

}  // namespace hftrain::jinja
