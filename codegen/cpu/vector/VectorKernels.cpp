#include "codegen/cpu/vector/VectorKernels.h"

#include "hplan_generated.h"

namespace hetc::kernels {

const VectorKernels &portableVectorKernels() {
  static const VectorKernels kernels = {
      "portable-f32",
      "portable-f32, bf16 kv blocks",
      "portable-f32, int8 kv blocks",
      &embedding,
      &rmsNorm,
      &layerNorm,
      &rope,
      &gated,
      &activation,
      &add,
      kAttentionChunkPortable,
  };
  return kernels;
}

const VectorKernels &vectorKernelsFor(uint64_t cpuFeatures) {
  const uint64_t avx512 = static_cast<uint64_t>(plan::CpuFeatureBits::AVX512F) |
                          static_cast<uint64_t>(plan::CpuFeatureBits::AVX512BW);
  const uint64_t avx512Bf16 = avx512 | static_cast<uint64_t>(plan::CpuFeatureBits::AVX512_BF16) |
                              static_cast<uint64_t>(plan::CpuFeatureBits::AVX512_VNNI);
  if ((cpuFeatures & avx512Bf16) == avx512Bf16 && avx512Bf16VectorKernels())
    return *avx512Bf16VectorKernels();
  if ((cpuFeatures & avx512) == avx512 && avx512VectorKernels())
    return *avx512VectorKernels();
  return portableVectorKernels();
}

} // namespace hetc::kernels
