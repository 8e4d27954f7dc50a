// hetc-sentencepiece MODEL [--add-bos 0|1] [--add-eos 0|1]: converts a SentencePiece model into
// the tokenizer.json hetc packs, for `hetc compile --tokenizer`. It prints one JSON object on
// stdout, {"tokenizer_json", "bos_token_id", "eos_token_id"} or {"error"}, and exits 1 on error.
//
// A program of its own because libsentencepiece carries its own copy of protobuf, which aborts a
// process that also loads the system's libprotobuf (hetc compile does, for ONNX); a crash while
// reading a malformed model also stays here, and hetc reports it in one line.
#include "SentencePieceConversion.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

// A message may quote a piece that is not UTF-8: such bytes are written as U+FFFD.
std::string dump(const nlohmann::json &object) {
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int fail(const std::string &message) {
  std::cout << dump({{"error", message}}) << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  hetc::spm::ConversionOptions options;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const bool bos = std::strcmp(argv[i], "--add-bos") == 0;
    if (bos || std::strcmp(argv[i], "--add-eos") == 0) {
      if (i + 1 == argc ||
          (std::strcmp(argv[i + 1], "0") != 0 && std::strcmp(argv[i + 1], "1") != 0))
        return fail(std::string(argv[i]) + " takes 0 or 1");
      (bos ? options.addBos : options.addEos) = std::strcmp(argv[++i], "1") == 0;
    } else if (path.empty() && argv[i][0] != '-') {
      path = argv[i];
    } else {
      return fail(std::string("unexpected argument '") + argv[i] +
                  "'; usage: hetc-sentencepiece MODEL [--add-bos 0|1] [--add-eos 0|1]");
    }
  }
  if (path.empty())
    return fail("usage: hetc-sentencepiece MODEL [--add-bos 0|1] [--add-eos 0|1]");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail("cannot read " + path);
  std::stringstream bytes;
  bytes << in.rdbuf();
  hetc::Result<hetc::spm::Conversion> conversion =
      hetc::spm::convertSentencePiece(bytes.str(), options);
  if (!conversion)
    return fail(path + ": " + conversion.message());
  std::cout << dump({{"tokenizer_json", conversion->tokenizerJson},
                     {"bos_token_id", conversion->bosId},
                     {"eos_token_id", conversion->eosId}})
            << "\n";
  return 0;
}
