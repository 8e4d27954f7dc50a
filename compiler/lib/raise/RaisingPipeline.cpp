// The raising pipeline: fold, raise from the smallest patterns to the largest, clean up, check.
#include "hetc/compiler/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

void hetc::addRaisingPasses(mlir::OpPassManager &pm, const compiler::WeightStore *weights) {
  mlir::OpPassManager &fn = pm.nest<mlir::func::FuncOp>();
  // Folding first: constant shape arithmetic and no-op casts would hide every pattern.
  fn.addPass(hetc::createFoldConstants());
  // Shapes evaluated over the symbolic dimensions: a computed head split, broadcast or slice
  // bound becomes the constant it equals, then whatever that makes constant folds.
  fn.addPass(hetc::createFoldShapes());
  fn.addPass(hetc::createFoldConstants());
  fn.addPass(mlir::createCSEPass());
  // ONNX Runtime's fused ops are LLM ops already, or an Add and one: raised before the patterns
  // that read their results.
  fn.addPass(hetc::createRaiseContribOps(weights));
  fn.addPass(hetc::createRaiseEmbedding());
  fn.addPass(hetc::createRaiseNorm(weights));
  // Linear before attention and swiglu: their operands are then LLM values.
  fn.addPass(hetc::createRaiseLinear());
  fn.addPass(hetc::createRaiseSwiGlu());
  fn.addPass(hetc::createRaiseActivation());
  // Again: a gate whose activation was raised by its values (a GELU: GeGLU).
  fn.addPass(hetc::createRaiseSwiGlu());
  fn.addPass(hetc::createRaiseAttention(weights));
  // Residual adds join LLM values, so they come after everything that produces them.
  fn.addPass(hetc::createRaiseResidualAdd());
  fn.addPass(hetc::createRaiseLmHead());
  fn.addPass(hetc::createFloat32Activations());
  fn.addPass(mlir::createCanonicalizerPass());
  fn.addPass(mlir::createCSEPass());
  fn.addPass(hetc::createCheckRaised());
}
