// The activation functions of a feed-forward or its gate in double, the reference the kernel and
// engine tests compare against.
#pragma once

#include "codegen/cpu/vector/Kernels.h"

#include <cmath>

namespace hetc::test {

inline double activationReference(kernels::ActivationFunction function, double x) {
  switch (function) {
  case kernels::ActivationFunction::Relu:
    return x > 0 ? x : 0;
  case kernels::ActivationFunction::Gelu:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case kernels::ActivationFunction::GeluTanh:
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case kernels::ActivationFunction::Silu:
    return x / (1 + std::exp(-x));
  case kernels::ActivationFunction::ReluSquared:
    return x > 0 ? x * x : 0;
  }
  return NAN;
}

} // namespace hetc::test
