// eLLM's latency model t = e + (p+1)/2 * a fitted by least squares: exact data gives e and a
// back, noisy data satisfies the normal equations, and inputs that cannot determine both are
// refused with the reason.
#include "tools/report/LatencyModel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace hetc {
namespace {

constexpr double kE = 12.5;   // ms
constexpr double kA = 3.2e-4; // ms per position

std::vector<LatencySample> samplesAt(const std::vector<double> &ps,
                                     const std::vector<double> &factors) {
  std::vector<LatencySample> samples;
  for (size_t i = 0; i < ps.size(); ++i)
    samples.push_back({ps[i], (kE + (ps[i] + 1.0) / 2.0 * kA) * factors[i]});
  return samples;
}

TEST(LatencyModelTest, SequenceLengthOfABenchmarksSteps) {
  // Steps at 0-based positions c .. c+gen-1 attend c + (gen+1)/2 positions on average; a
  // sequence of p = 2c + gen tokens decoded from empty attends as many.
  for (double context : {0.0, 7.0, 4096.0, 131072.0})
    for (double gen : {1.0, 4.0, 16.0}) {
      const double p = ellmSequenceLength(context + (gen + 1.0) / 2.0);
      EXPECT_DOUBLE_EQ(p, 2 * context + gen);
      double attended = 0;
      for (int k = 1; k <= static_cast<int>(p); ++k)
        attended += k;
      EXPECT_DOUBLE_EQ(attended / p, context + (gen + 1.0) / 2.0);
    }
}

TEST(LatencyModelTest, ExactDataGivesEAndABack) {
  const std::vector<double> ps = {16, 8208, 32784, 65552, 131088, 262160};
  Result<LatencyFit> fit = fitLatencyModel(samplesAt(ps, std::vector<double>(ps.size(), 1.0)));
  ASSERT_TRUE(fit.ok()) << fit.message();
  EXPECT_NEAR(fit->e, kE, 1e-9);
  EXPECT_NEAR(fit->a, kA, 1e-13);
  ASSERT_EQ(fit->relativeResiduals.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_NEAR(fit->relativeResiduals[i], 0.0, 1e-12);
    EXPECT_NEAR(fit->fittedMs[i], kE + (ps[i] + 1) / 2 * kA, 1e-9);
  }
  EXPECT_LT(fit->maxAbsRelativeResidual, 1e-12);
  EXPECT_NEAR(fit->at(1e6), kE + (1e6 + 1) / 2 * kA, 1e-9);
}

TEST(LatencyModelTest, NoisyDataIsALeastSquaresFit) {
  const std::vector<double> ps = {16, 8208, 32784, 65552, 131088};
  const std::vector<double> factors = {1.03, 0.98, 1.01, 0.97, 1.02};
  const std::vector<LatencySample> samples = samplesAt(ps, factors);
  Result<LatencyFit> fit = fitLatencyModel(samples);
  ASSERT_TRUE(fit.ok()) << fit.message();
  // The normal equations of least squares of the relative residuals r = (t - fitted) / t in
  // x = (p+1)/2: sum r / t = 0 and sum x r / t = 0.
  double sum = 0, weighted = 0, scale = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double x = (samples[i].p + 1) / 2;
    const double residual = (samples[i].ms - fit->at(samples[i].p)) / samples[i].ms;
    sum += residual / samples[i].ms;
    weighted += x * residual / samples[i].ms;
    scale += x / samples[i].ms;
    EXPECT_NEAR(fit->fittedMs[i], fit->at(samples[i].p), 1e-12);
    EXPECT_NEAR(fit->relativeResiduals[i], residual, 1e-12);
  }
  EXPECT_NEAR(sum, 0.0, 1e-9);
  EXPECT_NEAR(weighted, 0.0, 1e-9 * scale);
  // Any other line fits worse.
  auto squares = [&](double e, double a) {
    double total = 0;
    for (const LatencySample &s : samples)
      total += std::pow((s.ms - (e + (s.p + 1) / 2 * a)) / s.ms, 2);
    return total;
  };
  const double best = squares(fit->e, fit->a);
  for (double de : {-0.01, 0.01})
    for (double da : {-1e-7, 1e-7})
      EXPECT_GT(squares(fit->e + de, fit->a + da), best);
  // 3% noise moves the parameters a little, not a lot.
  EXPECT_NEAR(fit->e, kE, 0.05 * kE);
  EXPECT_NEAR(fit->a, kA, 0.05 * kA);
  double maxResidual = 0;
  for (double r : fit->relativeResiduals)
    maxResidual = std::max(maxResidual, std::abs(r));
  EXPECT_DOUBLE_EQ(fit->maxAbsRelativeResidual, maxResidual);
  EXPECT_GT(fit->maxAbsRelativeResidual, 0.005);
  EXPECT_LT(fit->maxAbsRelativeResidual, 0.05);
}

TEST(LatencyModelTest, TwoPointsFitExactly) {
  Result<LatencyFit> fit = fitLatencyModel({{16, 10.0}, {65552, 30.0}});
  ASSERT_TRUE(fit.ok()) << fit.message();
  EXPECT_NEAR(fit->at(16), 10.0, 1e-9);
  EXPECT_NEAR(fit->at(65552), 30.0, 1e-9);
  EXPECT_NEAR(fit->a, 20.0 / ((65552 - 16) / 2.0), 1e-15);
  EXPECT_LT(fit->maxAbsRelativeResidual, 1e-12);
}

TEST(LatencyModelTest, RefusesWhatCannotDetermineBothParameters) {
  EXPECT_EQ(fitLatencyModel({}).message(), "the latency fit needs at least two points, got 0");
  EXPECT_EQ(fitLatencyModel({{16, 10.0}}).message(),
            "the latency fit needs at least two points, got 1");
  // Several batches' worth of points at one context say nothing about a.
  EXPECT_EQ(fitLatencyModel({{8208, 10.0}, {8208, 11.0}, {8208, 10.5}}).message(),
            "the latency fit needs points at two different contexts at least (every point has "
            "p = 8208)");
  EXPECT_EQ(fitLatencyModel({{16, 10.0}, {8208, 0.0}}).message(),
            "the latency fit needs positive finite times and finite p");
  EXPECT_EQ(fitLatencyModel({{16, 10.0}, {8208, -1.0}}).message(),
            "the latency fit needs positive finite times and finite p");
  EXPECT_EQ(fitLatencyModel({{16, 10.0}, {NAN, 11.0}}).message(),
            "the latency fit needs positive finite times and finite p");
}

} // namespace
} // namespace hetc
