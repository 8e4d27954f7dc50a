#include "tools/report/LatencyModel.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hetc {

double ellmSequenceLength(double averageAttended) { return 2.0 * averageAttended - 1.0; }

Result<LatencyFit> fitLatencyModel(const std::vector<LatencySample> &samples) {
  if (samples.size() < 2)
    return Status::error("the latency fit needs at least two points, got " +
                         std::to_string(samples.size()));
  for (const LatencySample &s : samples)
    if (!std::isfinite(s.p) || !std::isfinite(s.ms) || s.ms <= 0.0)
      return Status::error("the latency fit needs positive finite times and finite p");

  // Least squares of the relative residuals (t - e - x a) / t: weights 1 / t^2, so a point at a
  // short context counts as much as one at a long context, whose milliseconds are many times
  // larger. Centred weighted sums: x reaches 1e6 and more, t a few ms, so the raw normal
  // equations would cancel.
  double weightSum = 0.0, meanX = 0.0, meanT = 0.0;
  for (const LatencySample &s : samples) {
    const double w = 1.0 / (s.ms * s.ms);
    weightSum += w;
    meanX += w * (s.p + 1.0) / 2.0;
    meanT += w * s.ms;
  }
  meanX /= weightSum;
  meanT /= weightSum;
  double sxx = 0.0, sxt = 0.0, sxxUnweighted = 0.0;
  for (const LatencySample &s : samples) {
    const double w = 1.0 / (s.ms * s.ms);
    const double dx = (s.p + 1.0) / 2.0 - meanX;
    sxx += w * dx * dx;
    sxt += w * dx * (s.ms - meanT);
    sxxUnweighted += dx * dx;
  }
  const double n = static_cast<double>(samples.size());
  // Every x equal to the mean up to rounding: one context only.
  if (sxxUnweighted <= 1e-12 * std::max(1.0, meanX * meanX) * n)
    return Status::error("the latency fit needs points at two different contexts at least (every "
                         "point has p = " +
                         std::to_string(static_cast<long long>(std::llround(samples[0].p))) + ")");

  LatencyFit fit;
  fit.a = sxt / sxx;
  fit.e = meanT - fit.a * meanX;
  for (const LatencySample &s : samples) {
    const double fitted = fit.at(s.p);
    const double residual = (s.ms - fitted) / s.ms;
    fit.fittedMs.push_back(fitted);
    fit.relativeResiduals.push_back(residual);
    fit.maxAbsRelativeResidual = std::max(fit.maxAbsRelativeResidual, std::abs(residual));
  }
  return fit;
}

} // namespace hetc
