#include "codegen/cpu/isa/AmxTiles.h"

#include <cmath>
#include <cstring>

namespace hetc::codegen {
namespace {

float floatOfBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// A denormal read as a zero of its sign (DAZ).
float denormalsAreZero(float value) {
  return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(0.0f, value) : value;
}

// A denormal result written as a zero of its sign (FTZ).
float flushToZero(float value) { return denormalsAreZero(value); }

// make_fp32 of the SDM: the bf16 bits in the upper half of an f32, then DAZ.
float widen(uint16_t bf16) { return denormalsAreZero(floatOfBits(uint32_t{bf16} << 16)); }

uint16_t bf16At(const uint8_t *row, size_t index) {
  uint16_t value;
  std::memcpy(&value, row + 2 * index, sizeof(value));
  return value;
}

std::string str(uint64_t value) { return std::to_string(value); }

} // namespace

void EmulatedAmxTiles::allowRead(const void *begin, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(begin);
  readable_.push_back({at, at + bytes});
}

void EmulatedAmxTiles::allowWrite(void *begin, size_t bytes) {
  const auto at = reinterpret_cast<uintptr_t>(begin);
  writable_.push_back({at, at + bytes});
  readable_.push_back({at, at + bytes});
}

void EmulatedAmxTiles::raise(const std::string &message) {
  if (fault_.empty())
    fault_ = message;
}

bool EmulatedAmxTiles::inside(const std::vector<std::pair<uintptr_t, uintptr_t>> &ranges,
                              uintptr_t begin, size_t bytes) const {
  for (const auto &[first, end] : ranges)
    if (begin >= first && begin <= end && bytes <= end - begin)
      return true;
  return false;
}

void EmulatedAmxTiles::ldtilecfg(const TileConfig &config) {
  const auto *bytes = reinterpret_cast<const uint8_t *>(&config);
  if (config.palette == 0) {
    tilerelease();
    return;
  }
  if (config.palette != 1)
    return raise("ldtilecfg: palette " + str(config.palette) + " (#GP: only 0 and 1 exist)");
  for (unsigned i = 2; i < 16; ++i)
    if (bytes[i] != 0)
      return raise("ldtilecfg: reserved byte " + str(i) + " is not zero (#GP)");
  if (config.startRow != 0)
    return raise("ldtilecfg: start_row " + str(config.startRow) + " (the model needs 0)");
  for (unsigned t = 0; t < 16; ++t) {
    const unsigned rows = config.rows[t], colsb = config.colsb[t];
    if (t >= amx::kTiles && (rows || colsb))
      return raise("ldtilecfg: tile " + str(t) + " configured; palette 1 has 8 tiles (#GP)");
    if (rows > amx::kMaxRows || colsb > amx::kMaxRowBytes)
      return raise("ldtilecfg: tile " + str(t) + " of " + str(rows) + " rows of " + str(colsb) +
                   " bytes exceeds 16 x 64 (#GP)");
    if ((rows == 0) != (colsb == 0))
      return raise("ldtilecfg: tile " + str(t) + " has " + str(rows) + " rows of " + str(colsb) +
                   " bytes: both or neither must be 0 (#GP)");
  }
  config_ = config;
  configured_ = true;
  std::memset(data_, 0, sizeof(data_));
  ++configLoads_;
}

void EmulatedAmxTiles::tilerelease() {
  config_ = TileConfig();
  config_.palette = 0;
  configured_ = false;
  std::memset(data_, 0, sizeof(data_));
}

bool EmulatedAmxTiles::validTile(unsigned tile, const char *instruction) {
  if (!configured_) {
    raise(std::string(instruction) + ": tiles are not configured (#UD)");
    return false;
  }
  if (tile >= amx::kTiles || config_.rows[tile] == 0) {
    raise(std::string(instruction) + ": tile " + str(tile) + " is not configured (#UD)");
    return false;
  }
  if (config_.colsb[tile] % 4 != 0) {
    raise(std::string(instruction) + ": tile " + str(tile) + " has " + str(config_.colsb[tile]) +
          " bytes per row, not a multiple of 4 (#UD)");
    return false;
  }
  return true;
}

void EmulatedAmxTiles::tileloadd(unsigned tile, const void *base, size_t stride) {
  if (!validTile(tile, "tileloadd"))
    return;
  const unsigned rows = config_.rows[tile], colsb = config_.colsb[tile];
  const auto at = reinterpret_cast<uintptr_t>(base);
  for (unsigned r = 0; r < rows; ++r)
    if (!inside(readable_, at + r * stride, colsb))
      return raise("tileloadd: tile " + str(tile) + " row " + str(r) + " reads " + str(colsb) +
                   " bytes at an address the kernel does not own");
  std::memset(data_[tile], 0, sizeof(data_[tile]));
  for (unsigned r = 0; r < rows; ++r)
    std::memcpy(data_[tile][r], reinterpret_cast<const uint8_t *>(at + r * stride), colsb);
}

void EmulatedAmxTiles::tilestored(unsigned tile, void *base, size_t stride) {
  if (!validTile(tile, "tilestored"))
    return;
  const unsigned rows = config_.rows[tile], colsb = config_.colsb[tile];
  const auto at = reinterpret_cast<uintptr_t>(base);
  for (unsigned r = 0; r < rows; ++r)
    if (!inside(writable_, at + r * stride, colsb))
      return raise("tilestored: tile " + str(tile) + " row " + str(r) + " writes " + str(colsb) +
                   " bytes at an address the kernel does not own");
  for (unsigned r = 0; r < rows; ++r)
    std::memcpy(reinterpret_cast<uint8_t *>(at + r * stride), data_[tile][r], colsb);
}

void EmulatedAmxTiles::tilezero(unsigned tile) {
  if (!validTile(tile, "tilezero"))
    return;
  std::memset(data_[tile], 0, sizeof(data_[tile]));
}

void EmulatedAmxTiles::tdpbf16ps(unsigned dst, unsigned src1, unsigned src2) {
  if (dst == src1 || dst == src2 || src1 == src2)
    return raise("tdpbf16ps: tiles " + str(dst) + ", " + str(src1) + ", " + str(src2) +
                 " are not distinct (#UD)");
  if (!validTile(dst, "tdpbf16ps") || !validTile(src1, "tdpbf16ps") ||
      !validTile(src2, "tdpbf16ps"))
    return;
  const unsigned m = config_.rows[dst], n = config_.colsb[dst] / 4;
  const unsigned k = config_.colsb[src1] / 4;
  if (config_.colsb[src2] != config_.colsb[dst] || config_.rows[src1] != m ||
      config_.rows[src2] != k)
    return raise("tdpbf16ps: shapes C " + str(m) + "x" + str(n) + ", A " + str(config_.rows[src1]) +
                 "x" + str(k) + ", B " + str(config_.rows[src2]) + "x" +
                 str(config_.colsb[src2] / 4) + " do not chain (#UD)");
  if (n > 16 || k > 16)
    return raise("tdpbf16ps: N " + str(n) + " or K " + str(k) + " above 16 (#UD)");
  for (unsigned row = 0; row < m; ++row) {
    float even[16] = {}, odd[16] = {};
    for (unsigned pair = 0; pair < k; ++pair) {
      const float a0 = widen(bf16At(data_[src1][row], 2 * pair));
      const float a1 = widen(bf16At(data_[src1][row], 2 * pair + 1));
      for (unsigned col = 0; col < n; ++col) {
        even[col] = flushToZero(std::fma(a0, widen(bf16At(data_[src2][pair], 2 * col)), even[col]));
        odd[col] =
            flushToZero(std::fma(a1, widen(bf16At(data_[src2][pair], 2 * col + 1)), odd[col]));
      }
    }
    for (unsigned col = 0; col < n; ++col) {
      float c;
      std::memcpy(&c, data_[dst][row] + 4 * col, sizeof(c));
      c = flushToZero(denormalsAreZero(c) + flushToZero(even[col] + odd[col]));
      std::memcpy(data_[dst][row] + 4 * col, &c, sizeof(c));
    }
    std::memset(data_[dst][row] + 4 * n, 0, amx::kMaxRowBytes - 4 * n);
  }
  for (unsigned row = m; row < amx::kMaxRows; ++row)
    std::memset(data_[dst][row], 0, amx::kMaxRowBytes);
  ++dotProducts_;
}

} // namespace hetc::codegen
