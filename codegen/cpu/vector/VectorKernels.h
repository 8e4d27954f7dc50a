// The row-wise kernels and the attention chunk kernel of one instruction set, picked once when
// an engine is created from the host's features. Every set computes what the portable kernels in
// Kernels.h compute:
//   - embedding, add, rmsNorm, layerNorm, rope and ReLU give the same bits on every set (same
//     operations in the same order; the runtime is built with -ffp-contract=off so no
//     multiply-add is fused);
//   - gated, the SiLU and GELU activations and attentionChunk use a vector exp (within 2 ulp of
//     std::exp; GELU's erf form a polynomial within 1.5e-7), so their bits differ between sets
//     but, within one set, never depend on threads or splits.
#pragma once

#include "codegen/cpu/attention/Attention.h"
#include "codegen/cpu/vector/Kernels.h"

#include <cstdint>

namespace hetc::kernels {

using EmbeddingKernel = decltype(&embedding);
using RmsNormKernel = decltype(&rmsNorm);
using RopeKernel = decltype(&rope);
using GatedKernel = decltype(&gated);
using AddKernel = decltype(&add);
using LayerNormKernel = decltype(&layerNorm);
using ActivationKernel = decltype(&activation);

struct VectorKernels {
  const char *name; // "avx512-bf16", "avx512-f32" or "portable-f32", as reports name a kernel
  // The attention's name over a BF16 KV cache ("avx512-bf16, bf16 kv blocks (vdpbf16ps)") and
  // over an INT8 one ("avx512-bf16, int8 kv").
  const char *bf16KvName;
  const char *int8KvName;
  EmbeddingKernel embedding;
  RmsNormKernel rmsNorm;
  LayerNormKernel layerNorm;
  RopeKernel rope;
  GatedKernel gated;
  ActivationKernel activation;
  AddKernel add;
  AttentionChunkKernel attentionChunk;
};

// Plain C++ for any host.
const VectorKernels &portableVectorKernels();

// AVX-512 (F and BW) intrinsics; null in a build for a CPU family without them. Call only on a
// host that has both (see vectorKernelsFor).
const VectorKernels *avx512VectorKernels();

// The same, with the attention over a bf16 KV cache on vdpbf16ps and over an int8 one on
// vpdpwssd: for hosts that also have AVX-512 BF16 and VNNI (every CPU with the first has the
// second).
const VectorKernels *avx512Bf16VectorKernels();

// The fastest set the host runs: AVX-512 BF16 when `cpuFeatures` (plan::CpuFeatureBits, as
// hostCpuFeatures() returns) has avx512f, avx512bw, avx512_bf16 and avx512_vnni, AVX-512 with the
// first two, else the portable set.
const VectorKernels &vectorKernelsFor(uint64_t cpuFeatures);

} // namespace hetc::kernels
