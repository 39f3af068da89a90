// The table `hftrain search` prints at the end: one row per trial of the study (number, state, value, each
// parameter), as Optuna's study.trials_dataframe() shows them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hftrain {

// `trials`: the driver's trial descriptions ({"number", "state", "value", "params"}); `names`: the parameter
// columns in order; `best`: the best trial's number (marked with *), -1 for none.
std::string trials_table(const nlohmann::json& trials, const std::vector<std::string>& names, int64_t best);

// A parameter or objective value as the table and the log show it (numbers with 6 significant digits).
std::string short_value(const nlohmann::json& value);

}  // namespace hftrain
