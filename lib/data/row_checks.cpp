// The row checks of the file data sources and the message for a file no row of which can be used (see
// row_checks.h).
#include "data/row_checks.h"

#include <set>

namespace hftrain {

std::optional<RowIssue> row_issue(const Row& row, const RowNeeds& needs) {
  if (!row.problem.empty()) return RowIssue{row.problem_column, row.problem};
  for (const auto& [column, option] : needs.text_columns) {
    auto it = row.fields.find(column);
    if (it == row.fields.end()) return RowIssue{column, "missing column"};
    if (!it->second) return RowIssue{column, "value is null"};
    auto st = row.is_string.find(column);
    if (st != row.is_string.end() && !st->second) return RowIssue{column, "expected a string, got " + *it->second};
  }
  if (needs.label_column.empty()) return std::nullopt;
  auto it = row.fields.find(needs.label_column);
  if (it == row.fields.end() || !it->second) {
    if (!needs.label_required) return std::nullopt;
    return RowIssue{needs.label_column, it == row.fields.end() ? "missing column" : "value is null"};
  }
  if (needs.label_ids->count(*it->second)) return std::nullopt;
  std::string set;
  for (const auto& n : *needs.label_names) set += (set.empty() ? "" : ", ") + n;
  return RowIssue{needs.label_column, "label '" + *it->second + "' is not in the label set [" + set + "]"};
}

namespace {

// The option of the spec that names `column` ("" when none does).
std::string option_of(const RowNeeds& needs, const std::string& column) {
  for (const auto& [c, option] : needs.text_columns)
    if (c == column) return option;
  return column == needs.label_column ? "data.label_column" : "";
}

// What the well-formed rows hold, when the column the spec names is in none of them.
std::string missing_column_hint(const std::set<std::string>& columns, const RowNeeds& needs, const std::string& column) {
  const std::string option = option_of(needs, column);
  if (columns.count("messages") && option != "data.label_column")
    return "rows have a `messages` column: conversations are read by data.task causal_lm (TRL's conversational "
           "format, with the tokenizer's chat template; docs/data.md), not through " + option + " '" + column + "'";
  if (columns.count("conversations") && option != "data.label_column")
    return "rows have a `conversations` column (ShareGPT's from / value turns): hftrain reads conversations from a "
           "`messages` column of role / content turns, as TRL does; rename the column and its keys";
  std::string list;
  int shown = 0;
  for (const auto& c : columns) {
    if (++shown > 12) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "'" : ", '") + c + "'";
  }
  return "no row has the column '" + column + "'" + (option.empty() ? "" : " (" + option + ")") + "; the rows have " +
         list + (option.empty() ? "" : ": set " + option + " to the one that holds it");
}

}  // namespace

std::string unusable_file_message(const std::string& file, const std::vector<Row>& rows, const RowNeeds& needs,
                                  const Row& first_row, const RowIssue& first) {
  std::set<std::string> columns;
  std::size_t malformed = 0;
  for (const Row& r : rows) {
    if (!r.problem.empty()) ++malformed;
    else
      for (const auto& f : r.fields) columns.insert(f.first);
  }
  std::string msg = file + ": none of its " + std::to_string(rows.size()) + " rows can be used";
  if (malformed == rows.size()) msg += ": every row is malformed";
  for (const Row& r : rows) {  // the first well-formed row tells what the rows lack
    if (!r.problem.empty()) continue;
    auto issue = row_issue(r, needs);
    if (issue && issue->reason == "missing column" && !columns.count(issue->column))
      msg += ": " + missing_column_hint(columns, needs, issue->column);
    break;
  }
  return msg + "; the first row: " + row_location(file, first_row) + ": " +
         (first.column.empty() ? "" : "column '" + first.column + "': ") + first.reason;
}

}  // namespace hftrain
