// A SentencePiece model (tokenizer.model) as the Hugging Face tokenizer.json the runtime's
// Tokenizer runs: BPE or Unigram with the same pieces, ids, scores, byte fallback and
// whitespace handling, so that encoding a text gives libsentencepiece's ids. Built only with the
// compiler; it links libsentencepiece, which the runtime never does.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace hetc::spm {

struct ConversionOptions {
  // Whether encoding puts the BOS (EOS) piece around the text, as tokenizer_config.json's
  // add_bos_token / add_eos_token say. Unset: BOS when the model has a bos piece (Llama's Hugging
  // Face tokenizer does, although libsentencepiece's Encode does not), no EOS.
  std::optional<bool> addBos, addEos;
};

struct Conversion {
  std::string tokenizerJson;
  int32_t bosId = -1; // the model's bos and eos pieces; -1: none
  int32_t eosId = -1;
};

// `model` is the bytes of a .model file. libsentencepiece loads it first (a malformed file is
// refused with its message); what the conversion cannot reproduce exactly is refused in one
// message naming it (a normalizer with a character map, UNUSED pieces, WORD and CHAR models).
Result<Conversion> convertSentencePiece(const std::string &model, const ConversionOptions &options);

} // namespace hetc::spm
