// Linear kernels over BF16 weights packed as LinearBf16N16K2 (WeightLayout.h):
//
//   y[r, n] = sum_k x[r, k] * W[n, k]  (+ residual[r, n] for a kernel made with a residual)
//
// for rows r < rows and columns n in [colBegin, colEnd), accumulated in f32. The kernel is chosen
// and generated once at plan load (chooseLinearBf16Kernel, createLinearBf16Kernel); a call is one
// virtual call. Each output element's arithmetic is the same whatever the column range or the
// thread, and whatever the row count of the call within one kernel, so results do not depend on
// the thread count; they depend on batching only where a kernel switches with the row count
// (LinearAmxBf16: tiles from kAmxMinRows rows, LinearAvx512Bf16 below).
#pragma once

#include "runtime/format/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace hetc::codegen {

struct LinearCall {
  // Activations. A kernel that readsBf16Rows() takes x already converted by convertRowsToBf16
  // (rows 0..rows-1 in the Bf16Rows layout); the others read f32 rows, row r at
  // x + (xRows ? xRows[r] : r) * xStride.
  const float *x = nullptr;
  size_t xStride = 0; // floats
  const uint32_t *xRows = nullptr;
  const uint32_t *xBf16 = nullptr;
  size_t rows = 0;
  const uint16_t *w = nullptr; // the packed weight
  // Output column n of row r at y + (yRows ? yRows[r] : r) * yStride + n - yFirstColumn
  // (floats): a caller may keep only the columns it asks for, as a window from yFirstColumn.
  float *y = nullptr;
  size_t yStride = 0;
  const uint32_t *yRows = nullptr;
  size_t yFirstColumn = 0;
  // Kernels made with a residual add residual + r * residualStride (column n at n; it may be y
  // itself, with yFirstColumn 0).
  const float *residual = nullptr;
  size_t residualStride = 0;
  // colBegin a multiple of 16 (a block of the layout); colEnd at most the weight's N.
  size_t colBegin = 0;
  size_t colEnd = 0;
};

struct LinearKernelInfo {
  const char *name;   // the ISA in the name: "LinearAvx512Bf16"
  const char *label;  // for reports: the name, with " (jit)" for a generated kernel
  bool jit;           // generated at plan load
  bool readsBf16Rows; // wants x converted first (convertRowsForLinear)
  // Calls of at least this many rows read x as Bf16RowMajor (AMX tiles), the others as
  // Bf16Rows; 0: every call reads Bf16Rows.
  size_t tileRowsFrom = 0;
};

// Whether a call of `rows` rows of a kernel that readsBf16Rows takes them as Bf16RowMajor.
inline bool readsBf16RowMajor(const LinearKernelInfo &info, size_t rows) {
  return info.tileRowsFrom != 0 && rows >= info.tileRowsFrom;
}

// Converts rows [rowBegin, rowEnd) of a call of `callRows` rows into the layout the kernel reads
// for that call (convertRowsToBf16RowMajor or convertRowsToBf16; same arguments).
void convertRowsForLinear(const LinearKernelInfo &info, size_t callRows, const float *x,
                          size_t xStride, const uint32_t *rowIndex, size_t k, uint32_t *dst,
                          size_t rowBegin, size_t rowEnd);

// Bytes of converted rows that calls of up to `maxRows` rows of width `k` need.
uint64_t convertedRowsBytes(const LinearKernelInfo &info, size_t maxRows, size_t k);

class LinearKernel {
public:
  LinearKernel(LinearKernelInfo info, size_t k, bool residual)
      : info_(info), k_(k), residual_(residual) {}
  virtual ~LinearKernel() = default;
  LinearKernel(const LinearKernel &) = delete;
  LinearKernel &operator=(const LinearKernel &) = delete;

  virtual void run(const LinearCall &call) const = 0;

  const LinearKernelInfo &info() const { return info_; }
  size_t k() const { return k_; }
  bool residual() const { return residual_; }

private:
  LinearKernelInfo info_;
  size_t k_;
  bool residual_;
};

// The best kernel for BF16 N16K2 weights on a host with `cpuFeatures`: with AMX BF16 and AVX-512
// BF16, LinearAmxBf16 (AMX tiles for calls of kAmxMinRows rows or more, LinearAvx512Bf16 for
// the others); with AVX-512 BF16, LinearAvx512Bf16 (JIT, vdpbf16ps); else LinearBf16Portable.
LinearKernelInfo chooseLinearBf16Kernel(uint64_t cpuFeatures);

// The host's features for that choice: hostCpuFeatures(), less AMX when Linux refuses this
// process the tile data permission (requested here, once per process, only when the CPU has AMX).
uint64_t linearKernelFeatures();

// Creates (and for a JIT kernel generates) the chosen kernel for inputs of width `k`. One kernel
// serves every weight with that K, whatever its N.
Result<std::unique_ptr<LinearKernel>> createLinearBf16Kernel(size_t k, bool residual,
                                                             uint64_t cpuFeatures);

// The kernels by name, whatever the host has (tests compare each against a reference): JIT
// kernels need their ISA on the host, and fail to create otherwise. `prefetchBytes` < 0 takes the
// kernel's default distance, 0 turns software prefetch off (for the benchmark).
Result<std::unique_ptr<LinearKernel>> createLinearAvx512Bf16(size_t k, bool residual,
                                                             int prefetchBytes = -1);
std::unique_ptr<LinearKernel> createLinearBf16Portable(size_t k, bool residual);

} // namespace hetc::codegen
