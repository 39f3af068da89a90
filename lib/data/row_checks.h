// What a file data source needs of each row (the columns of its task, the label set), the check of one row
// against it, and, when no row of a file passes, the message that says what the file holds instead (a chat
// `messages` column, other columns than the spec names, only malformed rows) rather than offering
// on_bad_row: skip, which would leave nothing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/text_rows.h"

namespace hftrain {

struct RowNeeds {
  // The columns whose values must be strings, in the order they are checked, each with the option naming it
  // ("data.text_column").
  std::vector<std::pair<std::string, std::string>> text_columns;
  std::string label_column;     // "" = the task has no label
  bool label_required = false;  // a missing or null label is a problem (else the row has no label: -100)
  const std::map<std::string, int64_t>* label_ids = nullptr;  // the label set (required with label_column)
  const std::vector<std::string>* label_names = nullptr;      // the same in id order, for messages
};

struct RowIssue {
  std::string column;  // "" = the row as a whole
  std::string reason;
};

// The first problem of `row` for `needs` (its own parse problem first), or nullopt when it can be used.
std::optional<RowIssue> row_issue(const Row& row, const RowNeeds& needs);

// For a file none of whose rows passes row_issue: names the file, says what its rows are and how many, and
// quotes the first row's problem (`first`, at `first_row`).
std::string unusable_file_message(const std::string& file, const std::vector<Row>& rows, const RowNeeds& needs,
                                  const Row& first_row, const RowIssue& first);

}  // namespace hftrain
