// An attention read by its values: the region between the query, key and value projections (with
// the cache's past inputs) and the value an output projection reads, whatever nodes compute the
// scores, the softmax, the mask and the weighted values in between. See docs/front-end.md,
// "Attentions by their values".
#pragma once

#include "hetc/compiler/WeightStore.h"
#include "raise/RotationFit.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>
#include <vector>

namespace hetc {

// What the fit reads: the region's ends, and how its keys and values were read (RotationFit on
// the new keys and values each cache appends).
struct AttentionRegion {
  mlir::Value out;               // [batch, sequence, heads * head_dim], an output projection's input
  mlir::Value q, k, v;           // the LLM values the region reads: q's, and the fits' projections
  mlir::Value pastK, pastV;      // the graph inputs the caches append to
  mlir::Value presentK, presentV; // the caches the graph returns, [batch, kv_heads, positions, head_dim]
  const RotationFit *keys = nullptr;   // the new keys: KV heads, head_dim, rotation, positions
  const RotationFit *values = nullptr; // the new values: the heads split alone
  llvm::ArrayRef<mlir::Operation *> nodes; // the region, in program order (for messages)
  // A constant the region offsets positions by before comparing them (a sliding window's size):
  // the mask is read past it too, since no fixed sample reaches every window.
  std::optional<int64_t> windowHint;
};

// The attention the region computes, in hetc.attention's terms.
struct AttentionRegionFit {
  int64_t heads = 0;              // query heads, grouped evenly over the KV heads
  double scale = 0.0;             // of q . k with k as the region's cache holds it
  std::optional<int64_t> window;  // the causal mask's sliding window, if any
  std::vector<float> alibiSlopes; // ALiBi's slope x key position, per query head; empty: none
  std::optional<double> softcap;  // the scores' soft-cap c * tanh(s / c), if any
  std::string described;          // for --explain (the hetc.fit attribute)
};

// The fit, or nothing with `why` completing "read by its values, ...": the region's query heads
// rotated as its keys are, each reading one KV head, softmax(scale * q . k (+ slope * key
// position) + causal mask) over the cached and new keys, times the values, within the rounding
// of the region's float type.
std::optional<AttentionRegionFit> fitAttentionRegion(const AttentionRegion &region,
                                                     const compiler::WeightStore *weights,
                                                     std::string &why);

} // namespace hetc
