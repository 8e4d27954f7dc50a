// Compares hetc's tokenizer with reference ids, text by text, and checks that decoding the ids
// gives the text back.
//
//   hetc-tokenizer-check tokenizer.json CORPUS.json REFERENCE.json [--lossy]
// REFERENCE.json holds one id array per text of CORPUS.json (reference_ids.js writes it). A text
// must decode to itself (without the post-processor's BOS), or, where a normalizer changed it
// (NFC), to a text that encodes to the same ids; a text that writes special tokens is exempt
// (Llama 2's normalizer prepends a space after each). With --lossy the round trip is counted but
// not required (a vocabulary without every character, or Metaspace, which prepends no space to
// text that starts with one). Prints each difference and a summary line; exits 1 on any
// difference.
#include "runtime/tokenizer/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string readFile(const char *path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string idsText(const std::vector<int32_t> &ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

} // namespace

int main(int argc, char **argv) {
  const bool lossy = argc == 5 && std::string(argv[4]) == "--lossy";
  if (argc != 4 && !lossy) {
    std::fprintf(stderr,
                 "usage: hetc-tokenizer-check tokenizer.json CORPUS.json REFERENCE.json [--lossy]\n");
    return 2;
  }
  auto tokenizer = hetc::Tokenizer::fromJson(readFile(argv[1]));
  if (!tokenizer) {
    std::fprintf(stderr, "%s\n", tokenizer.message().c_str());
    return 1;
  }
  const auto corpus = nlohmann::json::parse(readFile(argv[2]));
  const auto reference = nlohmann::json::parse(readFile(argv[3]));
  if (corpus.size() != reference.size()) {
    std::fprintf(stderr, "the corpus has %zu texts, the reference %zu\n", corpus.size(),
                 reference.size());
    return 1;
  }
  size_t identical = 0, roundTrips = 0, normalizedRoundTrips = 0, withSpecialTokens = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const std::vector<int32_t> expected = reference[i].get<std::vector<int32_t>>();
    auto ids = (*tokenizer)->encode(text);
    if (!ids) {
      std::printf("text %zu: %s\n", i, ids.message().c_str());
      continue;
    }
    if (*ids == expected)
      ++identical;
    else
      std::printf("text %zu %s:\n  hetc      %s\n  reference %s\n", i,
                  nlohmann::json(text).dump().c_str(), idsText(*ids).c_str(),
                  idsText(expected).c_str());
    auto plain = (*tokenizer)->encode(text, /*addSpecialTokens=*/false);
    bool writesSpecialTokens = false;
    for (int32_t id : *plain)
      writesSpecialTokens |= (*tokenizer)->isSpecial(id);
    const std::string decoded = (*tokenizer)->decode(*ids, /*skipSpecialTokens=*/true).value();
    if (writesSpecialTokens)
      ++withSpecialTokens;
    else if (decoded == text)
      ++roundTrips;
    else if ((*tokenizer)->encode(decoded).value() == *ids)
      ++normalizedRoundTrips;
    else if (!lossy)
      std::printf("text %zu %s: decodes to %s\n", i, nlohmann::json(text).dump().c_str(),
                  nlohmann::json(decoded).dump().c_str());
  }
  std::printf("%s: %zu of %zu texts give identical ids; %zu decode to the text, %zu to its "
              "normalized form, %zu hold special or unknown tokens (not decoded back)%s\n",
              argv[1], identical, corpus.size(), roundTrips, normalizedRoundTrips,
              withSpecialTokens, lossy ? "; lossy: the round trip is not required" : "");
  const bool ok = identical == corpus.size() &&
                  (lossy || roundTrips + normalizedRoundTrips + withSpecialTokens == corpus.size());
  return ok ? 0 : 1;
}
