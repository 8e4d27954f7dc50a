// Published architecture constants: the OPT paper's Table 1 (Zhang et al. 2022) and the models'
// Hugging Face configurations (Llama 2, Llama 3).
#include "hetc/compiler/ModelShape.h"

#include <algorithm>
#include <cctype>

namespace hetc::compiler {

const std::vector<ModelShape> &knownModels() {
  static const std::vector<ModelShape> models = {
      // name, layers, hidden, heads, kvHeads, headDim, ffn, gated, vocab, tied, maxContext
      {"opt-30b", 48, 7168, 56, 56, 128, 28672, false, 50272, true, 2048},
      {"opt-66b", 64, 9216, 72, 72, 128, 36864, false, 50272, true, 2048},
      {"opt-175b", 96, 12288, 96, 96, 128, 49152, false, 50272, true, 2048},
      {"llama-2-70b", 80, 8192, 64, 8, 128, 28672, true, 32000, false, 4096},
      {"llama-3-8b", 32, 4096, 32, 8, 128, 14336, true, 128256, false, 8192},
      {"llama-3-70b", 80, 8192, 64, 8, 128, 28672, true, 128256, false, 8192},
  };
  return models;
}

const ModelShape *findModel(const std::string &name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const ModelShape &model : knownModels())
    if (model.name == lower)
      return &model;
  return nullptr;
}

} // namespace hetc::compiler
