#include "codegen/cuda/Registry.h"

namespace hetc::codegen::cuda {

extern const CudaKernelEntry kGemvBf16Entry;

const CudaKernelEntry *const *cudaKernels(size_t &count) {
  static const CudaKernelEntry *const kEntries[] = {&kGemvBf16Entry};
  count = sizeof kEntries / sizeof kEntries[0];
  return kEntries;
}

} // namespace hetc::codegen::cuda
