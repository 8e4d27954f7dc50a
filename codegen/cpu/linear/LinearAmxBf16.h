// The AMX BF16 linear kernel for calls with many rows (prefill, large batches):
//
//   y[r, n] = sum_k x[r, k] * W[n, k]  (+ residual[r, n])
//
// A tiles are 16 activation rows x 16 K pairs read from Bf16RowMajor rows (converted once per
// input, as Bf16Rows are for LinearAvx512Bf16); B tiles are read in place from the packed
// LinearBf16N16K2 weight, whose 16 consecutive 64-byte lines of a block are exactly a B tile
// (16 K pairs x 16 columns in VNNI order, stride 64); C tiles accumulate in f32. The blocking is
// 2 x 2: two A tiles (32 rows) and two B tiles (32 columns) feed four C tiles, so each tile load
// serves two tdpbf16ps. Columns are taken in chunks of at most 512 KiB of weight panels, and the
// rows in blocks of 32 within a chunk, so a chunk's panels stay in L2 and are read from memory
// once per call.
//
// Tails: a block of fewer than 32 rows uses one A tile of `rows` rows or a second one of
// rows - 16; a K that is not a multiple of 32 ends with a step of fewer pairs (A tiles of fewer
// bytes per row, B tiles of fewer rows); the layout pads N to 16, and only columns below colEnd
// are stored. Every configuration (32 row counts x the full and the tail K step) is computed when
// the kernel is made and loaded through loadTileConfig only when it changes. Because ldtilecfg
// zeroes the tiles, the K tail runs as a second pass: the C tiles of the full steps are stored,
// the tail configuration loaded, C reloaded and the tail step added. Tiles are released at the
// end of every call.
//
// Each output element is C = 0, then for each K step in order C += (even + odd) of that step
// (tdpbf16ps), then the residual: the same whatever the rows, the column range or the thread,
// but not the same bits as LinearAvx512Bf16, whose vdpbf16ps adds every pair into one sum.
//
// Why C++ with intrinsics and not xbyak like LinearAvx512Bf16: the kernel is written once as a
// template over a tile-operation policy (AmxTiles.h), instantiated with the real instructions for
// AMX hosts and with EmulatedAmxTiles, a scalar model of the tile registers, everywhere else, so
// the code that runs on AMX is the code the tests run. A JIT's generated instructions could only
// be checked by running them, which needs AMX.
#pragma once

#include "codegen/cpu/isa/Amx.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace hetc::codegen {

// Calls of at least this many rows run on AMX tiles; fewer run LinearAvx512Bf16. At 16 rows
// and below that kernel reads every weight line once per call with all rows in registers; above
// 16 it passes over the weights once per 16 rows, while the tiles take 32 rows per weight load
// and do 8 times the multiply-adds per cycle (a 16x16x32 tdpbf16ps every 16 cycles against two
// 16-wide vdpbf16ps per cycle).
constexpr size_t kAmxMinRows = 17;

// What chooseLinearBf16Kernel names for an AMX host, and the kernel createLinearAmxBf16 makes.
extern const LinearKernelInfo kLinearAmxBf16Info;

// Everything the kernel needs for one K, computed when it is made.
struct LinearAmxBf16Shape {
  static constexpr size_t kPairsPerStep = 16; // K pairs per tile step: 64 bytes of an A row
  static constexpr size_t kRowsPerBlock = 32; // two A tiles
  static constexpr size_t kMaxChunkBlocks = 8;
  static constexpr size_t kL2Budget = 512 * 1024;
  // f32 scratch for one row block of one column chunk (the C tiles are stored there first).
  static constexpr size_t kScratchFloats =
      kRowsPerBlock * kMaxChunkBlocks * LinearBf16N16K2::kBlockColumns;

  size_t k = 0;
  size_t kPairs = 0;
  size_t fullSteps = 0; // steps of 16 pairs
  size_t tailPairs = 0; // pairs of the last, shorter step (0: none)
  size_t aStride = 0;   // bytes between Bf16RowMajor rows
  size_t blockBytes = 0;
  size_t chunkBlocks = 0; // 16-column blocks per column chunk (1..kMaxChunkBlocks)
  bool residual = false;
  // configs[rows - 1][0]: a block of `rows` rows (1..32) with 16-pair steps; [1]: its K tail.
  TileConfig configs[kRowsPerBlock][2];
};

// The configuration for a block of `rows` rows (1..32) and steps of `pairs` K pairs (1..16):
// C(0, *) and A(0) of min(rows, 16) rows, C(1, *) and A(1) of the rest (unconfigured when none),
// A tiles of 4 * pairs bytes per row, B tiles of `pairs` rows of 64 bytes.
TileConfig linearAmxBf16TileConfig(unsigned rows, unsigned pairs);

LinearAmxBf16Shape makeLinearAmxBf16Shape(size_t k, bool residual);

// Stores rows [rowBegin, rowBegin + rows) and columns [colBegin, colEnd) from the scratch the C
// tiles were stored to (row i, column n at scratch[i * scratchStride + n - scratchColumn]), adding
// the residual when the kernel has one.
void storeLinearAmxBf16Rows(const LinearCall &call, bool residual, size_t rowBegin, size_t rows,
                            const float *scratch, size_t scratchStride, size_t scratchColumn,
                            size_t colBegin, size_t colEnd);

namespace detail {

// The K steps [firstStep, firstStep + steps) of one row block and one or two column blocks into
// the C tiles (which hold the block's sums so far). `pairs` of each step are read from A row
// bytes step * 64 and B lines step * 16.
template <bool TwoRows, bool TwoColumns, class Tiles>
void amxSteps(Tiles &tiles, const uint8_t *a, size_t aStride, const uint8_t *b, size_t blockBytes,
              size_t firstStep, size_t steps) {
  constexpr size_t kLine = LinearBf16N16K2::kPairBytes;
  constexpr size_t kStep = LinearAmxBf16Shape::kPairsPerStep;
  for (size_t step = firstStep; step < firstStep + steps; ++step) {
    const uint8_t *aStep = a + step * kStep * 4;
    const uint8_t *bStep = b + step * kStep * kLine;
    tiles.template loadA<0>(aStep, aStride);
    if constexpr (TwoRows)
      tiles.template loadA<1>(aStep + 16 * aStride, aStride);
    tiles.template loadB<0>(bStep, kLine);
    if constexpr (TwoColumns)
      tiles.template loadB<1>(bStep + blockBytes, kLine);
    tiles.template dot<0, 0>();
    if constexpr (TwoColumns)
      tiles.template dot<0, 1>();
    if constexpr (TwoRows)
      tiles.template dot<1, 0>();
    if constexpr (TwoRows && TwoColumns)
      tiles.template dot<1, 1>();
  }
}

// Zeroes (start) or reloads from `c` the C tiles in use, runs the steps, stores them to `c`.
template <bool TwoRows, bool TwoColumns, class Tiles>
void amxPass(Tiles &tiles, bool start, float *c, size_t cStride, const uint8_t *a, size_t aStride,
             const uint8_t *b, size_t blockBytes, size_t firstStep, size_t steps) {
  const size_t stride = cStride * sizeof(float);
  float *c1 = c + 16 * cStride; // the second A tile's rows
  if (start) {
    tiles.template zeroC<0, 0>();
    if constexpr (TwoColumns)
      tiles.template zeroC<0, 1>();
    if constexpr (TwoRows)
      tiles.template zeroC<1, 0>();
    if constexpr (TwoRows && TwoColumns)
      tiles.template zeroC<1, 1>();
  } else {
    tiles.template loadC<0, 0>(c, stride);
    if constexpr (TwoColumns)
      tiles.template loadC<0, 1>(c + 16, stride);
    if constexpr (TwoRows)
      tiles.template loadC<1, 0>(c1, stride);
    if constexpr (TwoRows && TwoColumns)
      tiles.template loadC<1, 1>(c1 + 16, stride);
  }
  amxSteps<TwoRows, TwoColumns>(tiles, a, aStride, b, blockBytes, firstStep, steps);
  tiles.template storeC<0, 0>(c, stride);
  if constexpr (TwoColumns)
    tiles.template storeC<0, 1>(c + 16, stride);
  if constexpr (TwoRows)
    tiles.template storeC<1, 0>(c1, stride);
  if constexpr (TwoRows && TwoColumns)
    tiles.template storeC<1, 1>(c1 + 16, stride);
}

} // namespace detail

// The kernel over any tile policy: rows [0, call.rows) of call.xBf16 (Bf16RowMajor), columns
// [call.colBegin, call.colEnd). `scratch` holds LinearAmxBf16Shape::kScratchFloats floats.
template <class Tiles>
void runLinearAmxBf16(Tiles &tiles, const LinearAmxBf16Shape &shape, const LinearCall &call,
                      float *scratch) {
  using detail::amxPass;
  constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;
  constexpr size_t kRows = LinearAmxBf16Shape::kRowsPerBlock;
  const auto *x = reinterpret_cast<const uint8_t *>(call.xBf16);
  const auto *w = reinterpret_cast<const uint8_t *>(call.w);
  const size_t firstBlock = call.colBegin / kBlock;
  const size_t endBlock = (call.colEnd + kBlock - 1) / kBlock;
  for (size_t chunk = firstBlock; chunk < endBlock; chunk += shape.chunkBlocks) {
    const size_t chunkEnd = std::min(endBlock, chunk + shape.chunkBlocks);
    const size_t cStride = (chunkEnd - chunk) * kBlock; // floats per scratch row
    for (size_t r0 = 0; r0 < call.rows; r0 += kRows) {
      const size_t rows = std::min(kRows, call.rows - r0);
      const bool twoRows = rows > 16;
      const uint8_t *a = x + r0 * shape.aStride;
      // The full steps, then the K tail under its own configuration (a second pass).
      for (int pass = 0; pass < 2; ++pass) {
        const size_t firstStep = pass == 0 ? 0 : shape.fullSteps;
        const size_t steps = pass == 0 ? shape.fullSteps : (shape.tailPairs ? 1 : 0);
        if (steps == 0)
          continue;
        tiles.configure(shape.configs[rows - 1][pass]);
        const bool start = pass == 0 || shape.fullSteps == 0;
        for (size_t block = chunk; block < chunkEnd; block += 2) {
          const bool twoColumns = block + 1 < chunkEnd;
          float *c = scratch + (block - chunk) * kBlock;
          const uint8_t *b = w + block * shape.blockBytes;
          if (twoRows && twoColumns)
            amxPass<true, true>(tiles, start, c, cStride, a, shape.aStride, b, shape.blockBytes,
                                firstStep, steps);
          else if (twoRows)
            amxPass<true, false>(tiles, start, c, cStride, a, shape.aStride, b, shape.blockBytes,
                                 firstStep, steps);
          else if (twoColumns)
            amxPass<false, true>(tiles, start, c, cStride, a, shape.aStride, b, shape.blockBytes,
                                 firstStep, steps);
          else
            amxPass<false, false>(tiles, start, c, cStride, a, shape.aStride, b, shape.blockBytes,
                                  firstStep, steps);
        }
      }
      storeLinearAmxBf16Rows(call, shape.residual, r0, rows, scratch, cStride, chunk * kBlock,
                             std::max(call.colBegin, chunk * kBlock),
                             std::min(call.colEnd, chunkEnd * kBlock));
    }
  }
  tiles.release();
}

// The kernel on the real tiles (defined in the translation unit built with the AMX flags). Only
// after requestAmxPermission() succeeded.
void runLinearAmxBf16OnTiles(const LinearAmxBf16Shape &shape, const LinearCall &call);

// One configure, load C, A and B, one tdpbf16ps C(0, 0) += A(0) * B(0), store C and release, on
// the real tiles: for tests that compare the hardware with EmulatedAmxTiles instruction by
// instruction. Only after requestAmxPermission() succeeded.
void amxDotProductOnTiles(const TileConfig &config, const void *a, size_t aStride, const void *b,
                          size_t bStride, float *c, size_t cStride);

// The same sequence on any policy.
template <class Tiles>
void amxDotProduct(Tiles &tiles, const TileConfig &config, const void *a, size_t aStride,
                   const void *b, size_t bStride, float *c, size_t cStride) {
  tiles.configure(config);
  tiles.template loadC<0, 0>(c, cStride);
  tiles.template loadA<0>(a, aStride);
  tiles.template loadB<0>(b, bStride);
  tiles.template dot<0, 0>();
  tiles.template storeC<0, 0>(c, cStride);
  tiles.release();
}

// The AMX kernel for calls of at least kAmxMinRows rows and LinearAvx512Bf16 for the others
// (what the engine runs on an AMX host), or with `tilesForEveryCall` the tiles for every row
// count (tests and the benchmark). Needs amx-tile, amx-bf16 and avx512-bf16 and the AMX
// permission, and fails with the reason otherwise.
Result<std::unique_ptr<LinearKernel>> createLinearAmxBf16(size_t k, bool residual,
                                                          bool tilesForEveryCall = false);

// The same kernel code on EmulatedAmxTiles for every row count, on any host. Each call checks
// its tile loads against the rows of x, the weight blocks of its columns and its scratch; the
// first fault of any call is kept.
class LinearAmxBf16Emulated final : public LinearKernel {
public:
  LinearAmxBf16Emulated(size_t k, bool residual);
  void run(const LinearCall &call) const override;

  const LinearAmxBf16Shape &shape() const { return *shape_; }
  std::string fault() const;
  uint64_t configLoads() const;
  uint64_t dotProducts() const;

private:
  std::unique_ptr<LinearAmxBf16Shape> shape_;
  mutable std::mutex mutex_;
  mutable std::string fault_;
  mutable uint64_t configLoads_ = 0;
  mutable uint64_t dotProducts_ = 0;
};

} // namespace hetc::codegen
