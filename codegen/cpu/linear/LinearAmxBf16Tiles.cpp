// The AMX linear kernel on the real tile registers: RealAmxTiles, the tile-operation policy of
// GCC's AMX intrinsics, and the kernel template instantiated with it. The only file built with
// -mamx-tile -mamx-bf16 (see CMakeLists.txt): those flags let the intrinsics compile and make the
// compiler emit no other new instruction, so the rest of this file is plain x86-64 code and the
// file is safe to link into a binary that runs on hosts without AMX (nothing here runs there).
#include "codegen/cpu/isa/AmxTiles.h"
#include "codegen/cpu/linear/LinearAmxBf16.h"

// GCC spells the macros __AMX_TILE__ and __AMX_BF16__, clang 14 __AMXTILE__ and __AMXBF16__.
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "LinearAmxBf16Tiles.cpp must be compiled with -mamx-tile -mamx-bf16"
#endif

#include <immintrin.h>

namespace hetc::codegen {
namespace {

// The intrinsics paste their tile number into the instruction text, so each role names its
// register as a literal; these must agree with amx::tileA/tileB/tileC.
static_assert(amx::tileC(0, 0) == 0 && amx::tileC(0, 1) == 1 && amx::tileC(1, 0) == 2 &&
              amx::tileC(1, 1) == 3 && amx::tileA(0) == 4 && amx::tileA(1) == 5 &&
              amx::tileB(0) == 6 && amx::tileB(1) == 7);

struct RealAmxTiles {
  void configure(const TileConfig &config) { loadTileConfig(config); }

  template <unsigned R> void loadA(const void *base, size_t stride) {
    static_assert(R < 2);
    if constexpr (R == 0)
      _tile_loadd(4, base, stride);
    else
      _tile_loadd(5, base, stride);
  }
  template <unsigned C> void loadB(const void *base, size_t stride) {
    static_assert(C < 2);
    if constexpr (C == 0)
      _tile_loadd(6, base, stride);
    else
      _tile_loadd(7, base, stride);
  }
  template <unsigned R, unsigned C> void loadC(const void *base, size_t stride) {
    static_assert(R < 2 && C < 2);
    if constexpr (R == 0 && C == 0)
      _tile_loadd(0, base, stride);
    else if constexpr (R == 0)
      _tile_loadd(1, base, stride);
    else if constexpr (C == 0)
      _tile_loadd(2, base, stride);
    else
      _tile_loadd(3, base, stride);
  }
  template <unsigned R, unsigned C> void storeC(void *base, size_t stride) {
    static_assert(R < 2 && C < 2);
    if constexpr (R == 0 && C == 0)
      _tile_stored(0, base, stride);
    else if constexpr (R == 0)
      _tile_stored(1, base, stride);
    else if constexpr (C == 0)
      _tile_stored(2, base, stride);
    else
      _tile_stored(3, base, stride);
  }
  template <unsigned R, unsigned C> void zeroC() {
    static_assert(R < 2 && C < 2);
    if constexpr (R == 0 && C == 0)
      _tile_zero(0);
    else if constexpr (R == 0)
      _tile_zero(1);
    else if constexpr (C == 0)
      _tile_zero(2);
    else
      _tile_zero(3);
  }
  // C(R, C) += A(R) * B(C).
  template <unsigned R, unsigned C> void dot() {
    static_assert(R < 2 && C < 2);
    if constexpr (R == 0 && C == 0)
      _tile_dpbf16ps(0, 4, 6);
    else if constexpr (R == 0)
      _tile_dpbf16ps(1, 4, 7);
    else if constexpr (C == 0)
      _tile_dpbf16ps(2, 5, 6);
    else
      _tile_dpbf16ps(3, 5, 7);
  }
  void release() { releaseTiles(); }
};

} // namespace

void runLinearAmxBf16OnTiles(const LinearAmxBf16Shape &shape, const LinearCall &call) {
  alignas(64) float scratch[LinearAmxBf16Shape::kScratchFloats];
  RealAmxTiles tiles;
  runLinearAmxBf16(tiles, shape, call, scratch);
}

void amxDotProductOnTiles(const TileConfig &config, const void *a, size_t aStride, const void *b,
                          size_t bStride, float *c, size_t cStride) {
  RealAmxTiles tiles;
  amxDotProduct(tiles, config, a, aStride, b, bStride, c, cStride);
}

} // namespace hetc::codegen
