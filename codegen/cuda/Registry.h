// The CUDA kernels libhetc_cuda.so holds, by name: the device interface's Kernel names one and
// the CUDA device launches the entry of that name (each op's .cu defines its entry).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace hetc::codegen::cuda {

struct CudaKernelEntry {
  const char *name;
  cudaError_t (*launch)(cudaStream_t stream, const void *args);
};

// Every entry, and how many.
const CudaKernelEntry *const *cudaKernels(size_t &count);

} // namespace hetc::codegen::cuda
