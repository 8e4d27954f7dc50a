#include "SweepPlot.h"
#include "../PrintfString.h"

#include <algorithm>
#include <cmath>

namespace hetc::tool {
namespace {

using hetc::tools::format;

// Canvas and plot area in SVG user units; the legend sits right of the plot area.
constexpr double kWidth = 1060, kHeight = 560;
constexpr double kLeft = 80, kTop = 72, kRight = 640, kBottom = 480;
constexpr double kLegendX = 660;
constexpr int kTargetTicks = 6;

// Colour-blind-safe (Okabe-Ito), in order of the series.
constexpr const char *kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

struct Axis {
  double end = 1.0;  // the axis runs from 0 to end
  double step = 1.0; // between ticks
  bool kilo = false; // labels in units of 1024 ("16K")

  std::string label(double value) const {
    if (kilo)
      return value == 0 ? "0" : format("%.0fK", value / 1024.0);
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    return format("%.*f", decimals, value);
  }
};

// 1, 2 or 5 times a power of ten, giving about kTargetTicks ticks up to `maximum`.
Axis decimalAxis(double maximum) {
  Axis axis;
  const double raw = maximum / kTargetTicks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normal = raw / magnitude;
  axis.step = (normal <= 1 ? 1 : normal <= 2 ? 2 : normal <= 5 ? 5 : 10) * magnitude;
  axis.end = std::ceil(maximum / axis.step - 1e-9) * axis.step;
  return axis;
}

// Contexts are usually powers of two: ticks at 1024 * 2^j, at most 8 of them.
Axis contextAxis(double maximum) {
  if (maximum < 2048)
    return decimalAxis(maximum);
  Axis axis;
  axis.kilo = true;
  axis.step = 1024;
  while (maximum / axis.step > 8)
    axis.step *= 2;
  axis.end = std::ceil(maximum / axis.step - 1e-9) * axis.step;
  return axis;
}

} // namespace

std::string renderSweepPlotSvg(const SweepPlot &plot) {
  double xMax = 0, yMax = 0;
  for (const PlotSeries &series : plot.series)
    for (const auto *points : {&series.measured, &series.fit, &series.reference})
      for (const PlotPoint &p : *points) {
        xMax = std::max(xMax, p.first);
        yMax = std::max(yMax, p.second);
      }
  const Axis xAxis = contextAxis(xMax > 0 ? xMax : 1.0);
  const Axis yAxis = decimalAxis(yMax > 0 ? yMax * 1.05 : 1.0);
  auto px = [&](double x) { return kLeft + x / xAxis.end * (kRight - kLeft); };
  auto py = [&](double y) { return kBottom - y / yAxis.end * (kBottom - kTop); };

  std::string svg;
  svg += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"13\">\n",
                kWidth, kHeight, kWidth, kHeight);
  svg += format("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", kWidth,
                kHeight);
  svg += format("<clipPath id=\"plot-area\"><rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" "
                "height=\"%.0f\"/></clipPath>\n",
                kLeft, kTop, kRight - kLeft, kBottom - kTop);
  svg += "<text class=\"title\" x=\"" + format("%.0f", kWidth / 2) +
         "\" y=\"26\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">" +
         escape(plot.title) + "</text>\n";
  svg += "<text class=\"subtitle\" x=\"" + format("%.0f", kWidth / 2) +
         "\" y=\"50\" text-anchor=\"middle\" font-size=\"13\" fill=\"#333\">" +
         escape(plot.subtitle) + "</text>\n";

  // Grid, ticks and tick labels, then the axes over them.
  svg += "<g class=\"x-axis\">\n";
  for (double x = 0; x <= xAxis.end * (1 + 1e-9); x += xAxis.step) {
    svg += format("<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>",
                  px(x), kTop, px(x), kBottom);
    svg += format("<line x1=\"%.2f\" y1=\"%.0f\" x2=\"%.2f\" y2=\"%.0f\" stroke=\"black\"/>", px(x),
                  kBottom, px(x), kBottom + 5);
    svg += format("<text class=\"tick\" x=\"%.2f\" y=\"%.0f\" text-anchor=\"middle\">", px(x),
                  kBottom + 20) +
           escape(xAxis.label(x)) + "</text>\n";
  }
  svg += format("<text class=\"label\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">",
                (kLeft + kRight) / 2, kBottom + 46) +
         escape(plot.xLabel) + "</text>\n</g>\n";
  svg += "<g class=\"y-axis\">\n";
  for (double y = 0; y <= yAxis.end * (1 + 1e-9); y += yAxis.step) {
    svg += format("<line x1=\"%.0f\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"#e4e4e4\"/>",
                  kLeft, py(y), kRight, py(y));
    svg += format("<line x1=\"%.0f\" y1=\"%.2f\" x2=\"%.0f\" y2=\"%.2f\" stroke=\"black\"/>",
                  kLeft - 5, py(y), kLeft, py(y));
    svg += format("<text class=\"tick\" x=\"%.0f\" y=\"%.2f\" text-anchor=\"end\">", kLeft - 8,
                  py(y) + 4) +
           escape(yAxis.label(y)) + "</text>\n";
  }
  svg += format("<text class=\"label\" transform=\"translate(%.0f %.0f) rotate(-90)\" "
                "text-anchor=\"middle\">",
                kLeft - 58, (kTop + kBottom) / 2) +
         escape(plot.yLabel) + "</text>\n</g>\n";
  svg += format("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
                "stroke=\"black\"/>\n",
                kLeft, kTop, kRight - kLeft, kBottom - kTop);

  double legendY = kTop + 8;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries &series = plot.series[i];
    const char *colour = kColours[i % (sizeof(kColours) / sizeof(kColours[0]))];
    svg += "<g class=\"series\">\n";
    if (series.fit.size() >= 2) {
      std::string points;
      for (const PlotPoint &p : series.fit)
        points += format("%s%.2f,%.2f", points.empty() ? "" : " ", px(p.first), py(p.second));
      svg += format("<polyline class=\"fit\" points=\"%s\" fill=\"none\" stroke=\"%s\" "
                    "stroke-width=\"1.5\" clip-path=\"url(#plot-area)\"/>\n",
                    points.c_str(), colour);
    }
    if (series.reference.size() >= 2) {
      std::string points;
      for (const PlotPoint &p : series.reference)
        points += format("%s%.2f,%.2f", points.empty() ? "" : " ", px(p.first), py(p.second));
      svg += format("<polyline class=\"reference-line\" points=\"%s\" fill=\"none\" "
                    "stroke=\"%s\" stroke-width=\"1\" stroke-dasharray=\"5,4\"/>\n",
                    points.c_str(), colour);
    }
    for (const PlotPoint &p : series.reference)
      svg += format("<rect class=\"reference\" x=\"%.2f\" y=\"%.2f\" width=\"8\" height=\"8\" "
                    "fill=\"white\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                    px(p.first) - 4, py(p.second) - 4, colour);
    for (const PlotPoint &p : series.measured)
      svg += format("<circle class=\"measured\" cx=\"%.2f\" cy=\"%.2f\" r=\"4.5\" fill=\"%s\"/>\n",
                    px(p.first), py(p.second), colour);

    // Legend: a marker on a short line, then the label.
    svg += format("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                  "stroke-width=\"1.5\"/>",
                  kLegendX, legendY, kLegendX + 24, legendY, colour);
    svg += format("<circle cx=\"%.0f\" cy=\"%.0f\" r=\"4.5\" fill=\"%s\"/>", kLegendX + 12, legendY,
                  colour);
    size_t lineStart = 0;
    do {
      const size_t lineEnd = series.label.find('\n', lineStart);
      svg += format("<text class=\"legend\" x=\"%.0f\" y=\"%.0f\" font-size=\"12\">", kLegendX + 32,
                    legendY + 4) +
             escape(series.label.substr(lineStart, lineEnd - lineStart)) + "</text>\n";
      legendY += 16;
      lineStart = lineEnd == std::string::npos ? lineEnd : lineEnd + 1;
    } while (lineStart != std::string::npos);
    legendY += 6;
    if (!series.reference.empty()) {
      svg += format("<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                    "stroke-dasharray=\"5,4\"/>",
                    kLegendX, legendY, kLegendX + 24, legendY, colour);
      svg += format("<rect x=\"%.0f\" y=\"%.0f\" width=\"8\" height=\"8\" fill=\"white\" "
                    "stroke=\"%s\" stroke-width=\"1.5\"/>",
                    kLegendX + 8, legendY - 4, colour);
      svg += format("<text class=\"legend\" x=\"%.0f\" y=\"%.0f\" font-size=\"12\">", kLegendX + 32,
                    legendY + 4) +
             escape("PyTorch, " + series.name) + "</text>\n";
      legendY += 22;
    }
    svg += "</g>\n";
  }
  const bool anyReference =
      std::any_of(plot.series.begin(), plot.series.end(),
                  [](const PlotSeries &series) { return !series.reference.empty(); });
  svg += format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#555\">dots: measured; "
                "solid lines: fitted model%s</text>\n",
                kLegendX, legendY + 8, anyReference ? "; squares: PyTorch" : "");
  svg += "</svg>\n";
  return svg;
}

} // namespace hetc::tool
