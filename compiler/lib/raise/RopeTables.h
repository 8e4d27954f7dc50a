// The frequencies behind RoPE cos/sin tables [positions, columns], read from their values: the
// form transformers before 4.38 caches (`cos_cached`, cat(f, f) per row, gathered by position_ids)
// and ONNX Runtime's RotaryEmbedding takes (`cos_cache`, f per row).
#pragma once

#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/WeightStore.h"

#include "llvm/ADT/SmallVector.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace hetc {

// Row p of the tables holds cos(p * f) and sin(p * f); the frequencies f are read from rows 1 and
// the last, then every entry is checked against them, so a table of any other form (interleaved
// pairs, a scaled amplitude, positions not from 0) is refused with what differs. Results are kept
// per table pair: every layer reads the same tables. A table the graph computes from its inputs
// (over the total length, at run time) is evaluated for two lengths, whose frequencies must agree:
// frequencies that change with the length (dynamic scaling) are refused.
class RopeTables {
public:
  enum class Width {
    Duplicated, // [positions, rotary_dim]: cat(f, f), rotate-half's layout
    Pairs,      // [positions, rotary_dim]: f0, f0, f1, f1, ..., interleaved pairs' layout
    Half,       // [positions, rotary_dim / 2]: f alone
  };

  // `weights` gives a hetc.weight's values; without it (hetc-opt) tables must be hetc.constant.
  explicit RopeTables(const compiler::WeightStore *weights) : weights_(weights) {}
  const compiler::WeightStore *weights() const { return weights_; }

  // The rotary_dim / 2 frequencies of tables covering `rotaryDim` columns, or nothing with `why`
  // completing "the tables ...".
  std::optional<llvm::SmallVector<double>> recover(mlir::Value cos, mlir::Value sin,
                                                   int64_t rotaryDim, Width width,
                                                   std::string &why);

  // A table's elements and its [positions, columns] shape (leading ones dropped).
  struct Table {
    std::vector<float> values;
    llvm::SmallVector<int64_t> shape;
  };
  // The fraction bits of a table's (or a region's) floats: 7 for bf16, 10 for f16, else f32's 23.
  static int fractionBits(mlir::Type element) {
    return element.isBF16() ? 7 : element.isF16() ? 10 : 23;
  }

  // The frequencies of tables whose row p holds position p's cos and sin, in `element`'s
  // precision; or an empty list and why not, completing "the tables ...". Also what a rotation
  // read by its values (RotationFit.h) recovers its frequencies from.
  static std::pair<llvm::SmallVector<double>, std::string>
  fromTables(const Table &c, const Table &s, mlir::Type element, int64_t rotaryDim, Width width);

private:
  std::optional<Table> stored(mlir::Value v) const;
  // A table computed from the inputs (cos(arange(total) x inv_freq), indexed by position_ids),
  // evaluated for `rows` positions.
  std::optional<Table> evaluated(mlir::Value v, int64_t rows, std::string &why) const;
  std::pair<llvm::SmallVector<double>, std::string> compute(mlir::Value cos, mlir::Value sin,
                                                            int64_t rotaryDim, Width width) const;

  const compiler::WeightStore *weights_;
  // By (cos, sin, rotary_dim, width): the frequencies, or why there are none.
  std::map<std::tuple<const void *, const void *, int64_t, Width>,
           std::pair<llvm::SmallVector<double>, std::string>>
      recovered_;
};

} // namespace hetc
