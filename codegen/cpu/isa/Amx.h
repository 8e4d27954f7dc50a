// AMX support shared by AMX kernels: the Linux permission request and tile configurations.
//
// Linux hands out the AMX tile data state (XFEATURE_XTILEDATA, 8 KiB per thread) only to a
// process that asks, once, with arch_prctl(ARCH_REQ_XCOMP_PERM); a tile instruction before that
// faults. A tile configuration (ldtilecfg) is per thread and costs a pipeline flush, so kernels
// compute theirs ahead (at plan load) and loadTileConfig reloads only when it changes.
//
// Not verified on the machines this was written on (no AMX there): the tests that need AMX skip
// with "host has no AMX"; there the permission gate, the configuration bytes and, through
// EmulatedAmxTiles (AmxTiles.h), the AMX kernel's code are tested.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>

namespace hetc::codegen {

// Requests AMX tile data permission for this process the first time it is called and returns
// that first outcome ever after. Fails without asking the kernel when the CPU (or
// HETC_DISABLE_CPU_FEATURES) reports no AMX.
Status requestAmxPermission();

// The 64-byte operand of ldtilecfg, palette 1: tile t has rows[t] rows of colsb[t] bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  // Tile `tile` (0..7) as `rows` rows of `bytesPerRow` bytes (at most 16 rows of 64 bytes).
  TileConfig &tile(unsigned index, uint8_t rowCount, uint16_t bytesPerRow) {
    rows[index] = rowCount;
    colsb[index] = bytesPerRow;
    return *this;
  }
  bool operator==(const TileConfig &other) const;
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads exactly 64 bytes");

// Loads `config` into this thread's tile registers unless it is already the loaded one. Needs
// requestAmxPermission() to have succeeded; never call it on a host without AMX.
void loadTileConfig(const TileConfig &config);

// Releases this thread's tiles (tilerelease) and forgets the loaded configuration. Also the way
// to tell this module that code elsewhere changed the configuration.
void releaseTiles();

} // namespace hetc::codegen
