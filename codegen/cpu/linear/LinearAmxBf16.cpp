// The AMX linear kernel's shapes, configurations and epilogue, the kernel on emulated tiles, and
// the kernel the engine runs (tiles for many rows, LinearAvx512Bf16 for few). The instantiation
// on the real tiles is in LinearAmxBf16Tiles.cpp, the one file built with the AMX flags.
#include "codegen/cpu/linear/LinearAmxBf16.h"

#include "codegen/cpu/isa/AmxTiles.h"
#include "codegen/cpu/isa/CpuFeatures.h"

#include <cstring>
#include <vector>

namespace hetc::codegen {

const LinearKernelInfo kLinearAmxBf16Info = {"LinearAmxBf16",
                                             "LinearAmxBf16 (prefill) + LinearAvx512Bf16 (decode)",
                                             true, true, kAmxMinRows};

TileConfig linearAmxBf16TileConfig(unsigned rows, unsigned pairs) {
  const auto top = static_cast<uint8_t>(std::min(rows, 16u));
  const auto bottom = static_cast<uint8_t>(rows - top);
  const auto aBytes = static_cast<uint16_t>(4 * pairs);
  constexpr uint16_t kLine = LinearBf16N16K2::kPairBytes;
  TileConfig config;
  config.tile(amx::tileA(0), top, aBytes)
      .tile(amx::tileC(0, 0), top, kLine)
      .tile(amx::tileC(0, 1), top, kLine);
  if (bottom)
    config.tile(amx::tileA(1), bottom, aBytes)
        .tile(amx::tileC(1, 0), bottom, kLine)
        .tile(amx::tileC(1, 1), bottom, kLine);
  config.tile(amx::tileB(0), static_cast<uint8_t>(pairs), kLine)
      .tile(amx::tileB(1), static_cast<uint8_t>(pairs), kLine);
  return config;
}

LinearAmxBf16Shape makeLinearAmxBf16Shape(size_t k, bool residual) {
  using Shape = LinearAmxBf16Shape;
  Shape shape;
  shape.k = k;
  shape.kPairs = (k + 1) / 2;
  shape.fullSteps = shape.kPairs / Shape::kPairsPerStep;
  shape.tailPairs = shape.kPairs % Shape::kPairsPerStep;
  shape.aStride = Bf16RowMajor::rowBytes(k);
  shape.blockBytes = shape.kPairs * LinearBf16N16K2::kPairBytes;
  shape.chunkBlocks =
      std::clamp<size_t>(Shape::kL2Budget / shape.blockBytes, 1, Shape::kMaxChunkBlocks);
  shape.residual = residual;
  for (unsigned rows = 1; rows <= Shape::kRowsPerBlock; ++rows) {
    if (shape.fullSteps)
      shape.configs[rows - 1][0] = linearAmxBf16TileConfig(rows, Shape::kPairsPerStep);
    if (shape.tailPairs)
      shape.configs[rows - 1][1] =
          linearAmxBf16TileConfig(rows, static_cast<unsigned>(shape.tailPairs));
  }
  return shape;
}

void storeLinearAmxBf16Rows(const LinearCall &call, bool residual, size_t rowBegin, size_t rows,
                            const float *scratch, size_t scratchStride, size_t scratchColumn,
                            size_t colBegin, size_t colEnd) {
  const size_t columns = colEnd - colBegin;
  for (size_t i = 0; i < rows; ++i) {
    const size_t row = rowBegin + i;
    const float *sums = scratch + i * scratchStride + (colBegin - scratchColumn);
    float *y = call.y + (call.yRows ? call.yRows[row] : row) * call.yStride +
               (colBegin - call.yFirstColumn);
    if (residual) {
      // Read before written: the residual may be y itself.
      const float *in = call.residual + row * call.residualStride + colBegin;
      for (size_t c = 0; c < columns; ++c)
        y[c] = sums[c] + in[c];
    } else {
      std::memcpy(y, sums, columns * sizeof(float));
    }
  }
}

LinearAmxBf16Emulated::LinearAmxBf16Emulated(size_t k, bool residual)
    : LinearKernel({"LinearAmxBf16Emulated", "LinearAmxBf16 (emulated tiles)", false, true, 1}, k,
                   residual),
      shape_(std::make_unique<LinearAmxBf16Shape>(makeLinearAmxBf16Shape(k, residual))) {}

void LinearAmxBf16Emulated::run(const LinearCall &call) const {
  const LinearAmxBf16Shape &s = *shape_;
  EmulatedAmxTiles tiles;
  // What the call owns: its rows' pairs (not the padding after them), the weight blocks of its
  // columns, and the scratch.
  const auto *x = reinterpret_cast<const uint8_t *>(call.xBf16);
  for (size_t r = 0; r < call.rows; ++r)
    tiles.allowRead(x + r * s.aStride, s.kPairs * 4);
  constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;
  const size_t firstBlock = call.colBegin / kBlock;
  const size_t endBlock = (call.colEnd + kBlock - 1) / kBlock;
  tiles.allowRead(reinterpret_cast<const uint8_t *>(call.w) + firstBlock * s.blockBytes,
                  (endBlock - firstBlock) * s.blockBytes);
  std::vector<float> scratch(LinearAmxBf16Shape::kScratchFloats);
  tiles.allowWrite(scratch.data(), scratch.size() * sizeof(float));
  runLinearAmxBf16(tiles, s, call, scratch.data());

  std::lock_guard<std::mutex> lock(mutex_);
  if (fault_.empty())
    fault_ = !tiles.fault().empty() ? tiles.fault()
             : tiles.configured()   ? "the call ended without releasing its tiles"
                                    : "";
  configLoads_ += tiles.configLoads();
  dotProducts_ += tiles.dotProducts();
}

std::string LinearAmxBf16Emulated::fault() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fault_;
}
uint64_t LinearAmxBf16Emulated::configLoads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return configLoads_;
}
uint64_t LinearAmxBf16Emulated::dotProducts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dotProducts_;
}

namespace {

// Tiles for calls of kAmxMinRows rows or more, `decode` for fewer (or tiles for every call when
// there is no `decode`).
class LinearAmxBf16Kernel final : public LinearKernel {
public:
  LinearAmxBf16Kernel(size_t k, bool residual, std::unique_ptr<LinearKernel> decode)
      : LinearKernel(decode ? kLinearAmxBf16Info
                            : LinearKernelInfo{"LinearAmxBf16", "LinearAmxBf16 (tiles only)", false,
                                               true, 1},
                     k, residual),
        shape_(std::make_unique<LinearAmxBf16Shape>(makeLinearAmxBf16Shape(k, residual))),
        decode_(std::move(decode)) {}

  void run(const LinearCall &call) const override {
    if (decode_ && call.rows < kAmxMinRows)
      decode_->run(call);
    else
      runLinearAmxBf16OnTiles(*shape_, call);
  }

private:
  std::unique_ptr<LinearAmxBf16Shape> shape_;
  std::unique_ptr<LinearKernel> decode_;
};

} // namespace

Result<std::unique_ptr<LinearKernel>> createLinearAmxBf16(size_t k, bool residual,
                                                          bool tilesForEveryCall) {
  const uint64_t needs = kCpuAmxTile | kCpuAmxBf16 | kCpuAvx512Bf16;
  if (!hostHas(needs))
    return Status::error(
        std::string(hostHas(kCpuAmxTile | kCpuAmxBf16) ? "" : "host has no AMX: ") +
        "LinearAmxBf16 needs " + describeCpuFeatures(needs) + ", host has " +
        describeCpuFeatures(hostCpuFeatures()));
  if (Status permission = requestAmxPermission(); !permission)
    return Status::error("LinearAmxBf16: " + permission.message());
  if (k == 0)
    return Status::error("LinearAmxBf16: K is 0");
  std::unique_ptr<LinearKernel> decode;
  if (!tilesForEveryCall) {
    Result<std::unique_ptr<LinearKernel>> made = createLinearAvx512Bf16(k, residual);
    if (!made)
      return made.status();
    decode = std::move(made.value());
  }
  return Result<std::unique_ptr<LinearKernel>>(
      std::make_unique<LinearAmxBf16Kernel>(k, residual, std::move(decode)));
}

} // namespace hetc::codegen
