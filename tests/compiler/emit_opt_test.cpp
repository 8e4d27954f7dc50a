// The planning passes and the plan emitter on a raised OPT-style model (tests/lit/Inputs/
// small_opt.mlir): the plan the loader reads back holds LayerNorm and Activation ops with their
// params and weights, the learned positions as the embedding's own f32 tensor (also when the
// table is the tied BF16 lm_head), and architecture "opt".
#include "hetc/Dialect/HetcDialect.h"
#include "hetc/compiler/Compile.h"
#include "hetc/compiler/Passes.h"
#include "hetc/compiler/PlanEmitter.h"
#include "hetc/compiler/WeightStore.h"
#include "runtime/format/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace hetc::compiler {
namespace {

struct EmittedPlan {
  std::unique_ptr<Plan> plan;
  std::vector<float> positions; // the store's [18, 8] position rows
};

// Plans and emits small_opt.mlir with random weights, then loads the plan.
EmittedPlan emitSmallOpt(WeightFormat format, llvm::StringRef kvDtype) {
  mlir::DialectRegistry registry;
  registry.insert<hetc::HetcDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(HETC_LIT_INPUTS "/small_opt.mlir", &context);
  EXPECT_TRUE(module);
  if (!module)
    return {};

  WeightStore weights;
  auto buffers = std::make_shared<std::vector<std::vector<float>>>();
  weights.keepAlive(buffers);
  std::mt19937 random(3);
  EmittedPlan emitted;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"embed_tokens", {16, 8}},
      {"embed_positions", {18, 8}},
      {"gamma", {8}},
      {"beta", {8}},
      {"w88", {8, 8}},
      {"b8", {8}},
      {"w812", {8, 12}},
      {"b12", {12}},
      {"w128", {12, 8}}};
  buffers->reserve(shapes.size());
  for (const auto &[name, shape] : shapes) {
    int64_t elements = 1;
    for (int64_t dim : shape)
      elements *= dim;
    std::vector<float> &values = buffers->emplace_back(elements);
    for (float &v : values)
      v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(random);
    if (name == "embed_positions")
      emitted.positions = values;
    weights.add(StoredWeight{name, WeightElementType::F32, shape, values.data(),
                             static_cast<uint64_t>(elements) * sizeof(float)});
  }

  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  hetc::addPlanningPasses(pm, hetc::PlanBounds{2, 16, 5}, kvDtype);
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("hetc-emit-opt-" + std::to_string(::getpid()) + ".hplan"))
                               .string();
  std::string error;
  EXPECT_TRUE(mlir::succeeded(emitPlan(*module, weights, "host", format, path, error))) << error;
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
  if (loaded.ok())
    emitted.plan = std::move(loaded.value());
  return emitted;
}

void expectOptPlan(const EmittedPlan &emitted, const char *what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(emitted.plan);
  const plan::PlanDef &def = emitted.plan->def();
  EXPECT_EQ(def.model()->architecture()->str(), "opt");
  EXPECT_EQ(def.model()->intermediate(), 12u);
  unsigned layerNorms = 0, activations = 0;
  for (const plan::OpDef *op : *def.ops()) {
    switch (op->kind()) {
    case plan::OpKindDef::Embedding: {
      EXPECT_EQ(op->params_as_EmbeddingParamsDef()->position_offset(), 2u);
      ASSERT_EQ(op->weights()->size(), 2u);
      const plan::TensorDef &positions = *def.tensors()->Get(op->weights()->Get(1));
      EXPECT_EQ(positions.dtype(), plan::DTypeDef::F32);
      EXPECT_EQ(positions.layout(), plan::WeightLayoutDef::RowMajor);
      ASSERT_EQ(positions.shape()->size(), 2u);
      EXPECT_EQ(positions.shape()->Get(0), 18u);
      EXPECT_EQ(positions.shape()->Get(1), 8u);
      EXPECT_EQ(std::memcmp(emitted.plan->tensorData(op->weights()->Get(1)),
                            emitted.positions.data(), emitted.positions.size() * sizeof(float)),
                0);
      break;
    }
    case plan::OpKindDef::LayerNorm:
      ++layerNorms;
      EXPECT_TRUE(op->params_as_LayerNormParamsDef()->bias());
      EXPECT_EQ(op->params_as_LayerNormParamsDef()->eps(), 1e-5f);
      EXPECT_EQ(op->weights()->size(), 2u);
      break;
    case plan::OpKindDef::Activation:
      ++activations;
      EXPECT_EQ(op->params_as_ActivationParamsDef()->function(), plan::ActivationFunctionDef::Relu);
      EXPECT_EQ(static_cast<unsigned>(op->cost_sublayers()),
                static_cast<unsigned>(plan::CostSublayerBits::FC1));
      break;
    case plan::OpKindDef::RmsNorm:
    case plan::OpKindDef::SwiGlu:
      ADD_FAILURE() << "an OPT plan holds no " << plan::EnumNameOpKindDef(op->kind());
      break;
    default:
      break;
    }
  }
  EXPECT_EQ(layerNorms, 3u); // two in the layer, the final norm
  EXPECT_EQ(activations, 1u);
}

TEST(EmitOptTest, F32PlanHoldsTheOptOps) {
  expectOptPlan(emitSmallOpt(WeightFormat::F32, "f32"), "f32");
}

// The embedding table is the tied lm_head's packed BF16 weight; the positions stay f32.
TEST(EmitOptTest, Bf16PlanKeepsPositionsF32) {
  const EmittedPlan emitted = emitSmallOpt(WeightFormat::BF16, "bf16");
  expectOptPlan(emitted, "bf16");
  ASSERT_TRUE(emitted.plan);
  const plan::PlanDef &def = emitted.plan->def();
  EXPECT_TRUE(def.model()->tied_embeddings());
  const plan::OpDef &embedding = *def.ops()->Get(0);
  ASSERT_EQ(embedding.kind(), plan::OpKindDef::Embedding);
  EXPECT_EQ(def.tensors()->Get(embedding.weights()->Get(0))->layout(),
            plan::WeightLayoutDef::LinearBf16N16K2);
}

} // namespace
} // namespace hetc::compiler
