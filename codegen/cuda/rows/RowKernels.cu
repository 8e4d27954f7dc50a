// The row-wise kernels on CUDA (RowArgs.h): RmsNorm and LayerNorm, RoPE, the elementwise ops, the
// lm_head's row gather and its logits finish (bias, soft-cap, rows or first argmax). A grid covers
// the most rows a step has (maxRows, fixed when a graph is captured); each block reads the step's
// row count from device memory and leaves at once past it. The per-element arithmetic is
// RowMath.h's; the norms' sums are in double as the CPU's, in a tree order of their own, so their
// bits may differ from the CPU's in the last place.
#include "codegen/cuda/Registry.h"
#include "codegen/cuda/rows/RowArgs.h"
#include "codegen/cuda/rows/RowMath.h"

namespace hetc::codegen::cuda {
namespace {

constexpr int kThreads = 256;

// The sum of every thread's `value` in the block, returned to all of them.
__device__ double blockSum(double value) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  const double total = partial[0];
  __syncthreads(); // before the next call writes partial
  return total;
}

__global__ void normKernel(NormArgs a) {
  const uint64_t row = blockIdx.x;
  if (row >= *a.rows)
    return;
  const float *x = a.x + row * a.xStride;
  float *y = a.y + row * a.yStride;
  for (uint64_t g = 0; g < a.cols; g += a.group) {
    const uint64_t n = a.rms ? a.group : a.cols;
    const float *xg = a.rms ? x + g : x;
    float *yg = a.rms ? y + g : y;
    if (a.rms) {
      double squares = 0;
      for (uint64_t i = threadIdx.x; i < n; i += kThreads) {
        const float square = xg[i] * xg[i];
        squares += square;
      }
      const float variance = static_cast<float>(blockSum(squares) / static_cast<double>(n));
      const float inverseRms = 1.0f / sqrtf(variance + a.eps);
      for (uint64_t i = threadIdx.x; i < n; i += kThreads)
        yg[i] = a.gamma[i] * (xg[i] * inverseRms);
      continue;
    }
    double sum = 0;
    for (uint64_t i = threadIdx.x; i < n; i += kThreads)
      sum += xg[i];
    const double mean = blockSum(sum) / static_cast<double>(n);
    double squares = 0;
    for (uint64_t i = threadIdx.x; i < n; i += kThreads) {
      const double d = xg[i] - mean;
      squares += d * d;
    }
    const double variance = blockSum(squares) / static_cast<double>(n);
    const float meanF = static_cast<float>(mean);
    const float inverseDeviation = static_cast<float>(1.0 / sqrt(variance + a.eps));
    for (uint64_t i = threadIdx.x; i < n; i += kThreads) {
      const float scaled = a.gamma[i] * ((xg[i] - meanF) * inverseDeviation);
      yg[i] = a.beta ? scaled + a.beta[i] : scaled;
    }
    break; // a LayerNorm is one norm over the row
  }
}

__global__ void ropeKernel(RopeArgs a) {
  const uint64_t row = blockIdx.x;
  if (row >= *a.rows)
    return;
  float *x = a.x + row * a.xStride;
  const float position = static_cast<float>(a.positions[row]);
  const uint64_t half = a.rotaryDim / 2;
  for (uint64_t item = threadIdx.x; item < half * a.heads; item += kThreads) {
    const uint64_t i = item % half, h = item / half;
    const float angle = position * a.invFreq[i];
    const float c = cosf(angle), s = sinf(angle);
    float *xh = x + h * a.headDim;
    const uint64_t first = a.interleaved ? 2 * i : i;
    const uint64_t second = a.interleaved ? 2 * i + 1 : i + half;
    ropeRotate(xh[first], xh[second], c, s);
  }
}

__global__ void elementwiseKernel(ElementwiseArgs a) {
  const uint64_t row = blockIdx.y;
  if (row >= *a.rows)
    return;
  const uint64_t col = uint64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (col >= a.cols)
    return;
  const float x = a.a[row * a.aStride + col];
  float &y = a.y[row * a.yStride + col];
  switch (a.kind) {
  case ElementwiseKind::Add:
    y = x + a.b[row * a.bStride + col];
    return;
  case ElementwiseKind::Gated:
    y = rowActivation(a.function, x) * a.b[row * a.bStride + col];
    return;
  case ElementwiseKind::Activation:
    y = rowActivation(a.function, x);
    return;
  }
}

__global__ void gatherRowsKernel(GatherRowsArgs a) {
  const uint64_t i = blockIdx.x;
  if (i >= *a.count)
    return;
  const float *x = a.x + a.sourceRows[i] * a.xStride;
  for (uint64_t c = threadIdx.x; c < a.cols; c += kThreads)
    a.y[i * a.yStride + c] = x[c];
}

__global__ void logitsKernel(LogitsArgs a) {
  const uint64_t i = blockIdx.x;
  if (i >= *a.count)
    return;
  float *row = a.logits + i * a.logitsStride;
  const bool argmax = *a.argmaxStep != 0;
  float *out = a.out + a.outputRows[i] * a.outStride;
  float bestValue = -INFINITY;
  uint32_t bestIndex = UINT32_MAX;
  for (uint64_t c = threadIdx.x; c < a.vocab; c += kThreads) {
    float v = row[c];
    if (a.bias)
      v = v + a.bias[c];
    if (a.softcap > 0)
      v = softCapOf(a.softcap, v);
    if (!argmax)
      out[c] = v;
    else if (beforeInArgmax(v, static_cast<uint32_t>(c), bestValue, bestIndex))
      bestValue = v, bestIndex = static_cast<uint32_t>(c);
  }
  if (!argmax)
    return;
  __shared__ float values[kThreads];
  __shared__ uint32_t indices[kThreads];
  values[threadIdx.x] = bestValue;
  indices[threadIdx.x] = bestIndex;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width &&
        beforeInArgmax(values[threadIdx.x + width], indices[threadIdx.x + width],
                       values[threadIdx.x], indices[threadIdx.x])) {
      values[threadIdx.x] = values[threadIdx.x + width];
      indices[threadIdx.x] = indices[threadIdx.x + width];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    a.argmax[a.outputRows[i]] = static_cast<int32_t>(indices[0]);
}

unsigned gridOf(uint64_t count) { return static_cast<unsigned>(count == 0 ? 1 : count); }

cudaError_t launchNorm(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const NormArgs *>(args);
  normKernel<<<gridOf(a.maxRows), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launchRope(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const RopeArgs *>(args);
  ropeKernel<<<gridOf(a.maxRows), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launchElementwise(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const ElementwiseArgs *>(args);
  const dim3 grid(static_cast<unsigned>((a.cols + kThreads - 1) / kThreads), gridOf(a.maxRows));
  elementwiseKernel<<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launchGatherRows(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const GatherRowsArgs *>(args);
  gatherRowsKernel<<<gridOf(a.maxCount), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launchLogits(cudaStream_t stream, const void *args) {
  const auto &a = *static_cast<const LogitsArgs *>(args);
  logitsKernel<<<gridOf(a.maxBatch), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

extern const CudaKernelEntry kNormEntry{"Norm", launchNorm};
extern const CudaKernelEntry kRopeEntry{"Rope", launchRope};
extern const CudaKernelEntry kElementwiseEntry{"Elementwise", launchElementwise};
extern const CudaKernelEntry kGatherRowsEntry{"GatherRows", launchGatherRows};
extern const CudaKernelEntry kLogitsEntry{"Logits", launchLogits};

} // namespace hetc::codegen::cuda
