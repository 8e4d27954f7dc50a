// The per-element arithmetic of the row-wise CUDA kernels (RowKernels.cu), in one header the host
// compiles too, so the CPU's tests hold it to the portable CPU kernels (codegen/cpu/vector):
// RoPE's rotation, the activations, the soft-cap and the first-maximum rule. On the device the
// math functions are CUDA's (expf, erff, tanhf, sincosf: within 2 ulp), on the host the C++
// library's.
#pragma once

#include "codegen/cuda/linear/GemvBf16Layout.h" // HETC_HOST_DEVICE

#include <cmath>
#include <cstdint>

namespace hetc::codegen::cuda {

// kernels::ActivationFunction's values.
enum class RowActivation : uint8_t { Relu = 0, Gelu = 1, GeluTanh = 2, Silu = 3, ReluSquared = 4 };

HETC_HOST_DEVICE inline float rowActivation(uint8_t function, float x) {
  switch (static_cast<RowActivation>(function)) {
  case RowActivation::Relu:
    return x > 0.0f ? x : 0.0f; // NaN gives 0, as the CPU's
  case RowActivation::Gelu:
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  case RowActivation::GeluTanh: {
    const float inner = 0.7978845608028654f * (x + 0.044715f * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
  }
  case RowActivation::Silu:
    return x / (1.0f + expf(-x));
  case RowActivation::ReluSquared: {
    const float r = x > 0.0f ? x : 0.0f;
    return r * r;
  }
  }
  return x;
}

// The pair (first, second) of one head rotated by the angle whose cosine and sine are c and s.
HETC_HOST_DEVICE inline void ropeRotate(float &first, float &second, float c, float s) {
  const float a = first, b = second;
  first = a * c - b * s;
  second = b * c + a * s;
}

HETC_HOST_DEVICE inline float softCapOf(float cap, float x) { return tanhf(x / cap) * cap; }

// Whether (value, index) comes before (bestValue, bestIndex) as the first maximum: larger, or
// equal and earlier (torch.argmax's rule).
HETC_HOST_DEVICE inline bool beforeInArgmax(float value, uint32_t index, float bestValue,
                                            uint32_t bestIndex) {
  return value > bestValue || (value == bestValue && index < bestIndex);
}

} // namespace hetc::codegen::cuda
