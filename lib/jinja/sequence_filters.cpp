// jinja2's sequence filters (see sequence_filters.h). Those that return a generator in jinja2 (items,
// select, reject, selectattr, rejectattr, map, unique, reverse) return one here too: always true, no
// length, iterated once.
#include <algorithm>

#include "jinja/arguments.h"
#include "jinja/sequence_filters.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

Value generator(std::vector<Value> items) { return Value::list(std::move(items), Value::Shape::Generator); }

// jinja2's make_attrgetter: dotted parts (digits as indices) looked up with getitem; `fallback` replaces
// an undefined part when given.
struct AttrGetter {
  std::vector<Value> parts;
  const Value* fallback = nullptr;

  explicit AttrGetter(const Value& attribute) {
    if (attribute.is_none() || attribute.is_undefined()) return;
    if (!attribute.is_string()) {
      parts.push_back(attribute);
      return;
    }
    for (const std::string& p : split(attribute.str(), &dot(), -1)) {
      const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), ::isdigit);
      parts.push_back(digits ? Value(static_cast<int64_t>(std::stoll(p))) : Value(p));
    }
  }
  static const std::string& dot() {
    static const std::string d = ".";
    return d;
  }
  Value operator()(Value item) const {
    for (const Value& part : parts) {
      item = get_item(item, part);
      if (fallback && item.is_undefined()) item = *fallback;
    }
    return item;
  }
};

Value ignore_case(const Value& v) { return v.is_string() ? Value(lower(v.str())) : v; }

const TestFunction& test_named(const Value& name) {
  const TestFunction* test = find_test(string_argument(name, "the test name"));
  if (!test) throw Problem("No test named '" + name.str() + "'.");
  return *test;
}

Value select_or_reject(const Value& value, const CallArgs& args, bool lookup_attr, bool reject) {
  const std::string what = std::string("filter '") + (reject ? "reject" : "select") + (lookup_attr ? "attr'" : "'");
  size_t next = 0;
  AttrGetter getter(Value::none());
  if (lookup_attr) {
    if (args.positional.empty()) throw Problem(what + " needs an attribute name");
    getter = AttrGetter(args.positional[next++]);
  }
  const TestFunction* test = next < args.positional.size() ? &test_named(args.positional[next++]) : nullptr;
  CallArgs test_args{std::vector<Value>(args.positional.begin() + static_cast<long>(next), args.positional.end()), args.keywords};
  std::vector<Value> kept;
  if (!truthy(value)) return generator({});
  for (const Value& item : iterate(value)) {
    const Value subject = getter(item);
    const bool passed = test ? (*test)(subject, test_args) : truthy(subject);
    if (passed != reject) kept.push_back(item);
  }
  return generator(std::move(kept));
}

Value f_select(const Value& v, CallArgs& args) { return select_or_reject(v, args, false, false); }
Value f_reject(const Value& v, CallArgs& args) { return select_or_reject(v, args, false, true); }
Value f_selectattr(const Value& v, CallArgs& args) { return select_or_reject(v, args, true, false); }
Value f_rejectattr(const Value& v, CallArgs& args) { return select_or_reject(v, args, true, true); }

Value f_map(const Value& v, CallArgs& args) {
  std::vector<Value> out;
  const bool by_attribute = args.positional.empty() &&
                            std::any_of(args.keywords.begin(), args.keywords.end(), [](const auto& k) { return k.first == "attribute"; });
  if (by_attribute) {
    Arguments a("filter 'map'", args, {"attribute", "default"});
    AttrGetter getter(a.get(0));
    const Value fallback = a.get_or(1, Value::none());
    if (!fallback.is_none()) getter.fallback = &fallback;
    if (truthy(v))
      for (const Value& item : iterate(v)) out.push_back(getter(item));
    return generator(std::move(out));
  }
  if (args.positional.empty()) throw Problem("map requires a filter argument");
  const std::string& name = string_argument(args.positional[0], "map's filter name");
  const FilterFunction* filter = find_filter(name);
  if (!filter) throw Problem("No filter named '" + name + "'.");
  CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keywords};
  if (truthy(v))
    for (const Value& item : iterate(v)) {
      CallArgs copy = rest;
      out.push_back((*filter)(item, copy));
    }
  return generator(std::move(out));
}

Value f_join(const Value& v, CallArgs& args) {
  Arguments a("filter 'join'", args, {"d", "attribute"});
  const std::string separator = to_str(a.get_or(0, Value("")));
  AttrGetter getter(a.get_or(1, Value::none()));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    out += (first ? "" : separator) + to_str(getter(item));
    first = false;
  }
  return Value(std::move(out));
}

Value f_items(const Value& v, CallArgs& args) {
  Arguments("filter 'items'", args, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) throw Problem("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, value] : v.dict_data().entries) out.push_back(Value::tuple({k, value}));
  return generator(std::move(out));
}

Value f_first(const Value& v, CallArgs& args) {
  Arguments("filter 'first'", args, {});
  if (v.is_list() && v.list_data().shape == Value::Shape::Generator) {
    ListData& g = v.list_data();
    if (g.consumed || g.items.empty()) return Value::undefined("No first item, sequence was empty.");
    Value head = g.items.front();
    g.items.erase(g.items.begin());
    return head;
  }
  const auto items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, CallArgs& args) {
  Arguments("filter 'last'", args, {});
  if (!v.is_undefined() && !v.is_string() && !v.is_dict() && !(v.is_list() && v.list_data().shape != Value::Shape::Generator))
    throw Problem("'" + type_name(v) + "' object is not reversible");
  const auto items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_list(const Value& v, CallArgs& args) {
  Arguments("filter 'list'", args, {});
  return Value::list(iterate(v));
}

Value f_unique(const Value& v, CallArgs& args) {
  Arguments a("filter 'unique'", args, {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy(a.get_or(0, Value(false)));
  AttrGetter getter(a.get_or(1, Value::none()));
  std::vector<Value> seen, out;
  for (const Value& item : iterate(v)) {
    const Value key = case_sensitive ? getter(item) : ignore_case(getter(item));
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

// A stable sort of `items` by `keys` (Python's sorted: reverse keeps equal items in their order).
std::vector<Value> sorted_by(const std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? less(keys[y], keys[x]) : less(keys[x], keys[y]);
  });
  std::vector<Value> out;
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

Value f_dictsort(const Value& v, CallArgs& args) {
  Arguments a("filter 'dictsort'", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) throw Problem("dictsort needs a mapping, not '" + type_name(v) + "'");
  const std::string by = a.has(1) ? string_argument(a.get(1), "by") : "key";
  if (by != "key" && by != "value") throw Problem("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items, keys;
  for (const auto& [k, value] : v.dict_data().entries) {
    items.push_back(Value::tuple({k, value}));
    const Value& key = by == "key" ? k : value;
    keys.push_back(truthy(a.get_or(0, Value(false))) ? key : ignore_case(key));
  }
  return Value::list(sorted_by(items, keys, truthy(a.get_or(2, Value(false)))));
}

Value f_sort(const Value& v, CallArgs& args) {
  Arguments a("filter 'sort'", args, {"reverse", "case_sensitive", "attribute"});
  const bool case_sensitive = truthy(a.get_or(1, Value(false)));
  std::vector<AttrGetter> getters;
  if (a.has_value(2) && a.get(2).is_string()) {
    static const std::string comma = ",";
    for (const std::string& part : split(a.get(2).str(), &comma, -1))
      getters.emplace_back(Value(part));
  } else {
    getters.emplace_back(a.get_or(2, Value::none()));
  }
  const auto items = iterate(v);
  std::vector<Value> keys;
  for (const Value& item : items) {
    std::vector<Value> key;
    for (const AttrGetter& g : getters) key.push_back(case_sensitive ? g(item) : ignore_case(g(item)));
    keys.push_back(Value::list(std::move(key)));
  }
  return Value::list(sorted_by(items, keys, truthy(a.get_or(0, Value(false)))));
}

Value f_reverse(const Value& v, CallArgs& args) {
  Arguments("filter 'reverse'", args, {});
  if (v.is_string()) {
    auto cps = decode_utf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(encode_utf8(cps));
  }
  auto items = iterate(v);
  std::reverse(items.begin(), items.end());
  return generator(std::move(items));
}

Value f_sum(const Value& v, CallArgs& args) {
  Arguments a("filter 'sum'", args, {"attribute", "start"});
  AttrGetter getter(a.get_or(0, Value::none()));
  Value total = a.get_or(1, Value(0));
  for (const Value& item : iterate(v)) total = binary_op("+", total, getter(item));
  return total;
}

}  // namespace

void add_sequence_filters(std::map<std::string, FilterFunction>& table) {
  table.insert({{"join", f_join}, {"items", f_items}, {"select", f_select}, {"reject", f_reject},
                {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map}, {"first", f_first},
                {"last", f_last}, {"list", f_list}, {"unique", f_unique}, {"dictsort", f_dictsort},
                {"sort", f_sort}, {"reverse", f_reverse}, {"sum", f_sum}});
}

}  // namespace hftrain::jinja
