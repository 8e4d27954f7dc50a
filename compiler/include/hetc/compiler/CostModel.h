// LIA's cost model of one decoder layer on a CPU beside a GPU (Kim et al., ISCA'25, Eq. 1-9 and
// Table 1), generalised from OPT to grouped-query attention and SwiGLU, for prefill and decode.
//
// A decoder layer is six sublayers, in LIA's order: QKV mapping, Q x K^T, S x V, output
// projection, FC1 (SwiGLU: gate and up), FC2 (down). A policy p = (p1..p6) says where each runs:
//
//     p_i = 1: sublayer i runs on the CPU;  p_i = 0: it runs on the GPU.
//
// This is LIA's text and its published policies ((0,1,1,0,0,0) is "partial CPU offloading");
// the printed Eq. 5, 8 and 9 use the opposite convention and are read here with it flipped.
//
// The layer time of a policy is the sum over sublayers of load + compute + store (Eq. 2,
// Timing::Serial), as the paper searches it; Timing::Overlapped is Optimization-2: loads of
// weights and of the KV cache and stores of new KV run on the PCIe link beside the compute, so
// a layer takes the longer of the dependent chain (compute plus the activation transfers it
// waits for) and the link's total busy time.
#pragma once

#include "hetc/compiler/ModelShape.h"
#include "hetc/compiler/Target.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace hetc::compiler {

enum class Stage { Prefill, Decode };
const char *stageName(Stage stage); // "prefill", "decode"

inline constexpr unsigned kSublayerCount = 6;
// "qkv", "qk", "sv", "out", "fc1", "fc2": LIA's sublayers 1-6.
extern const std::array<const char *, kSublayerCount> kSublayerNames;

class Policy {
public:
  constexpr Policy() = default;
  // Bit i (from 0) is p_{i+1}.
  static constexpr Policy fromBits(unsigned bits) { return Policy(bits & 0x3f); }
  static constexpr Policy allCpu() { return Policy(0x3f); }
  static constexpr Policy allGpu() { return Policy(0); }
  // LIA's partial CPU offloading: attention scoring on the CPU, the rest on the GPU.
  static constexpr Policy partialCpu() { return Policy(0x06); }

  bool onCpu(unsigned sublayer) const { return (bits_ >> sublayer) & 1u; }
  unsigned bits() const { return bits_; }
  std::array<int, kSublayerCount> values() const;
  std::string text() const; // "(0,1,1,0,0,0)"
  bool operator==(Policy other) const { return bits_ == other.bits_; }
  bool operator!=(Policy other) const { return bits_ != other.bits_; }

private:
  constexpr explicit Policy(unsigned bits) : bits_(bits) {}
  unsigned bits_ = 0;
};

// Where data lives: GPU memory, host DDR, or the slow host tier (CXL or another NUMA node).
enum class Tier { Gpu, Ddr, Cxl };
const char *tierName(Tier tier); // "GPU", "DDR", "CXL"

// Where one decoder layer's operands live. Host copies of the weights always exist (LIA keeps
// every parameter in CPU memory); a GPU copy is what Optimization-1 and HeLM add.
struct LayerPlacement {
  std::array<bool, kSublayerCount> weightsOnGpu{}; // indexed by sublayer; qk and sv have none
  Tier weightHostTier = Tier::Ddr;                 // DDR, or CXL (LIA section 6)
  Tier kvTier = Tier::Ddr;                         // DDR or CXL, or GPU (Gupta's All-CPU)
};

// One sublayer's operands and work (LIA Table 1): D_X, the activation; D_Y, the weights or, for
// qk and sv, the keys or values; C, the FLOPs.
struct SublayerSize {
  double xBytes = 0;
  double yBytes = 0;
  double flops = 0;
  bool yIsWeight = false;
};

// One decoder layer at a batch and length: for prefill, `batch` prompts of `len` tokens; for
// decode, one new token for each of `batch` sequences attending `len` positions.
struct LayerSize {
  Stage stage = Stage::Decode;
  uint64_t batch = 0;
  uint64_t len = 0;
  std::array<SublayerSize, kSublayerCount> sublayers;
  double kvStoreBytes = 0;  // D_KV of Eq. 9: the K and V rows the step writes
  double residualBytes = 0; // the hidden state a residual add reads (Eq. 6)
  double weightBytes() const;
};

// Table 1 for `model` in BF16 (2 bytes an element). Q x K^T and S x V keep the table's D_X of
// the query-sized activation and its full (not causal-halved) prefill FLOPs.
LayerSize layerSize(const ModelShape &model, Stage stage, uint64_t batch, uint64_t len);

// The rates Eq. 3-9 read, in bytes/s and FLOP/s, from a target's achieved figures.
struct Machine {
  bool hasGpu = false;
  double cpuFlops = 0;      // TH_AMX
  double ddrBytesPerS = 0;  // BW_CPU
  double cxlBytesPerS = 0;  // the CPU reading the CXL tier; 0 without one
  double gpuFlops = 0;      // TH_GPU
  double gpuBytesPerS = 0;  // BW_GPU
  double pcieBytesPerS = 0; // BW_PCIe

  static Machine of(const Target &target);
  // The CPU reading data held in `tier` (a host tier).
  double cpuReadBytesPerS(Tier tier) const;
  // Host-to-GPU copies from `tier`: the link, or the CXL tier when it is slower (Observation-1).
  double pcieFromBytesPerS(Tier tier) const;
};

enum class Timing { Serial, Overlapped };
const char *timingName(Timing timing); // "serial", "overlapped"

struct SublayerTime {
  double load = 0;       // Eq. 3: operands brought over PCIe to the sublayer's device
  double compute = 0;    // Eq. 8
  double store = 0;      // Eq. 9: new KV written back to where the cache lives
  double loadOnPath = 0; // the part of `load` that waits for the previous sublayer's result
};

struct LayerTime {
  std::array<SublayerTime, kSublayerCount> sublayers;
  double cpu = 0;  // compute on the CPU, seconds
  double gpu = 0;  // compute on the GPU
  double pcie = 0; // every transfer over the link
  double serial = 0;
  double overlapped = 0;
  double total(Timing timing) const { return timing == Timing::Serial ? serial : overlapped; }
};

// Eq. 2-9 for one policy. A policy with a GPU sublayer on a machine without one is infinitely
// slow.
LayerTime evaluate(const LayerSize &size, Policy policy, const LayerPlacement &placement,
                   const Machine &machine);

struct RankedPolicy {
  Policy policy;
  LayerTime time;
};

// Eq. 1: all 2^6 policies (only all-CPU without a GPU), fastest first under `timing`; a tie goes
// to the policy with fewer device changes, then to the smaller bit pattern.
std::vector<RankedPolicy> rankPolicies(const LayerSize &size, const LayerPlacement &placement,
                                       const Machine &machine, Timing timing);

} // namespace hetc::compiler
