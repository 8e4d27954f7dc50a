// The compiler's entry point: an ONNX model in, a plan file out.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace hetc::compiler {

// How the plan stores linear and lm_head weights.
enum class WeightFormat {
  BF16, // packed for the BF16 kernels (WeightLayoutDef::LinearBf16N16K2); the default
  F32,  // float32 [N, K] (LinearNK): exact, for checks against a float32 reference
  // Every linear but the lm_head in int8 with a scale per output column (LinearInt8N16K4); the
  // lm_head (and a tied embedding) stays BF16.
  INT8,
  // Every linear but the lm_head in 4 bits with a scale and a zero point per output column and
  // group of k (LinearInt4N16K8); the lm_head stays BF16.
  INT4,
};

// How the plan stores linear weights: the format, and for INT4 the k per scale and whether the
// zero points are all 8 (symmetric: scale = max |w| / 7) or fitted to each group's range; and the
// lm_head's format (INT4 with the same groups).
struct WeightScheme {
  WeightScheme(WeightFormat format = WeightFormat::BF16, uint32_t groupSize = 32,
               bool symmetric = false, std::optional<WeightFormat> lmHead = std::nullopt)
      : format(format), groupSize(groupSize), symmetric(symmetric),
        lmHead(lmHead.value_or(format == WeightFormat::F32 ? WeightFormat::F32
                                                           : WeightFormat::BF16)) {}
  WeightFormat format;
  uint32_t groupSize; // 16, 32, 64 or 128
  bool symmetric;
  WeightFormat lmHead; // unset: BF16 (F32 with F32 linears)
};

// What the KV cache holds.
enum class KvFormat {
  BF16, // half the bytes per position: the default with BF16 weights
  F32,  // exact, the default with float32 weights
  INT8, // a quarter of f32's bytes and a float32 scale per (head, position) row of K and of V
};

struct CompileOptions {
  std::string onnxPath;
  std::string outputPath;
  // "host" (this machine's CPU alone), or a target the cost model plans devices and memory
  // tiers for: a name from compiler/targets or a .json file (Target.h).
  std::string target = "host";
  bool residentLayers = true;                // keep whole layers in spare GPU memory
  uint32_t maxBatch = 4;                     // sequence slots
  uint64_t maxSeq = 4096;                    // positions per sequence
  bool maxSeqAuto = false;                   // largest max-seq that fits the host (maxSeq unused)
  bool maxSeqDefault = false; // maxSeq is the default, not asked for: a model with fewer
                              // learned positions gets as many
  uint32_t maxStepTokens = 512;              // tokens one step processes (prefill chunk)
  WeightFormat weights = WeightFormat::BF16; // the layers' linear weights
  uint32_t groupSize = 32;                   // INT4 weights' k per scale and zero point
  bool int4Symmetric = false;                // INT4 weights: zero points 8, no offset fit
  // The lm_head's weights (and a tied embedding table's); unset: BF16, F32 with F32 weights.
  std::optional<WeightFormat> lmHead;
  std::optional<KvFormat> kv;                // KV cache elements; unset: as the weights
  bool verbose = false;                      // print the IR after each stage to stderr
  bool explain = false;                      // print which nodes became which LLM op to stdout
  // tokenizer.json (or its directory) to pack; empty: the one beside the model, if any.
  std::string tokenizer;
};

// The largest max-seq --max-seq auto picks.
inline constexpr uint64_t kMaxAutoSeq = uint64_t{1} << 24;

// Imports, raises, plans and emits. Every failure is one message naming the node, op or limit.
// For the host target the plan must fit in MemAvailable (/proc/meminfo): weights, KV cache at full
// max-seq and activations, else it fails naming the largest --max-seq that would fit. For another
// target the memory is the target's, and the device plan says where everything lives.
Status compileOnnxToPlan(const CompileOptions &options);

} // namespace hetc::compiler
