// Progress text (see progress.h). Interval and rate formats follow tqdm's format_meter.
#include "log/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "log/metrics_format.h"
#include "util/strings.h"

namespace hftrain {
namespace {

int percent(const ProgressSnapshot& s) {
  return s.total > 0 ? static_cast<int>(100.0 * static_cast<double>(s.step) / static_cast<double>(s.total)) : 0;
}

std::string remaining(const ProgressSnapshot& s) {
  if (s.step - s.start_step <= 0 || s.total <= 0) return "?";
  const double per_step = s.elapsed_seconds / static_cast<double>(s.step - s.start_step);
  return format_interval(per_step * static_cast<double>(std::max<int64_t>(0, s.total - s.step)));
}

std::string number_text(const nlohmann::json& v) {
  if (v.is_number_float()) return short_number(v.get<double>());
  if (v.is_number()) return v.dump();
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

std::string format_interval(double seconds) {
  const auto t = static_cast<int64_t>(std::max(0.0, seconds));
  const int64_t h = t / 3600, m = t / 60 % 60, s = t % 60;
  char buf[32];
  if (h) std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m), static_cast<long long>(s));
  else std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(m), static_cast<long long>(s));
  return buf;
}

std::string format_rate(int64_t steps, double seconds) {
  if (steps <= 0 || seconds <= 0) return "?it/s";
  const double rate = static_cast<double>(steps) / seconds;
  char buf[32];
  if (rate >= 1.0) std::snprintf(buf, sizeof(buf), "%.2fit/s", rate);
  else std::snprintf(buf, sizeof(buf), "%.2fs/it", 1.0 / rate);
  return buf;
}

std::string short_number(double v) {
  if (!std::isfinite(v)) return python_float_repr(v);
  if (v == 0 || std::fabs(v) >= 0.01) return python_float_repr(python_round(v, 4));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return python_float_repr(std::strtod(buf, nullptr));
}

std::string progress_bar_line(const ProgressSnapshot& s, int width, bool utf8) {
  char pct[8];
  std::snprintf(pct, sizeof(pct), "%3d%%", percent(s));
  // The line must fit the terminal (a wrapped line cannot be redrawn in place): drop the postfix
  // items from the right while the bar would get narrower than 10 cells.
  std::vector<std::string> postfix;
  if (s.title.empty()) postfix.push_back("epoch=" + short_number(python_round(s.epoch, 2)));
  if (s.loss) postfix.push_back("loss=" + short_number(*s.loss));
  if (s.learning_rate) postfix.push_back("lr=" + short_number(*s.learning_rate));
  const std::string head = "| " + std::to_string(s.step) + "/" + std::to_string(s.total) + " [" +
                           format_interval(s.elapsed_seconds) + "<" + remaining(s) + ", " +
                           format_rate(s.step - s.start_step, s.elapsed_seconds);
  std::string right;
  int bar_width = 0;
  for (std::size_t keep = postfix.size() + 1; keep-- > 0;) {
    right = head;
    for (std::size_t i = 0; i < keep; ++i) right += ", " + postfix[i];
    right += "]";
    bar_width = width - 1 - static_cast<int>(s.title.size() + (s.title.empty() ? 0 : 2) + std::string(pct).size() + 1 + right.size());
    if (bar_width >= 10) break;
  }
  bar_width = std::max(1, bar_width);
  const double frac = s.total > 0 ? std::clamp(static_cast<double>(s.step) / static_cast<double>(s.total), 0.0, 1.0) : 0.0;
  std::string bar;
  if (utf8) {
    // Eighths of a cell, as tqdm draws them.
    static const char* kPartial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const int eighths = static_cast<int>(frac * bar_width * 8);
    const int full = eighths / 8;
    for (int i = 0; i < full; ++i) bar += "█";
    int used = full;
    if (full < bar_width && eighths % 8) {
      bar += kPartial[eighths % 8];
      ++used;
    }
    bar += std::string(static_cast<std::size_t>(bar_width - used), ' ');
  } else {
    const int full = static_cast<int>(frac * bar_width);
    bar = std::string(static_cast<std::size_t>(full), '#') + std::string(static_cast<std::size_t>(bar_width - full), ' ');
  }
  return (s.title.empty() ? "" : s.title + ": ") + std::string(pct) + "|" + bar + right;
}

std::string progress_plain_line(const ProgressSnapshot& s) {
  std::string line = (s.title.empty() ? "step" : s.title) + " " + std::to_string(s.step) + "/" + std::to_string(s.total) +
                     " (" + std::to_string(percent(s)) + "%)";
  if (s.title.empty()) line += " | epoch " + short_number(python_round(s.epoch, 2));
  if (s.loss) line += " | loss " + short_number(*s.loss);
  if (s.learning_rate) line += " | lr " + short_number(*s.learning_rate);
  line += " | " + format_rate(s.step - s.start_step, s.elapsed_seconds) + " | " + format_interval(s.elapsed_seconds) + " elapsed, " +
          remaining(s) + " left";
  return line;
}

std::string log_event_line(const nlohmann::json& entry, int64_t max_steps) {
  std::string line = "step " + (entry.contains("step") ? entry["step"].dump() : std::string("?")) + "/" +
                     std::to_string(max_steps);
  if (entry.contains("epoch") && entry["epoch"].is_number())
    line += " | epoch " + short_number(python_round(entry["epoch"].get<double>(), 2));
  std::vector<std::string> first, rest;
  for (const auto& item : entry.items()) {
    const std::string& k = item.key();
    if (k == "step" || k == "epoch") continue;
    const bool is_loss = ends_with(k, "loss");
    (is_loss ? first : rest).push_back(k);
  }
  // Training entries read loss, grad_norm, learning_rate; the rest alphabetically.
  for (const char* k : {"grad_norm", "learning_rate"}) {
    auto it = std::find(rest.begin(), rest.end(), k);
    if (it != rest.end()) {
      rest.erase(it);
      first.push_back(k);
    }
  }
  for (const auto& k : first) line += " | " + k + " " + number_text(entry[k]);
  for (const auto& k : rest) line += " | " + k + " " + number_text(entry[k]);
  return line;
}

}  // namespace hftrain
