// HF metrics formatting (see metrics_format.h). Rules from transformers trainer_pt_utils
// (metrics_format, log_metrics, _secs2timedelta) and CPython's float repr / round.
#include "log/metrics_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace hftrain {
namespace {

// Shortest digit string d1d2...dn and exponent e with |v| = 0.d1d2...dn * 10^e that reads back as v.
void shortest_digits(double v, std::string& digits, int& decpt) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v || precision == 17) break;
  }
  // buf = "d.ddde[+-]XX"
  std::string s(buf);
  const std::size_t e = s.find('e');
  digits.clear();
  for (std::size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  decpt = std::atoi(s.c_str() + e + 1) + 1;
}

// Python's int(v) >> bits: truncate to an integer, then floor-divide by 2^bits (exact in double for
// integer-valued v, since dividing by a power of two only moves the exponent).
std::string shifted_int_text(const nlohmann::json& v, int bits) {
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>(), d = int64_t{1} << bits;
    return std::to_string(i >= 0 ? i / d : -((-i + d - 1) / d));
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f", std::floor(std::trunc(v.get<double>()) / std::ldexp(1.0, bits)) + 0.0);
  return buf;
}

std::string value_text(const nlohmann::json& v) {
  if (v.is_number_float()) return python_float_repr(v.get<double>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  return v.dump();
}

}  // namespace

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  std::string sign = v < 0 ? "-" : "";
  std::string digits;
  int decpt = 0;
  shortest_digits(std::fabs(v), digits, decpt);
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    std::string mantissa = digits.substr(0, 1);
    if (n > 1) mantissa += "." + digits.substr(1);
    const int exp = decpt - 1;
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return sign + mantissa + e;
  }
  if (decpt <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
  if (decpt < n) return sign + digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
  return sign + digits + std::string(static_cast<std::size_t>(decpt - n), '0') + ".0";
}

double python_round(double v, int ndigits) {
  if (!std::isfinite(v)) return v;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", ndigits, v);  // exact decimal rounding, as CPython's round
  return std::strtod(buf, nullptr);
}

std::string secs_to_timedelta(double secs) {
  const auto whole = static_cast<int64_t>(secs);  // int() truncates toward zero
  const auto msec = static_cast<int64_t>(std::fabs(secs - static_cast<double>(whole)) * 100);
  // str(datetime.timedelta(seconds=whole)): "[D day[s], ]H:MM:SS", days floored for negatives.
  int64_t days = whole >= 0 ? whole / 86400 : -((-whole + 86399) / 86400);
  int64_t rest = whole - days * 86400;
  char hms[32];
  std::snprintf(hms, sizeof(hms), "%lld:%02lld:%02lld", static_cast<long long>(rest / 3600),
                static_cast<long long>(rest % 3600 / 60), static_cast<long long>(rest % 60));
  std::string text = hms;
  if (days != 0) text = std::to_string(days) + (std::llabs(days) == 1 ? " day, " : " days, ") + text;
  char frac[32];
  std::snprintf(frac, sizeof(frac), ".%02lld", static_cast<long long>(msec));
  return text + frac;
}

std::vector<std::pair<std::string, std::string>> format_metrics(const nlohmann::json& metrics) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, v] : metrics.items()) {
    std::string text;
    if (key.find("_mem_") != std::string::npos && v.is_number()) {
      text = shifted_int_text(v, 20) + "MB";
    } else if (key.find("_runtime") != std::string::npos && v.is_number()) {
      text = secs_to_timedelta(v.get<double>());
    } else if (key == "total_flos" && v.is_number()) {
      text = shifted_int_text(v, 30) + "GF";
    } else if (v.is_number_float()) {
      text = python_float_repr(python_round(v.get<double>(), 4));
    } else {
      text = value_text(v);
    }
    out.emplace_back(key, text);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string metrics_table(const std::string& split, const nlohmann::json& metrics) {
  std::string out = "***** " + split + " metrics *****\n";
  const auto rows = format_metrics(metrics);
  std::size_t k_width = 0, v_width = 0;
  for (const auto& [k, v] : rows) {
    k_width = std::max(k_width, k.size());
    v_width = std::max(v_width, v.size());
  }
  for (const auto& [k, v] : rows)
    out += "  " + k + std::string(k_width - k.size(), ' ') + " = " + std::string(v_width - v.size(), ' ') + v + "\n";
  return out;
}

}  // namespace hftrain
