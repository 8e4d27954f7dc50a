// The AVX-512 chunk kernels over the blocks of 16 positions of a bf16 or int8 cache
// (kvBlockKeyIndex, kvBlockValueIndex): written once in AttentionBf16Blocks.inl, built twice, with
// vdpbf16ps where the host has AVX-512 BF16 and with its products done by two float32 multiply-adds
// where it has only AVX-512 F and BW. Both compute the arithmetic of the portable bf16 kernel
// (query and weights rounded to bf16, exact products, float32 sums), in their own order of sums;
// where vdpbf16ps runs, a subnormal bf16 operand (a weight below 2^-126) counts as zero.
#pragma once

#include "codegen/cpu/attention/Attention.h"

namespace hetc::kernels {

// One build's chunk kernels for each element type kept in blocks.
struct AttentionBlockKernels {
  AttentionChunkFn<uint16_t> bf16 = nullptr;
  AttentionChunkFn<int8_t> int8 = nullptr;
};

// Null kernels in a build for a CPU family without AVX-512.
AttentionBlockKernels attentionBlocksAvx512();
AttentionBlockKernels attentionBlocksAvx512Bf16();

} // namespace hetc::kernels
