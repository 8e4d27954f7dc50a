// The shapes of decoder-only models the cost model knows without their weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetc::compiler {

struct ModelShape {
  std::string name;
  uint32_t layers = 0;
  uint32_t hidden = 0; // d_m
  uint32_t heads = 0;
  uint32_t kvHeads = 0; // fewer than heads: grouped-query attention
  uint32_t headDim = 0;
  uint32_t ffn = 0;      // the feed-forward width
  bool gatedFfn = false; // SwiGLU: gate and up (two d_m x ffn weights) before down; else FC1, FC2
  uint32_t vocab = 0;
  bool tiedEmbeddings = false; // the LM head reuses the embedding table
  uint32_t maxContext = 0;

  uint64_t queryDim() const { return uint64_t{heads} * headDim; }
  uint64_t kvDim() const { return uint64_t{kvHeads} * headDim; }
};

// OPT-30B, OPT-66B, OPT-175B, Llama-2-70B, Llama-3-8B, Llama-3-70B, by lower-case name.
const std::vector<ModelShape> &knownModels();

// The model called `name` (case-insensitive), or null.
const ModelShape *findModel(const std::string &name);

} // namespace hetc::compiler
