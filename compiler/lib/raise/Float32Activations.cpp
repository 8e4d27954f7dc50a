// Every LLM op's activation results become float32 tensors of the same shape (see Passes.td).
#include "hetc/compiler/Passes.h"
#include "import/OnnxGraph.h"

namespace hetc {
#define GEN_PASS_DEF_FLOAT32ACTIVATIONS
#include "hetc/compiler/Passes.h.inc"
} // namespace hetc

using namespace mlir;
using namespace hetc;

namespace {

struct Float32ActivationsPass : public hetc::impl::Float32ActivationsBase<Float32ActivationsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    Type f32 = Float32Type::get(&getContext());
    func.walk([&](Operation *op) {
      if (!isa<LlmOp>(op))
        return;
      // hetc.attention's other results are its KV cache, whose format the plan decides.
      unsigned activations = isa<AttentionOp>(op) ? 1 : op->getNumResults();
      for (unsigned r = 0; r < activations; ++r) {
        Value result = op->getResult(r);
        if (auto type = dyn_cast<TensorType>(result.getType());
            type && isa<FloatType>(type.getElementType()) && type.getElementType() != f32)
          result.setType(type.clone(f32));
      }
    });
    syncResultTypes(func);
  }
};

} // namespace
