// The AVX-512 BF16 linear micro-kernel: `rows` (1..16) activation rows times `blocks` (1..4)
// consecutive 16-column blocks of a LinearBf16N16K2 weight, over the whole K, with vdpbf16ps.
//
// Registers: rows x blocks f32 accumulators (at most 28: zmm0..27) and one weight line per block
// (zmm28..31). Per K pair, each block's 64-byte line is loaded once and multiplied by every row's
// (x[2p], x[2p+1]) pair, broadcast straight from memory ({1to16}) out of the one 64-byte line
// that holds that K pair of all 16 rows (Bf16Rows); the weight streams are read once per call,
// whatever the row count. A software prefetch per stream runs `prefetchBytes`
// ahead. The epilogue adds the residual (when generated with one) and stores, masking the last
// block's columns.
#pragma once

#include "codegen/cpu/isa/JitGenerator.h"

#include <cstddef>
#include <cstdint>

namespace hetc::codegen {

// Read by the generated code through offsetof: keep it standard-layout.
struct LinearAvx512Bf16Args {
  const uint32_t *x;            // the group of 16 Bf16Rows rows holding the call's rows
  const uint16_t *w;            // panel of the first of the call's blocks
  float *const *y;              // [rows] output row pointers (column 0 of each row)
  const float *const *residual; // [rows] residual row pointers, or unused
  uint64_t column;              // first output column of the call (a multiple of 16)
  uint64_t lastMask;            // bit c: column c of the last block is stored
};

class LinearAvx512Bf16 : public JitGenerator {
public:
  struct Shape {
    uint32_t rows = 1;   // 1..16
    uint32_t blocks = 1; // 1..4, rows * blocks <= kMaxAccumulators
    uint64_t kPairs = 1; // ceil(K / 2)
    bool residual = false;
    uint32_t prefetchBytes = 0; // 0: no software prefetch
  };
  static constexpr uint32_t kMaxRows = 16;
  static constexpr uint32_t kMaxBlocks = 4;
  static constexpr uint32_t kMaxAccumulators = 28;
  // Default software prefetch distance along each weight stream (see README, kernels).
  static constexpr uint32_t kDefaultPrefetchBytes = 2048;

  using Function = void (*)(const LinearAvx512Bf16Args *);

  explicit LinearAvx512Bf16(const Shape &shape);
  const Shape &shape() const { return shape_; }

  // Blocks per call for `rows` rows: as many as the accumulators allow, up to kMaxBlocks.
  static uint32_t blocksFor(uint32_t rows);

protected:
  void generate() override;

private:
  Shape shape_;
};

} // namespace hetc::codegen
