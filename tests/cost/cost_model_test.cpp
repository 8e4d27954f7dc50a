// LIA's cost model: Table 1's sizes, generalised to GQA and SwiGLU, and Eq. 2-9 term by term
// against the equations written out here for a few policies.
#include "hetc/compiler/CostModel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace hetc::compiler {
namespace {

// Round numbers, so a wrong term shows as a wrong digit.
Machine roundMachine() {
  Machine m;
  m.hasGpu = true;
  m.cpuFlops = 1e12;
  m.ddrBytesPerS = 100e9;
  m.cxlBytesPerS = 20e9;
  m.gpuFlops = 10e12;
  m.gpuBytesPerS = 1000e9;
  m.pcieBytesPerS = 10e9;
  return m;
}

// A small OPT-like model: d = 64, four heads of 16, FFN 256.
ModelShape smallOpt() {
  ModelShape m;
  m.name = "small-opt";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kvHeads = 4;
  m.headDim = 16;
  m.ffn = 256;
  m.vocab = 100;
  m.tiedEmbeddings = true;
  m.maxContext = 128;
  return m;
}

void expectSublayer(const SublayerSize &s, double x, double y, double flops, const char *what) {
  EXPECT_DOUBLE_EQ(s.xBytes, x) << what;
  EXPECT_DOUBLE_EQ(s.yBytes, y) << what;
  EXPECT_DOUBLE_EQ(s.flops, flops) << what;
}

TEST(CostModel, PolicyConventionIsOneForCpu) {
  EXPECT_EQ(Policy::partialCpu().text(), "(0,1,1,0,0,0)");
  EXPECT_TRUE(Policy::partialCpu().onCpu(1));
  EXPECT_FALSE(Policy::partialCpu().onCpu(0));
  EXPECT_EQ(Policy::allCpu().text(), "(1,1,1,1,1,1)");
  EXPECT_EQ(Policy::allGpu().text(), "(0,0,0,0,0,0)");
  EXPECT_EQ(Policy::fromBits(0x21).values(), (std::array<int, 6>{1, 0, 0, 0, 0, 1}));
}

// LIA Table 1, OPT-175B (d_m = 12288).
TEST(CostModel, TableOneForOpt) {
  const ModelShape &opt = *findModel("opt-175b");
  const double d = 12288, b = 3, l = 7;
  const LayerSize prefill = layerSize(opt, Stage::Prefill, 3, 7);
  expectSublayer(prefill.sublayers[0], 2 * b * l * d, 6 * d * d, 6 * b * l * d * d, "qkv");
  expectSublayer(prefill.sublayers[1], 2 * b * l * d, 2 * b * l * d, 2 * b * l * l * d, "qk");
  expectSublayer(prefill.sublayers[2], 2 * b * l * d, 2 * b * l * d, 2 * b * l * l * d, "sv");
  expectSublayer(prefill.sublayers[3], 2 * b * l * d, 2 * d * d, 2 * b * l * d * d, "out");
  expectSublayer(prefill.sublayers[4], 2 * b * l * d, 8 * d * d, 8 * b * l * d * d, "fc1");
  expectSublayer(prefill.sublayers[5], 8 * b * l * d, 8 * d * d, 8 * b * l * d * d, "fc2");
  EXPECT_DOUBLE_EQ(prefill.kvStoreBytes, 4 * b * l * d);
  EXPECT_DOUBLE_EQ(prefill.weightBytes(), 24 * d * d);

  const double db = 5, dl = 100;
  const LayerSize decode = layerSize(opt, Stage::Decode, 5, 100);
  expectSublayer(decode.sublayers[0], 2 * db * d, 6 * d * d, 6 * db * d * d, "qkv");
  expectSublayer(decode.sublayers[1], 2 * db * d, 2 * db * dl * d, 2 * db * dl * d, "qk");
  expectSublayer(decode.sublayers[2], 2 * db * d, 2 * db * dl * d, 2 * db * dl * d, "sv");
  expectSublayer(decode.sublayers[3], 2 * db * d, 2 * d * d, 2 * db * d * d, "out");
  expectSublayer(decode.sublayers[4], 2 * db * d, 8 * d * d, 8 * db * d * d, "fc1");
  expectSublayer(decode.sublayers[5], 8 * db * d, 8 * d * d, 8 * db * d * d, "fc2");
  EXPECT_DOUBLE_EQ(decode.kvStoreBytes, 4 * db * d);
}

// GQA shrinks the K and V projections and the cache, not the scoring work; SwiGLU doubles FC1.
TEST(CostModel, TableOneGeneralisedToGqaAndSwiGlu) {
  const ModelShape &llama = *findModel("llama-3-70b");
  const double d = 8192, kv = 8 * 128, f = 28672, b = 4, l = 1000;
  const LayerSize decode = layerSize(llama, Stage::Decode, 4, 1000);
  expectSublayer(decode.sublayers[0], 2 * b * d, 2 * d * (d + 2 * kv), 2 * b * d * (d + 2 * kv),
                 "qkv");
  expectSublayer(decode.sublayers[1], 2 * b * d, 2 * b * l * kv, 2 * b * l * d, "qk");
  expectSublayer(decode.sublayers[2], 2 * b * d, 2 * b * l * kv, 2 * b * l * d, "sv");
  expectSublayer(decode.sublayers[3], 2 * b * d, 2 * d * d, 2 * b * d * d, "out");
  expectSublayer(decode.sublayers[4], 2 * b * d, 2 * d * 2 * f, 2 * b * d * 2 * f, "gate+up");
  expectSublayer(decode.sublayers[5], 2 * b * f, 2 * f * d, 2 * b * f * d, "down");
  EXPECT_DOUBLE_EQ(decode.kvStoreBytes, 4 * b * kv);
  // About 0.86 GB of BF16 weights per layer: 70B parameters over 80 layers, less embeddings.
  EXPECT_NEAR(decode.weightBytes() * 80 / 2, 68.5e9, 0.5e9);
}

// Eq. 2-9 for the partial offloading policy in decode, written out term by term.
TEST(CostModel, PartialOffloadDecodeFollowsTheEquations) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Decode, 8, 50);
  const auto &s = z.sublayers;
  auto gpu = [&](int i) { return (s[i].xBytes + s[i].yBytes) / 1000e9 + s[i].flops / 10e12; };
  auto cpu = [&](int i) { return (s[i].xBytes + s[i].yBytes) / 100e9 + s[i].flops / 1e12; };
  const double pcie = 10e9;

  const LayerTime t = evaluate(z, Policy::partialCpu(), LayerPlacement{}, m);
  // QKV on the GPU: its weights over PCIe (Eq. 5), the new KV back to DDR (Eq. 9).
  EXPECT_DOUBLE_EQ(t.sublayers[0].load, s[0].yBytes / pcie);
  EXPECT_DOUBLE_EQ(t.sublayers[0].store, z.kvStoreBytes / pcie);
  // Q x K^T on the CPU: Q comes over (Eq. 4); the KV cache is read where it is, in DDR.
  EXPECT_DOUBLE_EQ(t.sublayers[1].load, s[1].xBytes / pcie);
  EXPECT_DOUBLE_EQ(t.sublayers[2].load, 0);
  // Output projection back on the GPU: its input over (Eq. 4), its weights (Eq. 5); the
  // residual is the layer input, already on the GPU (Eq. 6).
  EXPECT_DOUBLE_EQ(t.sublayers[3].load, s[3].xBytes / pcie + s[3].yBytes / pcie);
  EXPECT_DOUBLE_EQ(t.sublayers[4].load, s[4].yBytes / pcie);
  EXPECT_DOUBLE_EQ(t.sublayers[5].load, s[5].yBytes / pcie);

  const double compute = gpu(0) + cpu(1) + cpu(2) + gpu(3) + gpu(4) + gpu(5);
  const double transfers = (s[0].yBytes + z.kvStoreBytes + s[1].xBytes + s[3].xBytes + s[3].yBytes +
                            s[4].yBytes + s[5].yBytes) /
                           pcie;
  EXPECT_DOUBLE_EQ(t.cpu, cpu(1) + cpu(2));
  EXPECT_DOUBLE_EQ(t.gpu, gpu(0) + gpu(3) + gpu(4) + gpu(5));
  EXPECT_DOUBLE_EQ(t.pcie, transfers);
  EXPECT_NEAR(t.serial, compute + transfers, 1e-15);
  // Optimization-2: only the activations the chain waits for stay on its path.
  const double chain = compute + (s[1].xBytes + s[3].xBytes) / pcie;
  EXPECT_NEAR(t.overlapped, std::max(chain, transfers), 1e-15);
  EXPECT_LT(t.overlapped, t.serial);
}

// QKV on the CPU with the rest of the layer on the GPU: the layer input and the residual cross.
TEST(CostModel, ResidualAndLayerInputFollowTheDevices) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Decode, 8, 50);
  const auto &s = z.sublayers;
  const Policy policy = Policy::fromBits(0x01); // (1,0,0,0,0,0)
  const LayerTime t = evaluate(z, policy, LayerPlacement{}, m);
  const double pcie = 10e9;
  // p_0 = p_6 = GPU: the layer input comes to the CPU (Eq. 4), no KV store (QKV on the CPU).
  EXPECT_DOUBLE_EQ(t.sublayers[0].load, s[0].xBytes / pcie);
  EXPECT_DOUBLE_EQ(t.sublayers[0].store, 0);
  // Q x K^T on the GPU: Q comes over, and the KV cache from DDR (decode, Eq. 5).
  EXPECT_DOUBLE_EQ(t.sublayers[1].load, s[1].xBytes / pcie + s[1].yBytes / pcie);
  // Output projection on the GPU, QKV's device is the CPU: the residual crosses (Eq. 6).
  EXPECT_DOUBLE_EQ(t.sublayers[3].load, z.residualBytes / pcie + s[3].yBytes / pcie);
}

// Prefill: K and V come from QKV mapping (Eq. 7), not from the cache.
TEST(CostModel, PrefillAttentionReadsTheFreshKeys) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Prefill, 2, 16);
  const auto &s = z.sublayers;
  const double pcie = 10e9;
  // All on the GPU: attention needs no transfer; the new KV goes to DDR.
  const LayerTime gpu = evaluate(z, Policy::allGpu(), LayerPlacement{}, m);
  EXPECT_DOUBLE_EQ(gpu.sublayers[1].load, 0);
  EXPECT_DOUBLE_EQ(gpu.sublayers[2].load, 0);
  EXPECT_DOUBLE_EQ(gpu.sublayers[0].store, z.kvStoreBytes / pcie);
  // Attention on the CPU, QKV on the GPU: Q, K and V cross, on the chain's path.
  const LayerTime split = evaluate(z, Policy::partialCpu(), LayerPlacement{}, m);
  EXPECT_DOUBLE_EQ(split.sublayers[1].load, (s[1].xBytes + s[1].yBytes) / pcie);
  EXPECT_DOUBLE_EQ(split.sublayers[1].loadOnPath, split.sublayers[1].load);
  EXPECT_DOUBLE_EQ(split.sublayers[2].load, s[2].yBytes / pcie);
}

TEST(CostModel, AllCpuNeedsNoLink) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Decode, 8, 50);
  const LayerTime t = evaluate(z, Policy::allCpu(), LayerPlacement{}, m);
  double expected = 0;
  for (const SublayerSize &s : z.sublayers)
    expected += (s.xBytes + s.yBytes) / 100e9 + s.flops / 1e12;
  EXPECT_EQ(t.pcie, 0);
  EXPECT_EQ(t.gpu, 0);
  EXPECT_NEAR(t.serial, expected, 1e-15);
  EXPECT_EQ(t.overlapped, t.serial);
}

// Where operands live changes what crosses the link and how fast the CPU reads them.
TEST(CostModel, PlacementTiers) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Decode, 8, 50);
  const auto &s = z.sublayers;

  LayerPlacement resident;
  resident.weightsOnGpu.fill(true);
  const LayerTime onGpu = evaluate(z, Policy::allGpu(), resident, m);
  EXPECT_DOUBLE_EQ(onGpu.sublayers[4].load, 0); // Optimization-1: no weight transfer
  EXPECT_DOUBLE_EQ(onGpu.sublayers[1].load, s[1].yBytes / 10e9); // the KV cache still crosses

  LayerPlacement cxl;
  cxl.weightHostTier = Tier::Cxl;
  const LayerTime cpuOnCxl = evaluate(z, Policy::allCpu(), cxl, m);
  EXPECT_DOUBLE_EQ(cpuOnCxl.sublayers[4].compute,
                   s[4].xBytes / 100e9 + s[4].yBytes / 20e9 + s[4].flops / 1e12);
  // Copies from CXL run at the slower of the link and the tier (LIA Observation-1).
  const LayerTime gpuFromCxl = evaluate(z, Policy::allGpu(), cxl, m);
  EXPECT_DOUBLE_EQ(gpuFromCxl.sublayers[4].load, s[4].yBytes / 10e9);
  Machine slowCxl = m;
  slowCxl.cxlBytesPerS = 5e9;
  EXPECT_DOUBLE_EQ(evaluate(z, Policy::allGpu(), cxl, slowCxl).sublayers[4].load,
                   s[4].yBytes / 5e9);

  // Gupta's All-CPU: KV on the GPU; attention on the CPU must fetch it, QKV on the GPU keeps it.
  LayerPlacement kvOnGpu;
  kvOnGpu.kvTier = Tier::Gpu;
  const LayerTime partial = evaluate(z, Policy::partialCpu(), kvOnGpu, m);
  EXPECT_DOUBLE_EQ(partial.sublayers[2].load, s[2].yBytes / 10e9);
  EXPECT_DOUBLE_EQ(partial.sublayers[0].store, 0);
}

TEST(CostModel, RankingIsExhaustiveAndOrdered) {
  const Machine m = roundMachine();
  const LayerSize z = layerSize(smallOpt(), Stage::Decode, 8, 50);
  for (Timing timing : {Timing::Serial, Timing::Overlapped}) {
    const std::vector<RankedPolicy> ranked = rankPolicies(z, LayerPlacement{}, m, timing);
    ASSERT_EQ(ranked.size(), 64u);
    for (size_t i = 1; i < ranked.size(); ++i)
      EXPECT_LE(ranked[i - 1].time.total(timing), ranked[i].time.total(timing));
    double best = std::numeric_limits<double>::infinity();
    for (unsigned bits = 0; bits < 64; ++bits)
      best = std::min(best, evaluate(z, Policy::fromBits(bits), LayerPlacement{}, m).total(timing));
    EXPECT_EQ(ranked.front().time.total(timing), best);
  }
}

TEST(CostModel, WithoutGpuOnlyAllCpu) {
  Machine m = roundMachine();
  m.hasGpu = false;
  const LayerSize z = layerSize(smallOpt(), Stage::Prefill, 8, 50);
  const std::vector<RankedPolicy> ranked = rankPolicies(z, LayerPlacement{}, m, Timing::Serial);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].policy, Policy::allCpu());
  EXPECT_TRUE(std::isinf(evaluate(z, Policy::partialCpu(), LayerPlacement{}, m).serial));
}

} // namespace
} // namespace hetc::compiler
