// The syntax tree of a chat template: expressions and statements as jinja2's parser builds them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace hftrain::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// One node kind per jinja2 expression node. Children in `args`:
//   List / Tuple: the items; Dict: key, value, key, value...; GetAttr: object (attribute in `name`);
//   GetItem: object, subscript; Slice: start, stop, step (null when absent); Call: callee, positional...;
//   Filter: input (null inside {% filter %} / {% set x | f %}), positional...; Test: subject, positional...;
//   Neg / Pos / Not: operand; Binary (operator in `name`), And, Or: left, right;
//   Compare: first, then one operand per entry of `ops`; Concat: the parts; CondExpr: test, then, else (null).
struct Expr {
  enum class Kind {
    Const, Name, List, Tuple, Dict, GetAttr, GetItem, Slice, Call, Filter, Test,
    Neg, Pos, Not, Binary, And, Or, Compare, Concat, CondExpr
  };
  Kind kind = Kind::Const;
  int line = 0;
  int column = 0;
  Value value;       // Const
  std::string name;  // Name, GetAttr's attribute, Filter / Test name, Binary operator
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call / Filter / Test
  std::vector<std::string> ops;                         // Compare: ==, !=, <, <=, >, >=, in, notin
};

struct Stmt;
using Body = std::vector<Stmt>;

// Text and Print output; If (test, body, else: an elif is an If alone in else_body); For (target, iterable,
// inline `if` filter, body, else); Set (target: a Name, a Tuple of Names or a GetAttr of a Name for
// namespace attributes; value); SetBlock (target, filter chain or null, body); Macro (name, params,
// defaults for the last params, body); FilterBlock (filter chain, body); With (targets, values, body);
// Generation (body); Break / Continue.
struct Stmt {
  enum class Kind { Text, Print, If, For, Set, SetBlock, Macro, FilterBlock, With, Generation, Break, Continue };
  Kind kind = Kind::Text;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;    // Print, If test, For iterable, Set value, SetBlock / FilterBlock filter chain
  ExprPtr target;  // For, Set, SetBlock
  ExprPtr loop_filter;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  std::vector<ExprPtr> with_targets;
  std::vector<ExprPtr> with_values;
  Body body;
  Body else_body;
};

}  // namespace hftrain::jinja
