// The plot of a `hetc bench` sweep: time per token against context, one series per batch size,
// written as a standalone SVG file (no library: lines, markers and text drawn by hand).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hetc::tool {

using PlotPoint = std::pair<double, double>; // (x, y) in data units

struct PlotSeries {
  std::string name;                 // "batch 1"
  std::string label;                // legend text; lines separated by '\n'
  std::vector<PlotPoint> measured;  // filled markers
  std::vector<PlotPoint> fit;       // a polyline (the fitted model); empty: none
  std::vector<PlotPoint> reference; // hollow squares on a dashed line (PyTorch); may be empty
};

struct SweepPlot {
  std::string title;
  std::string subtitle;
  std::string xLabel;
  std::string yLabel;
  std::vector<PlotSeries> series;
};

// The SVG document. Each series is one <g class="series"> holding a <circle class="measured">
// per measured point, a <polyline class="fit"> when it has a fit and a <rect class="reference">
// per reference point; axes start at 0 and end past the largest value, on round ticks (powers
// of two times 1024 on the x axis once it reaches 2048, so that contexts like 16384 fall on
// them).
std::string renderSweepPlotSvg(const SweepPlot &plot);

} // namespace hetc::tool
