// HTML + SVG rendering of the report (see report_html.h).
#include "log/report_html.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "log/metrics_format.h"
#include "log/progress.h"

namespace hftrain {
namespace {

// Chart geometry in SVG user units.
constexpr double kWidth = 640, kHeight = 320;
constexpr double kLeft = 72, kRight = 16, kTop = 14, kBottom = 44;

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string color(std::size_t run) { return kPalette[run % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string render_chart(const Plot& plot, const std::vector<RunHistory>& runs) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& s : plot.series)
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
  const Axis xa = nice_axis(x_lo, x_hi, 6), ya = value_axis(plot.key, y_lo, y_hi);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + (x - xa.min) / (xa.max - xa.min) * pw; };
  auto position = [&](double v) { return ya.log ? std::log10(v) : v; };
  auto sy = [&](double y) { return kTop + (position(ya.max) - position(y)) / (position(ya.max) - position(ya.min)) * ph; };

  std::string svg = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coord(kWidth) + "\" height=\"" +
                    coord(kHeight) + "\" viewBox=\"0 0 " + coord(kWidth) + " " + coord(kHeight) +
                    "\" role=\"img\" aria-label=\"" + html_escape(plot.title) + " by step\">\n";
  svg += "<g class=\"grid\">\n";
  for (double t : ya.ticks) {
    const std::string y = coord(sy(t));
    svg += "<line x1=\"" + coord(kLeft) + "\" y1=\"" + y + "\" x2=\"" + coord(kLeft + pw) + "\" y2=\"" + y + "\"/>\n";
    svg += "<text class=\"ytick\" x=\"" + coord(kLeft - 6) + "\" y=\"" + y + "\">" + tick_label(t) + "</text>\n";
  }
  for (double t : xa.ticks) {
    const std::string x = coord(sx(t));
    svg += "<line x1=\"" + x + "\" y1=\"" + coord(kTop) + "\" x2=\"" + x + "\" y2=\"" + coord(kTop + ph) + "\"/>\n";
    svg += "<text class=\"xtick\" x=\"" + x + "\" y=\"" + coord(kTop + ph + 16) + "\">" + tick_label(t) + "</text>\n";
  }
  svg += "</g>\n<rect class=\"frame\" x=\"" + coord(kLeft) + "\" y=\"" + coord(kTop) + "\" width=\"" + coord(pw) +
         "\" height=\"" + coord(ph) + "\"/>\n";
  svg += "<text class=\"xlabel\" x=\"" + coord(kLeft + pw / 2) + "\" y=\"" + coord(kHeight - 6) + "\">step</text>\n";
  svg += "<text class=\"ylabel\" transform=\"translate(14 " + coord(kTop + ph / 2) + ") rotate(-90)\">" +
         html_escape(plot.key) + (ya.log ? " (log scale)" : "") + "</text>\n";
  for (const auto& s : plot.series) {
    const std::string run = html_escape(runs[s.run].label);
    std::string points;
    for (const auto& [x, y] : s.points) points += (points.empty() ? "" : " ") + coord(sx(x)) + "," + coord(sy(y));
    svg += "<polyline class=\"series\" data-plot=\"" + html_escape(plot.key) + "\" data-run=\"" + run +
           "\" data-points=\"" + std::to_string(s.points.size()) + "\" fill=\"none\" stroke=\"" + color(s.run) +
           "\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    svg += "<g class=\"markers\" data-plot=\"" + html_escape(plot.key) + "\" data-run=\"" + run + "\" fill=\"" + color(s.run) + "\">\n";
    for (const auto& [x, y] : s.points)
      svg += "<circle cx=\"" + coord(sx(x)) + "\" cy=\"" + coord(sy(y)) + "\" r=\"3\"><title>" + run + ": step " +
             tick_label(x) + ", " + html_escape(plot.key) + " " + short_number(y) + "</title></circle>\n";
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

const nlohmann::json* last_entry_with(const nlohmann::json& history, const std::string& key) {
  const nlohmann::json* found = nullptr;
  for (const auto& e : history)
    if (e.is_object() && e.contains(key) && e[key].is_number()) found = &e;
  return found;
}

std::string cell(const nlohmann::json* entry, const std::string& key) {
  if (!entry) return "<td>&ndash;</td>";
  const auto& v = (*entry)[key];
  if (key.find("_runtime") != std::string::npos) return "<td>" + secs_to_timedelta(v.get<double>()) + "</td>";
  return "<td>" + (v.is_number_float() ? short_number(v.get<double>()) : v.dump()) + "</td>";
}

std::string summary_table(const std::vector<RunHistory>& runs) {
  std::string t =
      "<table class=\"summary\">\n<tr><th>run</th><th>directory</th><th>steps</th><th>epochs</th><th>last loss</th>"
      "<th>train_loss</th><th>last eval_loss</th><th>best metric</th><th>train_runtime</th></tr>\n";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto& st = runs[r].state;
    const auto history = st.value("log_history", nlohmann::json::array());
    t += "<tr><td><span class=\"swatch\" style=\"background:" + color(r) + "\"></span>" + html_escape(runs[r].label) +
         "</td><td>" + html_escape(runs[r].source) + "</td>";
    t += "<td>" + (st.contains("global_step") ? st["global_step"].dump() : std::string("&ndash;")) + "</td>";
    t += "<td>" + (st.contains("epoch") && st["epoch"].is_number() ? short_number(st["epoch"].get<double>()) : std::string("&ndash;")) + "</td>";
    t += cell(last_entry_with(history, "loss"), "loss");
    t += cell(last_entry_with(history, "train_loss"), "train_loss");
    t += cell(last_entry_with(history, "eval_loss"), "eval_loss");
    const bool has_best = st.contains("best_metric") && st["best_metric"].is_number();
    const std::string& name = runs[r].best_metric_name;
    t += "<td>" + (has_best ? short_number(st["best_metric"].get<double>()) + (name.empty() ? "" : " (" + html_escape(name) + ")")
                            : std::string("&ndash;")) + "</td>";
    t += cell(last_entry_with(history, "train_runtime"), "train_runtime");
    t += "</tr>\n";
  }
  return t + "</table>\n";
}

const char* kStyle = R"(body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 16px; margin: 20px 0 4px; }
table.summary { border-collapse: collapse; font-size: 13px; }
table.summary th, table.summary td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
table.summary td:nth-child(-n+2), table.summary th:nth-child(-n+2) { text-align: left; }
.swatch { display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; border-radius: 2px; }
.legend { font-size: 13px; margin: 2px 0 4px; }
.legend .item { margin-right: 16px; }
svg.chart { display: block; }
svg.chart .grid line { stroke: #e5e5e5; stroke-width: 1; }
svg.chart .frame { fill: none; stroke: #999; stroke-width: 1; }
svg.chart text { font-size: 11px; fill: #444; }
svg.chart .ytick { text-anchor: end; dominant-baseline: middle; }
svg.chart .xtick, svg.chart .xlabel, svg.chart .ylabel { text-anchor: middle; }
)";

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_report_html(const std::vector<RunHistory>& runs) {
  std::string names;
  for (const auto& r : runs) names += (names.empty() ? "" : ", ") + r.label;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>hftrain report: " +
                     html_escape(names) + "</title>\n<style>\n" + kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>Training report</h1>\n" + summary_table(runs);
  const std::vector<Plot> plots = collect_plots(runs);
  if (plots.empty()) html += "<p>No logged values to plot (log_history is empty).</p>\n";
  for (const auto& plot : plots) {
    html += "<section class=\"plot\" data-plot=\"" + html_escape(plot.key) + "\">\n<h2>" + html_escape(plot.title) + "</h2>\n";
    html += "<div class=\"legend\">";
    for (const auto& s : plot.series)
      html += "<span class=\"item\" data-run=\"" + html_escape(runs[s.run].label) + "\"><span class=\"swatch\" style=\"background:" +
              color(s.run) + "\"></span>" + html_escape(runs[s.run].label) + "</span>";
    html += "</div>\n" + render_chart(plot, runs) + "</section>\n";
  }
  return html + "</body>\n</html>\n";
}

}  // namespace hftrain
