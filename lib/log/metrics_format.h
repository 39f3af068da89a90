// HF's metrics presentation: Trainer.metrics_format (memory in MB, runtimes as H:MM:SS.cc, total_flos
// in GF, floats rounded to 4 places) and Trainer.log_metrics (the "***** split metrics *****" table
// with aligned "  key = value" lines, keys sorted). Numbers print as Python's str() would print them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace hftrain {

// Python repr of a float: shortest round-trip digits, exponent form when exp < -4 or >= 16.
std::string python_float_repr(double v);
// Python round(v, ndigits) (round half to even on the decimal digits, as CPython does).
double python_round(double v, int ndigits);
// HF _secs2timedelta: str(timedelta(seconds=int(s))) + "." + two digits of the fraction.
std::string secs_to_timedelta(double secs);

// HF metrics_format: each value as the table shows it.
std::vector<std::pair<std::string, std::string>> format_metrics(const nlohmann::json& metrics);
// HF log_metrics: the whole table, newline-terminated lines.
std::string metrics_table(const std::string& split, const nlohmann::json& metrics);

}  // namespace hftrain
