#include "codegen/cuda/Registry.h"

namespace hetc::codegen::cuda {

extern const CudaKernelEntry kGemvBf16Entry;
extern const CudaKernelEntry kGemvInt8Entry;
extern const CudaKernelEntry kNormEntry;
extern const CudaKernelEntry kRopeEntry;
extern const CudaKernelEntry kElementwiseEntry;
extern const CudaKernelEntry kGatherRowsEntry;
extern const CudaKernelEntry kLogitsEntry;

const CudaKernelEntry *const *cudaKernels(size_t &count) {
  static const CudaKernelEntry *const kEntries[] = {
      &kGemvBf16Entry,    &kGemvInt8Entry,       &kNormEntry,  &kRopeEntry,
      &kElementwiseEntry, &kGatherRowsEntry, &kLogitsEntry};
  count = sizeof kEntries / sizeof kEntries[0];
  return kEntries;
}

} // namespace hetc::codegen::cuda
