#include "codegen/cpu/linear/LinearAvx512Bf16.h"

#include "codegen/cpu/isa/CpuFeatures.h"
#include "codegen/cpu/linear/ActivationRows.h"
#include "codegen/cpu/linear/Linear.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace hetc::codegen {

namespace {

// K pairs per loop iteration: four lines per stream between loop branches.
constexpr uint64_t kUnroll = 4;
// Code bytes per generated instruction, generously (EVEX with disp32 is at most 11).
constexpr size_t kBytesPerInstruction = 12;

} // namespace

uint32_t LinearAvx512Bf16::blocksFor(uint32_t rows) {
  return std::max<uint32_t>(1,
                            std::min(kMaxBlocks, kMaxAccumulators / std::max<uint32_t>(rows, 1)));
}

static size_t codeBound(const LinearAvx512Bf16::Shape &s) {
  const size_t perPair = s.blocks * 2 + size_t{s.rows} * s.blocks;
  const size_t body = perPair * (2 * kUnroll) + 16;
  const size_t epilogue = size_t{s.rows} * (4 + 3 * s.blocks) + 16;
  return (body + epilogue + s.rows * s.blocks) * kBytesPerInstruction + 256;
}

LinearAvx512Bf16::LinearAvx512Bf16(const Shape &shape)
    : JitGenerator("LinearAvx512Bf16", codeBound(shape)), shape_(shape) {}

void LinearAvx512Bf16::generate() {
  using namespace Xbyak;
  const Shape &s = shape_;
  const uint32_t R = s.rows, B = s.blocks;
  if (R < 1 || R > kMaxRows || B < 1 || B > kMaxBlocks || R * B > kMaxAccumulators ||
      s.kPairs == 0) {
    Xbyak::local::SetError(Xbyak::ERR_BAD_PARAMETER);
    return;
  }
  const uint64_t blockBytes = s.kPairs * LinearBf16N16K2::kPairBytes;

  // Caller-saved registers only (System V): nothing to save or restore.
  const Reg64 &args = abiArgs();
  const Reg64 x = rsi, w = rdx, count = rcx, column = r8, rowPointers = r9, residualPointers = r10;
  const Reg64 out = r11, in = rax;
  auto accumulator = [&](uint32_t r, uint32_t b) { return Zmm(static_cast<int>(r * B + b)); };
  auto weightLine = [&](uint32_t b) { return Zmm(static_cast<int>(kMaxAccumulators + b)); };

  mov(x, ptr[args + offsetof(LinearAvx512Bf16Args, x)]);
  mov(w, ptr[args + offsetof(LinearAvx512Bf16Args, w)]);
  for (uint32_t r = 0; r < R; ++r)
    for (uint32_t b = 0; b < B; ++b)
      vpxord(accumulator(r, b), accumulator(r, b), accumulator(r, b));

  // One K pair `u` lines past the current position of every stream.
  auto pairStep = [&](uint64_t u) {
    for (uint32_t b = 0; b < B; ++b)
      vmovups(weightLine(b), ptr[w + b * blockBytes + u * LinearBf16N16K2::kPairBytes]);
    if (s.prefetchBytes)
      for (uint32_t b = 0; b < B; ++b)
        prefetcht0(ptr[w + b * blockBytes + u * LinearBf16N16K2::kPairBytes + s.prefetchBytes]);
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t b = 0; b < B; ++b)
        vdpbf16ps(accumulator(r, b), weightLine(b), ptr_b[x + u * 64 + r * 4]);
  };

  const uint64_t iterations = s.kPairs / kUnroll, remainder = s.kPairs % kUnroll;
  if (iterations > 0) {
    Label loop;
    mov(count, iterations);
    L(loop);
    for (uint64_t u = 0; u < kUnroll; ++u)
      pairStep(u);
    add(x, 64 * kUnroll);
    add(w, LinearBf16N16K2::kPairBytes * kUnroll);
    dec(count);
    jnz(loop, T_NEAR);
  }
  for (uint64_t u = 0; u < remainder; ++u)
    pairStep(u);

  // Epilogue: out[r][column + 16 b + c] = acc (+ residual), the last block under k1.
  mov(column, ptr[args + offsetof(LinearAvx512Bf16Args, column)]);
  kmovw(k1, ptr[args + offsetof(LinearAvx512Bf16Args, lastMask)]);
  mov(rowPointers, ptr[args + offsetof(LinearAvx512Bf16Args, y)]);
  if (s.residual)
    mov(residualPointers, ptr[args + offsetof(LinearAvx512Bf16Args, residual)]);
  for (uint32_t r = 0; r < R; ++r) {
    mov(out, ptr[rowPointers + r * sizeof(float *)]);
    lea(out, ptr[out + column * sizeof(float)]);
    if (s.residual) {
      mov(in, ptr[residualPointers + r * sizeof(float *)]);
      lea(in, ptr[in + column * sizeof(float)]);
    }
    for (uint32_t b = 0; b < B; ++b) {
      const bool last = b + 1 == B;
      const Zmm acc = accumulator(r, b);
      // Masked-off elements of a masked memory operand never fault: the last block may end
      // at the buffer's last column.
      if (s.residual) {
        if (last)
          vaddps(acc | k1, acc, ptr[in + b * 64]);
        else
          vaddps(acc, acc, ptr[in + b * 64]);
      }
      if (last)
        vmovups(ptr[out + b * 64] | k1, acc);
      else
        vmovups(ptr[out + b * 64], acc);
    }
  }
  // Clean upper vector state: legacy-SSE code after the call pays no transition.
  vzeroupper();
  ret();
}

namespace {

// The kernels of one K: for each row count, the widest call (blocksFor) and a one-block call
// for the columns left over.
class LinearAvx512Bf16Kernel : public LinearKernel {
public:
  LinearAvx512Bf16Kernel(size_t k, bool residual)
      : LinearKernel({"LinearAvx512Bf16", "LinearAvx512Bf16 (jit)", true, true}, k, residual) {}

  Status create(uint32_t prefetchBytes) {
    LinearAvx512Bf16::Shape shape;
    shape.kPairs = (k() + 1) / 2;
    shape.residual = residual();
    shape.prefetchBytes = prefetchBytes;
    auto generate = [&](uint32_t rows, uint32_t blocks, LinearAvx512Bf16::Function &function) {
      shape.rows = rows;
      shape.blocks = blocks;
      generators_.push_back(std::make_unique<LinearAvx512Bf16>(shape));
      Status status = generators_.back()->create();
      if (status)
        function = generators_.back()->function<LinearAvx512Bf16::Function>();
      return status;
    };
    for (uint32_t rows = 1; rows <= LinearAvx512Bf16::kMaxRows; ++rows) {
      PerRows &entry = perRows_[rows - 1];
      entry.blocks = LinearAvx512Bf16::blocksFor(rows);
      if (Status s = generate(rows, entry.blocks, entry.wide); !s)
        return s;
      entry.single = entry.wide;
      if (entry.blocks > 1)
        if (Status s = generate(rows, 1, entry.single); !s)
          return s;
    }
    return Status();
  }

  void run(const LinearCall &call) const override {
    constexpr size_t kBlock = LinearBf16N16K2::kBlockColumns;
    const size_t groupPairs = Bf16Rows::groupBytes(k()) / sizeof(uint32_t);
    const size_t blockBytes = (k() + 1) / 2 * LinearBf16N16K2::kPairBytes;
    // Many rows (prefill) pass over the weights once per 16 rows; columns are then taken in
    // chunks whose panels fit half the L2 cache, so every pass after the first reads them there.
    size_t chunk = call.colEnd - call.colBegin;
    if (call.rows > LinearAvx512Bf16::kMaxRows)
      chunk = std::max<size_t>(kL2Budget / blockBytes, LinearAvx512Bf16::kMaxBlocks) * kBlock;

    float *rowOut[LinearAvx512Bf16::kMaxRows];
    const float *rowIn[LinearAvx512Bf16::kMaxRows];
    LinearAvx512Bf16Args args{};
    args.y = rowOut;
    args.residual = rowIn;
    for (size_t c0 = call.colBegin; c0 < call.colEnd; c0 += chunk) {
      const size_t c1 = std::min(call.colEnd, c0 + chunk);
      for (size_t r0 = 0; r0 < call.rows; r0 += LinearAvx512Bf16::kMaxRows) {
        const size_t rows = std::min<size_t>(LinearAvx512Bf16::kMaxRows, call.rows - r0);
        for (size_t r = 0; r < rows; ++r) {
          const size_t row = r0 + r;
          // Column n lands at rowOut[r] + n: the row's start shifted by yFirstColumn, kept as an
          // integer so no pointer before the caller's buffer is formed.
          rowOut[r] = reinterpret_cast<float *>(
              reinterpret_cast<uintptr_t>(call.y +
                                          (call.yRows ? call.yRows[row] : row) * call.yStride) -
              call.yFirstColumn * sizeof(float));
          if (call.residual)
            rowIn[r] = call.residual + row * call.residualStride;
        }
        const PerRows &entry = perRows_[rows - 1];
        args.x = call.xBf16 + r0 / Bf16Rows::kGroupRows * groupPairs;
        const size_t wide = entry.blocks * kBlock;
        size_t n = c0;
        args.lastMask = 0xffff;
        for (; n + wide <= c1; n += wide) {
          args.w = call.w + n / kBlock * (blockBytes / sizeof(uint16_t));
          args.column = n;
          entry.wide(&args);
        }
        for (; n < c1; n += kBlock) {
          args.w = call.w + n / kBlock * (blockBytes / sizeof(uint16_t));
          args.column = n;
          args.lastMask = c1 - n >= kBlock ? 0xffff : (uint64_t{1} << (c1 - n)) - 1;
          entry.single(&args);
        }
      }
    }
  }

private:
  static constexpr size_t kL2Budget = 512 * 1024;
  struct PerRows {
    uint32_t blocks = 1;
    LinearAvx512Bf16::Function wide = nullptr;
    LinearAvx512Bf16::Function single = nullptr;
  };
  std::array<PerRows, LinearAvx512Bf16::kMaxRows> perRows_{};
  std::vector<std::unique_ptr<LinearAvx512Bf16>> generators_;
};

} // namespace

Result<std::unique_ptr<LinearKernel>> createLinearAvx512Bf16(size_t k, bool residual,
                                                             int prefetchBytes) {
  if (!hostHas(kCpuAvx512Bf16))
    return Status::error("LinearAvx512Bf16 needs avx512-bf16, which this host lacks (host has " +
                         describeCpuFeatures(hostCpuFeatures()) + ")");
  if (k == 0)
    return Status::error("LinearAvx512Bf16: K is 0");
  auto kernel = std::make_unique<LinearAvx512Bf16Kernel>(k, residual);
  const uint32_t distance = prefetchBytes < 0 ? LinearAvx512Bf16::kDefaultPrefetchBytes
                                              : static_cast<uint32_t>(prefetchBytes);
  if (Status s = kernel->create(distance); !s)
    return s;
  return Result<std::unique_ptr<LinearKernel>>(std::move(kernel));
}

} // namespace hetc::codegen
