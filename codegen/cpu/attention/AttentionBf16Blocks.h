// The AVX-512 chunk kernels over the blocks of 16 positions of a bf16 or int8 cache
// (kvBlockKeyIndex, kvBlockValueIndex): written once in AttentionBf16Blocks.inl, built twice. Over
// bf16, with vdpbf16ps where the host has AVX-512 BF16 and with its products done by two float32
// multiply-adds where it has only AVX-512 F and BW; both compute the arithmetic of the portable
// bf16 kernel (query and weights rounded to bf16, exact products, float32 sums), in their own
// order of sums; where vdpbf16ps runs, a subnormal bf16 operand (a weight below 2^-126) counts as
// zero. Over int8, the integer arithmetic of Attention.h, with vpdpwssd in the build for AVX-512
// BF16 (which needs AVX-512 VNNI too) and vpmaddwd in the other: the same integers.
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
