// libFuzzer target: the tokenizer. Loading a tokenizer.json, converting a SentencePiece .model
// (what hetc-sentencepiece does for `hetc compile --tokenizer x.model`), and encoding and decoding
// arbitrary text with the tokenizers of tests/fuzz/tokenizers/. Every input is refused with a
// message or gives ids that hold, never a crash:
//
//   first byte % 4 == 0 or 1: text. The second byte picks a tokenizer of tests/fuzz/tokenizers/
//     (the .model files converted first); the rest is the text. The first byte's bits 2 and 3
//     are encode's addSpecialTokens and decode's skipSpecialTokens.
//   first byte % 4 == 2: the rest is a tokenizer.json, loaded and then run on a few texts.
//   first byte % 4 == 3: the rest is a .model, converted (bits 2-5: add_bos / add_eos given or
//     not, and their values), the result loaded and run on a few texts.
//
// What holds, besides no crash and no sanitizer report:
// - valid UTF-8 is always encoded, anything else refused; every id is below idCount();
// - decode accepts the ids encode gave and returns valid UTF-8;
// - a special token written in a text read as plain text (encode's plainText) is not that token;
// - the lossless tokenizers (byte-level BPE; SentencePiece BPE and Unigram with byte fallback,
//   on text without U+2581) give the text back: decode(encode(text)) == text;
// - a converted .model encodes as libsentencepiece does (its ids), the conversion's promise;
// - a .model that converts gives a tokenizer.json that loads.
#include "SentencePieceConversion.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using hetc::Result;
using hetc::Tokenizer;

struct SeedTokenizer {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
  bool lossless = false;
  // The unknown piece, when it is a special token (SentencePiece's <unk>): the id of a character
  // no vocabulary here has; -1 when that character becomes bytes or ordinary pieces.
  int32_t unknownId = -1;
  // For a converted .model: libsentencepiece's processor of the same file.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> reference;
};

std::vector<SeedTokenizer> &seeds() {
  static std::vector<SeedTokenizer> all;
  return all;
}

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what.c_str());
  std::abort();
}

std::string readFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

bool isValidUtf8(std::string_view text) {
  std::string out;
  return hetc::appendValidUtf8(text, out, false) == 0 && out == text;
}

std::string idList(const std::vector<int32_t> &ids) {
  std::string s;
  for (int32_t id : ids)
    s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Encodes `text` as told, checks the ids and decodes them back; returns the ids (empty when the
// text is not UTF-8 and was refused).
std::vector<int32_t> encodeAndDecode(const Tokenizer &tokenizer, std::string_view text,
                                     bool addSpecial, bool skipSpecial,
                                     const std::vector<hetc::TextRange> &plainText = {}) {
  Result<std::vector<int32_t>> ids = tokenizer.encode(text, addSpecial, plainText);
  if (!ids) {
    if (isValidUtf8(text))
      fail("valid UTF-8 refused: " + ids.message());
    return {};
  }
  if (!isValidUtf8(text))
    fail("text that is not UTF-8 encoded");
  for (int32_t id : *ids)
    if (id < 0 || static_cast<uint32_t>(id) >= tokenizer.idCount())
      fail("id " + std::to_string(id) + " outside the vocabulary of " +
           std::to_string(tokenizer.idCount()));
  Result<std::string> decoded = tokenizer.decode(*ids, skipSpecial);
  if (!decoded)
    fail("decode refused encode's ids: " + decoded.message());
  if (!isValidUtf8(*decoded))
    fail("decoded text is not UTF-8");
  return std::move(*ids);
}

// What a loaded tokenizer must survive: texts of every kind, and decoding each id alone.
void exercise(const Tokenizer &tokenizer) {
  static const char *const kTexts[] = {
      "",
      " ",
      "Hello, world",
      "  leading and trailing  ",
      "naïve café 日本語 😀 \t\n\r",
      "<s>[INST] <unk></s><|im_start|>user\n<|im_end|><|endoftext|>",
      "1234567890 3.14",
      "\xE2\x96\x81",
  };
  for (const char *text : kTexts) {
    encodeAndDecode(tokenizer, text, true, false);
    encodeAndDecode(tokenizer, text, false, true);
  }
  const uint32_t count = std::min<uint32_t>(tokenizer.idCount(), 512);
  for (uint32_t id = 0; id < count; ++id) {
    Result<std::string> text = tokenizer.decode({static_cast<int32_t>(id)}, false);
    if (!text || !isValidUtf8(*text))
      fail("id " + std::to_string(id) + " does not decode to UTF-8");
    tokenizer.tokenId(tokenizer.pieceBytes(static_cast<int32_t>(id)));
  }
}

void loadSeeds() {
  std::vector<std::filesystem::path> files;
  for (const auto &entry : std::filesystem::directory_iterator(HETC_FUZZ_TOKENIZERS))
    files.push_back(entry.path());
  std::sort(files.begin(), files.end()); // the second byte's meaning does not depend on the disk
  for (const std::filesystem::path &file : files) {
    SeedTokenizer seed;
    seed.name = file.filename().string();
    std::string json = readFile(file);
    if (file.extension() == ".model") {
      Result<hetc::spm::Conversion> conversion = hetc::spm::convertSentencePiece(json, {});
      if (!conversion)
        fail(seed.name + ": " + conversion.message());
      seed.reference = std::make_unique<sentencepiece::SentencePieceProcessor>();
      if (!seed.reference->LoadFromSerializedProto(json).ok())
        fail(seed.name + ": libsentencepiece cannot load it");
      json = conversion->tokenizerJson;
      // Byte fallback and identity normalization keep every character (seeds named so).
      seed.lossless = seed.name.find("byte_fallback") != std::string::npos ||
                      seed.name.find("unigram_no_prefix") != std::string::npos;
    } else {
      // Byte-level BPE over all 256 bytes, no normalizer.
      seed.lossless = seed.name.find("_full.json") != std::string::npos;
    }
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(json);
    if (!tokenizer)
      fail(seed.name + ": " + tokenizer.message());
    seed.tokenizer = std::move(tokenizer.value());
    Result<std::vector<int32_t>> unknown = seed.tokenizer->encode("\xF4\x8F\xBF\xBD", false);
    for (int32_t id : unknown ? *unknown : std::vector<int32_t>())
      if (seed.tokenizer->isSpecial(id))
        seed.unknownId = id;
    seeds().push_back(std::move(seed));
  }
  if (seeds().empty())
    fail(std::string("no tokenizers in ") + HETC_FUZZ_TOKENIZERS);
}

void fuzzText(const SeedTokenizer &seed, std::string_view text, bool addSpecial, bool skipSpecial) {
  const Tokenizer &tokenizer = *seed.tokenizer;
  const std::vector<int32_t> ids = encodeAndDecode(tokenizer, text, addSpecial, skipSpecial);
  if (!isValidUtf8(text)) {
    // Refused; the same text with its bad bytes replaced is what a caller would send.
    std::string valid;
    hetc::appendValidUtf8(text, valid, false);
    fuzzText(seed, valid, addSpecial, skipSpecial);
    return;
  }
  // The whole text read as plain text: as libsentencepiece reads it (it never matches control
  // pieces in text), and no special token comes from it.
  const std::vector<hetc::TextRange> whole = {{0, text.size()}};
  const std::vector<int32_t> plain = encodeAndDecode(tokenizer, text, false, false, whole);
  if (seed.reference) {
    std::vector<int> expected;
    if (seed.reference->Encode(std::string(text), &expected).ok() &&
        std::vector<int32_t>(expected.begin(), expected.end()) != plain)
      fail(seed.name + ": ids " + idList(plain) + ", libsentencepiece's " +
           idList(std::vector<int32_t>(expected.begin(), expected.end())));
  }
  for (int32_t id : plain)
    if (tokenizer.isSpecial(id) && id != seed.unknownId)
      fail(seed.name + ": special token " + std::to_string(id) + " matched in plain text");
  if (seed.lossless && text.find("\xE2\x96\x81") == std::string_view::npos) {
    Result<std::string> back = tokenizer.decode(plain, false);
    if (!back || *back != text)
      fail(seed.name + ": the text does not come back: ids " + idList(plain) + " decode to '" +
           (back ? *back : back.message()) + "'");
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  loadSeeds();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  const uint8_t mode = data[0];
  const std::string_view rest(reinterpret_cast<const char *>(data) + 1, size - 1);
  switch (mode % 4) {
  case 0:
  case 1:
    fuzzText(seeds()[data[1] % seeds().size()], rest.substr(1), mode & 4, mode & 8);
    break;
  case 2: {
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(rest);
    if (tokenizer)
      exercise(**tokenizer);
    else if (tokenizer.message().rfind("tokenizer.json: ", 0) != 0)
      fail("a refusal that does not start 'tokenizer.json: ': " + tokenizer.message());
    break;
  }
  case 3: {
    hetc::spm::ConversionOptions options;
    if (mode & 4)
      options.addBos = (mode & 8) != 0;
    if (mode & 16)
      options.addEos = (mode & 32) != 0;
    Result<hetc::spm::Conversion> conversion =
        hetc::spm::convertSentencePiece(std::string(rest), options);
    if (!conversion)
      break;
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(conversion->tokenizerJson);
    if (!tokenizer)
      fail("a converted .model does not load: " + tokenizer.message());
    exercise(**tokenizer);
    break;
  }
  }
  return 0;
}
