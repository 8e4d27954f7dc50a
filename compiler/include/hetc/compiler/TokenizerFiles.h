// The tokenizer a plan packs: tokenizer.json and what the files beside it say about BOS, EOS and
// the chat template (hplan.fbs TokenizerDef, schema 1.11).
#pragma once

#include "hplan_generated.h"
#include "runtime/format/Status.h"

#include <memory>
#include <string>

namespace hetc::compiler {

struct TokenizerFiles {
  std::unique_ptr<plan::TokenizerDefT> def; // null: no tokenizer to pack
  uint32_t idCount = 0;                     // the ids it produces: 0 .. idCount - 1
  std::string note;                         // said after the source when packing, or empty
};

// `option` is --tokenizer: a tokenizer.json file, a SentencePiece .model file, or the directory
// holding one (tokenizer.json first, else tokenizer.model); empty: the same files beside
// `onnxPath`, when there is one (none: no def, not an error). A .model is converted into a
// tokenizer.json by hetc-sentencepiece (installed beside the program); the result is parsed and
// checked as the runtime will. Bos and eos ids come from generation_config.json, else
// config.json, else tokenizer_config.json's bos_token / eos_token, in the same directory, else
// the SentencePiece model's own pieces.
Result<TokenizerFiles> readTokenizerFiles(const std::string &option, const std::string &onnxPath);

} // namespace hetc::compiler
