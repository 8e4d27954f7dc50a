#include "codegen/cpu/vector/VectorKernels.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/isa/Implementations.h"

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
  using codegen::Implementation;
  // The sets name themselves (VectorKernels::name), as the labels of their kernels.
  static const Implementation<const VectorKernels *> kSets[] = {
      {"avx512-bf16",
       codegen::kCpuAvx512F | codegen::kCpuAvx512BW | codegen::kCpuAvx512Bf16 |
           codegen::kCpuAvx512Vnni,
       avx512Bf16VectorKernels()},
      {"avx512-f32", codegen::kCpuAvx512F | codegen::kCpuAvx512BW, avx512VectorKernels()},
      {"portable-f32", 0, &portableVectorKernels()},
  };
  return *codegen::pickImplementation(kSets, cpuFeatures).kernel;
}

} // namespace hetc::kernels
