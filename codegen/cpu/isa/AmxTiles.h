// The tile registers of the AMX BF16 linear kernel (LinearAmxBf16.h) and the two tile-operation
// policies it is written against:
//
//   RealAmxTiles      the instructions, through GCC's intrinsics; defined only in the translation
//                     unit compiled with -mamx-tile -mamx-bf16 (LinearAmxBf16Tiles.cpp)
//   EmulatedAmxTiles  a scalar model of the eight tile registers (below), so the kernel's exact
//                     code runs, and is tested, on hosts without AMX
//
// A policy provides, with the tile roles of the kernel's 2 x 2 blocking as template arguments
// (the intrinsics take tile numbers as literals, so the roles are fixed at compile time):
//
//   configure(const TileConfig &)           ldtilecfg unless that configuration is loaded; a
//                                           load zeroes every tile (the rule of loadTileConfig)
//   loadA<R>(base, stride)                  tileloadd A tile R (activation rows)
//   loadB<C>(base, stride)                  tileloadd B tile C (16 weight columns, VNNI pairs)
//   loadC<R, C>, storeC<R, C>, zeroC<R, C>  tileloadd, tilestored, tilezero of C tile (R, C)
//   dot<R, C>()                             tdpbf16ps C(R, C) += A(R) * B(C)
//   release()                               tilerelease
#pragma once

#include "codegen/cpu/isa/Amx.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hetc::codegen {

// Tile numbers of the kernel's roles: C(r, c) in tmm0..3, A(r) in tmm4..5, B(c) in tmm6..7.
namespace amx {
constexpr unsigned kTiles = 8;
constexpr unsigned kMaxRows = 16;
constexpr unsigned kMaxRowBytes = 64;
constexpr unsigned tileC(unsigned row, unsigned col) { return 2 * row + col; }
constexpr unsigned tileA(unsigned row) { return 4 + row; }
constexpr unsigned tileB(unsigned col) { return 6 + col; }
} // namespace amx

// A scalar model of AMX palette 1 (8 tiles of at most 16 rows of 64 bytes) for the instructions
// the kernel uses, following the Intel SDM's definitions:
//
// - LDTILECFG: palette 0 releases; palette 1 needs bytes 2..15, the colsb and rows of tiles 8..15
//   zero, every colsb <= 64 and rows <= 16, and rows 0 exactly when colsb is 0 (else #GP).
//   A load zeroes every tile. start_row must be 0 (the kernel never restarts an instruction).
// - TILELOADD / TILESTORED: rows x colsb bytes, row r at base + r * stride; a load zeroes the
//   bytes past colsb and the rows past rows. TILEZERO zeroes a tile. TILERELEASE returns to the
//   initial state (no configuration; every tile instruction then faults, as its #UD).
// - TDPBF16PS dst, src1, src2: the #UD checks (three distinct configured tiles, colsb multiples
//   of 4, dst.colsb == src2.colsb, dst.rows == src1.rows, src1.colsb / 4 == src2.rows, K and N
//   at most 16), then per row m: two f32 accumulators per column n, even and odd, start at 0;
//   for each K pair k, even = fma(A[m][2k], B[k][2n], even) and odd = fma(A[m][2k+1],
//   B[k][2n+1], odd); then C[m][n] = C[m][n] + (even + odd).
//
// Arithmetic: bf16 widened to f32 exactly; input denormals (bf16 operands and C) read as zeros
// of their sign (DAZ); each fma and add is one IEEE f32 operation rounded to nearest even, and a
// result that is denormal after that rounding becomes a zero of its sign (FTZ). Not modelled: a
// result tiny before rounding that rounds up to the smallest normal (the SDM does not say which
// tininess rule AMX uses; the kernel's data never comes near 1e-38), and the sign and payload of
// a NaN the unit produces from non-NaN inputs.
//
// Memory: loads may only read, and stores only write, ranges declared with allowRead and
// allowWrite; any other access is a fault (where the hardware would touch memory the kernel does
// not own). A fault skips the instruction and is recorded; fault() is the first one.
class EmulatedAmxTiles {
public:
  void allowRead(const void *begin, size_t bytes);
  void allowWrite(void *begin, size_t bytes);

  // The instructions, with tile numbers.
  void ldtilecfg(const TileConfig &config);
  void tileloadd(unsigned tile, const void *base, size_t stride);
  void tilestored(unsigned tile, void *base, size_t stride);
  void tilezero(unsigned tile);
  void tdpbf16ps(unsigned dst, unsigned src1, unsigned src2);
  void tilerelease();

  // The policy.
  void configure(const TileConfig &config) {
    if (!configured_ || !(config == config_))
      ldtilecfg(config);
  }
  template <unsigned R> void loadA(const void *base, size_t stride) {
    tileloadd(amx::tileA(R), base, stride);
  }
  template <unsigned C> void loadB(const void *base, size_t stride) {
    tileloadd(amx::tileB(C), base, stride);
  }
  template <unsigned R, unsigned C> void loadC(const void *base, size_t stride) {
    tileloadd(amx::tileC(R, C), base, stride);
  }
  template <unsigned R, unsigned C> void storeC(void *base, size_t stride) {
    tilestored(amx::tileC(R, C), base, stride);
  }
  template <unsigned R, unsigned C> void zeroC() { tilezero(amx::tileC(R, C)); }
  template <unsigned R, unsigned C> void dot() {
    tdpbf16ps(amx::tileC(R, C), amx::tileA(R), amx::tileB(C));
  }
  void release() { tilerelease(); }

  // The first fault, or empty.
  const std::string &fault() const { return fault_; }
  uint64_t configLoads() const { return configLoads_; }
  uint64_t dotProducts() const { return dotProducts_; }
  bool configured() const { return configured_; }

private:
  bool validTile(unsigned tile, const char *instruction);
  bool inside(const std::vector<std::pair<uintptr_t, uintptr_t>> &ranges, uintptr_t begin,
              size_t bytes) const;
  void raise(const std::string &message);

  TileConfig config_;
  bool configured_ = false;
  alignas(64) uint8_t data_[amx::kTiles][amx::kMaxRows][amx::kMaxRowBytes] = {};
  std::vector<std::pair<uintptr_t, uintptr_t>> readable_, writable_;
  std::string fault_;
  uint64_t configLoads_ = 0;
  uint64_t dotProducts_ = 0;
};

} // namespace hetc::codegen
