// eLLM's decode latency model (002_17e56388e1895ba0.txt, section 7.1), fitted to measured steps.
//
//   t(p) = e + (p + 1) / 2 * a
//
// t is the mean time of a token over a sequence of p positions decoded from empty, e the part that
// does not depend on the context (every weight read once: linears, norms, lm_head) and a the
// attention time per attended position. Token k of such a sequence (1-based) attends k positions,
// so its tokens attend (p + 1) / 2 positions on average, and the model is linear in that mean:
// any set of steps whose sequences attend A positions on average costs t at p = 2A - 1. A
// benchmark's steps at positions context .. context + gen - 1 (0-based, each attending its own
// position and every one before it) attend A = context + (gen + 1) / 2, so p = 2 context + gen.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <vector>

namespace hetc {

// The p of steps that attend `averageAttended` positions on average: 2 * averageAttended - 1.
double ellmSequenceLength(double averageAttended);

struct LatencySample {
  double p = 0.0;  // sequence length, as above
  double ms = 0.0; // measured time per step
};

struct LatencyFit {
  double e = 0.0; // ms, the intercept
  double a = 0.0; // ms per attended position
  // Per sample, in the order given: the model's t(p), and (measured - fitted) / measured.
  std::vector<double> fittedMs;
  std::vector<double> relativeResiduals;
  double maxAbsRelativeResidual = 0.0;

  double at(double p) const { return e + (p + 1.0) / 2.0 * a; }
};

// Least squares of the relative residuals (measured - fitted) / measured, i.e. of the samples' ms
// on (p + 1) / 2 with weights 1 / ms^2: the target is a relative one (the model explains every
// point within a few percent), and an unweighted fit would let the longest contexts decide. Fails,
// naming the reason, on fewer than two samples, on samples that all share one p (e and a are then
// not determined), and on a time that is not a positive finite number. Two samples at different p
// fit exactly.
Result<LatencyFit> fitLatencyModel(const std::vector<LatencySample> &samples);

} // namespace hetc
