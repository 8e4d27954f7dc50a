// Operator-level split points of a decode step (Park & Egger, Eq. 5-7, 13 and 14).
//
// A decoder layer is a sequence of operators O[1..n], each with a CPU time C, a GPU time G and a
// host-to-device transfer time H (its weights, or its KV cache for the attention BMMs). The GPU
// computes one contiguous run of them, the CPU the operators before and after it, and the CPU's
// work overlaps the transfers the GPU's run needs:
//
//     L = max(CPU(i, j), H2D(i, j))                                          (Eq. 5)
//     CPU(i, j) = n_b * (sum C[1..i-1] + sum C[j..n])                       (Eq. 6)
//     H2D(i, j) = sum H[i..j-1] + (n_b - 1) * (sum G[i..j-1] + KV[i..j-1])  (Eq. 7, 14)
//
// with n_b batches sharing the weights (one: Eq. 5-7) whose KV caches all cross the link. The
// GPU's run is [i, j); i = 1 leaves a CPU suffix only and j = n + 1 a CPU prefix only (one
// split point), i = j no GPU work. An operator marked splittable (the scores BMM) may also be cut
// at a split point into `chunks` equal parts, the CPU taking some and the GPU the rest.
#pragma once

#include "hetc/compiler/CostModel.h"

#include <string>
#include <vector>

namespace hetc::compiler {

struct OperatorTime {
  std::string name;
  double cpuMs = 0;
  double gpuMs = 0;
  double h2dMs = 0;
  bool cacheData = false;  // h2dMs moves KV cache, once per batch (Eq. 14)
  bool splittable = false; // may be cut between the devices
};

// A CSV table with the header "op,h2d_ms,cpu_ms,gpu_ms,cache,splittable" (cache and splittable
// are 0 or 1); one operator a line, in execution order. `origin` names it in errors.
Result<std::vector<OperatorTime>> parseOperatorTimes(const std::string &csvText,
                                                     const std::string &origin);
Result<std::vector<OperatorTime>> loadOperatorTimes(const std::string &path);

// The decode step's operators predicted by the cost model (Eq. 8 for C and G, D_Y over the link
// for H): q, k, v, scores, wv, out, then fc1 and fc2 (SwiGLU: gate, up, down). Scores is
// splittable, as Park & Egger split it.
std::vector<OperatorTime> predictOperatorTimes(const ModelShape &model, const Machine &machine,
                                               uint64_t batch, uint64_t len,
                                               const LayerPlacement &placement);

struct Split {
  // The GPU computes the operators over positions [gpuBegin, gpuEnd), the CPU the rest; position
  // k is the boundary before operator k (from 0), and k + f is a fraction f into operator k.
  double gpuBegin = 0;
  double gpuEnd = 0;
  double cpuMs = 0;
  double h2dMs = 0;
  double latencyMs = 0;
  unsigned splitPoints = 0; // boundaries strictly inside the layer: 0, 1 or 2
  bool cutsOperator = false;
};

struct SplitSearch {
  unsigned batches = 1;
  Split gpuOnly;    // every operator on the GPU: the baseline
  Split prefixOnly; // best with the CPU running a prefix only (Park & Egger Fig. 14(a), (c))
  Split prefixCut;  // the same with operators cut (Fig. 14(b), (d))
  Split single;     // best with one split point (a CPU prefix or suffix), whole operators
  Split twoPoints;  // best with at most two split points, whole operators
  Split best;       // best with operators cut too
};

// Exhaustive: every pair of split points (Eq. 13's n(n-1)/2 and the single ones), plus cuts of
// splittable operators in 1/chunks steps. Ties go to fewer split points, then to no cut, then to
// the smaller CPU/transfer imbalance.
SplitSearch searchSplits(const std::vector<OperatorTime> &ops, unsigned batches,
                         unsigned chunks = 8);

// "cpu: ln0..v | gpu: scores..fc0 | cpu: fc1", with "3/8 scores" for a cut operator.
std::string describeSplit(const std::vector<OperatorTime> &ops, const Split &split);

} // namespace hetc::compiler
