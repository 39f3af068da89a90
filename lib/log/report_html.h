// `hftrain report` output: one self-contained HTML file (inline CSS and SVG, no scripts, no external
// resources) with a summary table of the runs and one line chart per plot of report_plots.h, runs
// overlaid in distinct colours with a legend. Each curve is an SVG <polyline class="series"> carrying
// data-plot, data-run and data-points (its number of points), with a <circle> marker per point.
#pragma once

#include <string>
#include <vector>

#include "log/report_plots.h"

namespace hftrain {

std::string html_escape(const std::string& text);
std::string render_report_html(const std::vector<RunHistory>& runs);

}  // namespace hftrain
