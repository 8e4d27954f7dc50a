// Evaluating a computation of the graph inputs on sample inputs: what raising by meaning rests on.
// A mask, a position index or any other value computed from input_ids, attention_mask,
// position_ids and the past key/values' shapes is evaluated, by the ONNX interpreter, for a few
// concrete steps (new tokens after cached ones, one sequence or two, left padding or not) and
// compared with what the LLM op computes instead.
#pragma once

#include "hetc/compiler/WeightStore.h"
#include "import/OnnxInterpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>

namespace hetc {

// `batch` sequences of `seq` new tokens after `past` cached ones, the first sequence's
// attention_mask 0 on its first `padded` positions (left padding).
struct Sample {
  int64_t seq, past, batch, padded;
  // " (for 3 new tokens after 2 cached ones, a batch of 2, ...)", for messages.
  std::string described() const;
};

// Whether the graph takes a batch of one only: a graph input's first dimension is 1.
bool takesBatchOfOneOnly(mlir::func::FuncOp func);

class SampleEvaluator {
public:
  // `positions`: the graph input holding position_ids, if the caller knows it; otherwise the
  // input named position_ids, if any. `weights`: where the values of weights are read (none in
  // hetc-opt: a computation that reads a weight's values is then not evaluated).
  SampleEvaluator(mlir::func::FuncOp func, mlir::Value positions = {},
                  const compiler::WeightStore *weights = nullptr);

  // Whether the graph takes a batch of one only (takesBatchOfOneOnly): no sample of two.
  bool fixedBatchOfOne() const { return fixedBatchOfOne_; }

  // `v` at sample `s`. An LLM op may reach `v` through Shape or Size only (its values do not
  // matter, its shape does): it stands in as zeros of its shape at the sample. A weight is read
  // from the store, whatever its size (a [max_positions, max_positions] mask buffer is read
  // whole; the nodes after it compute only what the sample needs); read through Shape or Size
  // only, it stands in as zeros like an activation. On failure,
  // `error` completes "<v> ..." (it names the node or input that could not be evaluated).
  // `given` holds values the caller chose for LLM ops' results and graph inputs (a rotation
  // probed on basis inputs, RotationFit.h; an attention's caches, AttentionFit.h): those stand in
  // for themselves.
  std::optional<Tensor> evaluate(mlir::Value v, const Sample &s, std::string &error,
                                 const llvm::DenseMap<mlir::Value, Tensor> &given);
  std::optional<Tensor> evaluate(mlir::Value v, const Sample &s, std::string &error) {
    return evaluate(v, s, error, llvm::DenseMap<mlir::Value, Tensor>());
  }

private:
  std::optional<Tensor> sampleInput(mlir::BlockArgument arg, const Sample &s);
  std::optional<Tensor> standIn(mlir::Operation &op, const Sample &s);
  std::optional<Tensor> storedWeight(WeightOp weight) const;

  mlir::func::FuncOp func_;
  mlir::Value positions_;
  bool fixedBatchOfOne_;
  mlir::Value ids_;
  const compiler::WeightStore *weights_;
};

} // namespace hetc
