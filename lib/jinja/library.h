// What a template can name besides its variables: jinja2's filters and tests (filters.cpp, tests.cpp),
// the methods of str / dict / list values (methods.cpp), and the value operations the evaluator and the
// filters share: attribute and item lookup with jinja2's sandboxed fallbacks, slicing, operators
// (operators.cpp). Each throws Problem; the evaluator adds the position.
#pragma once

#include <string>

#include "jinja/value.h"

namespace hftrain::jinja {

using FilterFunction = Value (*)(const Value& input, CallArgs& args);
using TestFunction = bool (*)(const Value& subject, CallArgs& args);

const FilterFunction* find_filter(const std::string& name);
const TestFunction* find_test(const std::string& name);

// obj.name as a bound method of a str / dict / list; false when obj has no such method. A list or dict
// method that would change the value is an unsafe undefined (the immutable sandbox's SecurityError).
bool bind_method(const Value& obj, const std::string& name, Value& out);

// jinja2's environment.getattr / getitem: an attribute falls back to an item and back, a miss is an
// undefined naming what was missing; an undefined object raises its error.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Raises the error an undefined value carries when it is used.
[[noreturn]] void fail_undefined(const Value& v);

Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v, bool minus);
// a <op> b for ==, !=, <, <=, >, >=, in, notin.
bool compare(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

}  // namespace hftrain::jinja
