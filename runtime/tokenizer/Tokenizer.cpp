#include "runtime/tokenizer/Tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <queue>
#include <unordered_map>

namespace hetc {
namespace {

using json = nlohmann::json;

// Thrown while reading tokenizer.json only, caught in Tokenizer::fromJson: the one message.
struct Refusal {
  std::string message;
};

[[noreturn]] void refuse(const std::string &message) { throw Refusal{"tokenizer.json: " + message}; }

// "pre_tokenizer type 'BertPreTokenizer' is not supported"
[[noreturn]] void refuseComponent(const std::string &component, const std::string &type) {
  refuse(component + " type '" + type + "' is not supported");
}

std::string typeOf(const json &component, const std::string &name) {
  if (!component.is_object() || !component.contains("type") || !component["type"].is_string())
    refuse(name + " has no type");
  return component["type"].get<std::string>();
}

bool flag(const json &object, const char *key, bool fallback) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? fallback : it->get<bool>();
}

// An id: an integer JSON number (nlohmann's get<int> of a float out of range is undefined), in
// [0, 2^24) where `limited`, refused naming `what` otherwise.
int64_t integer(const json &value, const std::string &what, bool limited = true) {
  if (!value.is_number_integer())
    refuse(what + " is not an integer");
  const int64_t v = value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX
                        ? INT64_MAX
                        : value.get<int64_t>();
  if (limited && (v < 0 || v >= (int64_t{1} << 24)))
    refuse(what + " " + std::to_string(v) + " is out of range");
  return v;
}

std::string text(const json &object, const char *key, const std::string &fallback = "") {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? fallback : it->get<std::string>();
}

// A pattern of Split or Replace: {"String": s} is matched literally, {"Regex": r} by PCRE2 with
// Unicode properties (\p{L}, \s over all of Unicode), as Hugging Face's Oniguruma does.
class Pattern {
public:
  explicit Pattern(const json &pattern, const std::string &where) {
    if (pattern.contains("String")) {
      literal_ = pattern["String"].get<std::string>();
      if (literal_.empty())
        refuse(where + ": an empty String pattern");
      return;
    }
    if (!pattern.contains("Regex"))
      refuse(where + ": pattern is neither String nor Regex");
    const std::string regex = pattern["Regex"].get<std::string>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      refuse(where + ": regex '" + regex + "' does not compile at offset " +
             std::to_string(offset) + ": " + reinterpret_cast<const char *>(message));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE); // a speed-up only: without JIT it interprets
  }
  ~Pattern() { pcre2_code_free(code_); }
  Pattern(const Pattern &) = delete;
  Pattern &operator=(const Pattern &) = delete;

  // The [begin, end) byte ranges of the non-overlapping matches in `s`, left to right.
  std::vector<std::pair<size_t, size_t>> matches(const std::string &s) const {
    std::vector<std::pair<size_t, size_t>> found;
    if (!code_) {
      for (size_t at = s.find(literal_); at != std::string::npos;
           at = s.find(literal_, at + literal_.size()))
        found.emplace_back(at, at + literal_.size());
      return found;
    }
    pcre2_match_data *data = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t start = 0;
    while (start <= s.size()) {
      // The text was checked to be UTF-8 once, so the matcher need not check it again.
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                                 PCRE2_NO_UTF_CHECK, data, nullptr);
      if (rc < 0)
        break;
      const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(data);
      if (ovector[1] == ovector[0]) { // an empty match: step over one character
        size_t next = ovector[0] + 1;
        while (next < s.size() && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80)
          ++next;
        start = next;
        continue;
      }
      found.emplace_back(ovector[0], ovector[1]);
      start = ovector[1];
    }
    pcre2_match_data_free(data);
    return found;
  }

  const std::string &literal() const { return literal_; }
  bool isLiteral() const { return code_ == nullptr; }

private:
  std::string literal_;
  pcre2_code *code_ = nullptr;
};

// GPT-2's bytes_to_unicode: every byte as a printable character, the printable Latin-1 ones as
// themselves and the others as U+0100 onwards, so byte-level tokens are readable strings.
std::array<std::string, 256> byteLevelCharacters() {
  std::array<std::string, 256> chars;
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = utf8(printable ? b : next++);
  }
  return chars;
}

// Length of the UTF-8 character starting with `lead` (1 for a byte that cannot start one).
size_t utf8Length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

// The text itself, not only its length: a bad sequence of three bytes becomes U+FFFD, also three.
bool isValidUtf8(std::string_view s) {
  std::string out;
  return appendValidUtf8(s, out, false) == 0 && out == s;
}

enum class SplitBehavior { Isolated, Removed, MergedWithPrevious, MergedWithNext };
enum class PrependScheme { Always, First, Never };

struct NormalizerStep {
  enum class Kind { Prepend, Replace, Nfc, Nfkc } kind;
  std::string prepend;
  std::shared_ptr<Pattern> pattern;
  std::string content;
};

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel, Metaspace } kind = Kind::Split;
  std::shared_ptr<Pattern> pattern;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false; // the text between matches is what `behavior` places (GPT-4o's Removed)
  bool addPrefixSpace = false;
  std::string replacement;
  PrependScheme prependScheme = PrependScheme::Always;
  bool split = false;
};

struct AddedToken {
  std::string content;
  int32_t id;
  bool special, lstrip, rstrip, singleWord;
};

// The GPT-2 pattern ByteLevel splits with when use_regex is set.
constexpr const char *kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The byte a byte-fallback token "<0xNN>" stands for; -1 for any other token.
int fallbackByte(const std::string &token) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  const int high = hex(token[3]), low = hex(token[4]);
  return high < 0 || low < 0 ? -1 : high * 16 + low;
}

bool isWordByte(unsigned char c) { return c >= 0x80 || std::isalnum(c) || c == '_'; }

uint64_t pairKey(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

} // namespace

struct Tokenizer::Components {
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> preTokenizer;

  // The model: BPE, or Unigram when `unigram` (then `pieces` and `scores` hold its vocabulary).
  bool unigram = false;
  std::unordered_map<std::string, int32_t> unigramPieces; // the model's own pieces, not added tokens
  std::vector<double> scores;                              // by id: a Unigram piece's log probability
  double unkScore = 0;
  size_t longestPiece = 0; // bytes
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::string> tokens; // by id; "" for an id nothing names
  std::unordered_map<uint64_t, std::pair<uint32_t, int32_t>> merges; // (left, right) -> rank, id
  bool byteFallback = false;
  bool fuseUnk = false;
  bool ignoreMerges = false;
  int32_t unkId = -1;
  std::array<int32_t, 256> byteTokens{}; // <0xNN>, -1 when absent

  std::vector<AddedToken> added; // longest first, for leftmost-longest matching
  // Indices into `added` by the token's first byte, longest first: encode tries at each byte
  // only the tokens that can start there (a long prompt against Llama 3's 256 added tokens).
  std::array<std::vector<uint32_t>, 256> addedByFirstByte;
  std::vector<bool> special;     // by id

  std::vector<int32_t> prefix, suffix; // the post-processor's ids around a single sequence

  std::vector<std::string> pieces; // by id: its bytes in decoded text
  uint32_t leadingSpacesStripped = 0;

  int32_t idOf(const std::string &token) const {
    auto it = ids.find(token);
    return it == ids.end() ? -1 : it->second;
  }

  void readNormalizer(const json &n);
  void readPreTokenizer(const json &p);
  void readModel(const json &m);
  void readUnigram(const json &m);
  void readAddedTokens(const json &a);
  void readPostProcessor(const json &p);
  void readDecoder(const json &d);

  std::string normalize(std::string s) const;
  std::vector<std::string> preTokenize(std::string s, bool firstSection) const;
  void encodeWord(const std::string &word, std::vector<int32_t> &out) const;
  void encodeUnigramWord(const std::string &word, std::vector<int32_t> &out) const;
  // Appends the section's ids, stopping at the word that takes `out` past `maxIds`.
  void encodeSection(std::string_view section, bool firstSection, std::vector<int32_t> &out,
                     size_t maxIds) const;
};

void Tokenizer::Components::readNormalizer(const json &n) {
  if (n.is_null())
    return;
  const std::string type = typeOf(n, "normalizer");
  if (type == "Sequence") {
    for (const json &step : n.at("normalizers"))
      readNormalizer(step);
  } else if (type == "Prepend") {
    normalizer.push_back({NormalizerStep::Kind::Prepend, n.at("prepend").get<std::string>(), {}, {}});
  } else if (type == "Replace") {
    normalizer.push_back({NormalizerStep::Kind::Replace, {},
                          std::make_shared<Pattern>(n.at("pattern"), "normalizer Replace"),
                          n.at("content").get<std::string>()});
  } else if (type == "NFC") {
    normalizer.push_back({NormalizerStep::Kind::Nfc, {}, {}, {}});
  } else if (type == "NFKC") {
    normalizer.push_back({NormalizerStep::Kind::Nfkc, {}, {}, {}});
  } else {
    refuseComponent("normalizer", type);
  }
}

void Tokenizer::Components::readPreTokenizer(const json &p) {
  if (p.is_null())
    return;
  const std::string type = typeOf(p, "pre_tokenizer");
  if (type == "Sequence") {
    for (const json &step : p.at("pretokenizers"))
      readPreTokenizer(step);
  } else if (type == "Split") {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::Split;
    step.pattern = std::make_shared<Pattern>(p.at("pattern"), "pre_tokenizer Split");
    const std::string behavior = text(p, "behavior", "Isolated");
    if (behavior == "Isolated")
      step.behavior = SplitBehavior::Isolated;
    else if (behavior == "Removed")
      step.behavior = SplitBehavior::Removed;
    else if (behavior == "MergedWithPrevious")
      step.behavior = SplitBehavior::MergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step.behavior = SplitBehavior::MergedWithNext;
    else
      refuse("pre_tokenizer Split behavior '" + behavior + "' is not supported");
    step.invert = flag(p, "invert", false);
    preTokenizer.push_back(step);
  } else if (type == "ByteLevel") {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::ByteLevel;
    step.addPrefixSpace = flag(p, "add_prefix_space", true);
    if (flag(p, "use_regex", true))
      step.pattern = std::make_shared<Pattern>(json{{"Regex", kByteLevelRegex}}, "ByteLevel");
    preTokenizer.push_back(step);
  } else if (type == "Metaspace") {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::Metaspace;
    step.replacement = text(p, "replacement", "\u2581");
    const std::string scheme =
        text(p, "prepend_scheme", flag(p, "add_prefix_space", true) ? "always" : "never");
    step.prependScheme = scheme == "first"   ? PrependScheme::First
                         : scheme == "never" ? PrependScheme::Never
                                             : PrependScheme::Always;
    step.split = flag(p, "split", true);
    preTokenizer.push_back(step);
  } else {
    refuseComponent("pre_tokenizer", type);
  }
}

void Tokenizer::Components::readModel(const json &m) {
  const std::string type = typeOf(m, "model");
  if (type == "Unigram")
    return readUnigram(m);
  if (type != "BPE")
    refuseComponent("model", type);
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    refuse("model BPE with dropout is not supported");
  if (!text(m, "continuing_subword_prefix").empty() || !text(m, "end_of_word_suffix").empty())
    refuse("model BPE with continuing_subword_prefix or end_of_word_suffix is not supported");
  byteFallback = flag(m, "byte_fallback", false);
  fuseUnk = flag(m, "fuse_unk", false);
  ignoreMerges = flag(m, "ignore_merges", false);

  const json &vocab = m.at("vocab");
  if (!vocab.is_object())
    refuse("model vocab is not an object of token: id");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int64_t id = integer(it.value(), "model vocab id of '" + it.key() + "'");
    ids[it.key()] = static_cast<int32_t>(id);
    if (tokens.size() <= static_cast<size_t>(id))
      tokens.resize(id + 1);
    tokens[id] = it.key();
  }
  const std::string unk = text(m, "unk_token");
  if (!unk.empty()) {
    unkId = idOf(unk);
    if (unkId < 0)
      refuse("model unk_token '" + unk + "' is not in the vocab");
  }
  byteTokens.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byteTokens[b] = idOf(name);
  }

  const json &list = m.at("merges");
  uint32_t rank = 0;
  for (const json &merge : list) {
    std::string left, right;
    if (merge.is_string()) { // "left right"
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        refuse("merge '" + s + "' is not two tokens separated by one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2) { // ["left", "right"]
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      refuse("merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const int32_t l = idOf(left), r = idOf(right), merged = idOf(left + right);
    if (l < 0 || r < 0 || merged < 0)
      refuse("merge '" + left + " " + right + "' names a token that is not in the vocab");
    merges.emplace(pairKey(l, r), std::make_pair(rank++, merged));
  }
}

// Unigram: "vocab" is [[piece, score], ...] by id, "unk_id" its unknown piece.
void Tokenizer::Components::readUnigram(const json &m) {
  unigram = true;
  fuseUnk = true; // Unigram always fuses unknown characters, in Hugging Face's and SentencePiece's
  byteFallback = flag(m, "byte_fallback", false);
  const json &vocab = m.at("vocab");
  if (!vocab.is_array() || vocab.empty())
    refuse("model Unigram vocab is not a list of [piece, score]");
  tokens.resize(vocab.size());
  scores.resize(vocab.size());
  double minScore = 0;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const json &entry = vocab[id];
    if (!entry.is_array() || entry.size() != 2)
      refuse("model Unigram vocab entry " + std::to_string(id) + " is not [piece, score]");
    tokens[id] = entry[0].get<std::string>();
    scores[id] = entry[1].get<double>();
    minScore = std::min(minScore, scores[id]);
    unigramPieces.emplace(tokens[id], static_cast<int32_t>(id));
    ids.emplace(tokens[id], static_cast<int32_t>(id));
    longestPiece = std::max(longestPiece, tokens[id].size());
  }
  // An unknown character costs more than any piece, as in Hugging Face's Unigram.
  unkScore = minScore - 10;
  if (m.contains("unk_id") && !m["unk_id"].is_null()) {
    const int64_t unk = integer(m["unk_id"], "model Unigram unk_id", false);
    if (unk < 0 || static_cast<size_t>(unk) >= vocab.size())
      refuse("model Unigram unk_id " + std::to_string(unk) + " is not in the vocab");
    unkId = static_cast<int32_t>(unk);
  } else {
    refuse("model Unigram without unk_id is not supported");
  }
  byteTokens.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byteTokens[b] = idOf(name);
  }
  // With byte fallback the <0xNN> pieces stand for bytes, never for those six characters of text
  // (libsentencepiece does not match its BYTE pieces in text either).
  if (byteFallback)
    for (int32_t id : byteTokens)
      if (id >= 0)
        unigramPieces.erase(tokens[id]);
}

void Tokenizer::Components::readAddedTokens(const json &a) {
  if (a.is_null())
    return;
  for (const json &t : a) {
    AddedToken token{t.at("content").get<std::string>(),
                     static_cast<int32_t>(integer(t.at("id"), "added token id")),
                     flag(t, "special", false), flag(t, "lstrip", false), flag(t, "rstrip", false),
                     flag(t, "single_word", false)};
    if (token.content.empty() || token.id < 0 || token.id >= (1 << 24))
      refuse("added token " + std::to_string(token.id) + " '" + token.content + "' is invalid");
    if (tokens.size() <= static_cast<size_t>(token.id))
      tokens.resize(token.id + 1);
    tokens[token.id] = token.content;
    ids[token.content] = token.id;
    added.push_back(token);
  }
  std::stable_sort(added.begin(), added.end(), [](const AddedToken &x, const AddedToken &y) {
    return x.content.size() > y.content.size();
  });
}

void Tokenizer::Components::readPostProcessor(const json &p) {
  if (p.is_null())
    return;
  const std::string type = typeOf(p, "post_processor");
  if (type == "Sequence") {
    for (const json &step : p.at("processors"))
      readPostProcessor(step);
  } else if (type == "ByteLevel") {
    // Only trims offsets, which hetc does not report.
  } else if (type == "TemplateProcessing") {
    const json &specials = p.at("special_tokens");
    bool seenSequence = false;
    for (const json &item : p.at("single")) {
      if (item.contains("Sequence")) {
        if (item["Sequence"].at("id").get<std::string>() != "A" || seenSequence)
          refuse("post_processor TemplateProcessing: single must hold sequence A once");
        seenSequence = true;
      } else if (item.contains("SpecialToken")) {
        const std::string name = item["SpecialToken"].at("id").get<std::string>();
        if (!specials.contains(name))
          refuse("post_processor TemplateProcessing: special token '" + name + "' is not defined");
        for (const json &id : specials[name].at("ids"))
          (seenSequence ? suffix : prefix)
              .push_back(static_cast<int32_t>(integer(id, "post_processor special token id")));
      } else {
        refuse("post_processor TemplateProcessing: an item is neither Sequence nor SpecialToken");
      }
    }
    if (!seenSequence)
      refuse("post_processor TemplateProcessing: single does not hold sequence A");
  } else {
    refuseComponent("post_processor", type);
  }
}

void Tokenizer::Components::readDecoder(const json &d) {
  pieces.assign(tokens.size(), std::string());
  bool byteLevel = false, decodeByteFallback = false;
  std::string replaceFrom, replaceTo;
  std::vector<const json *> steps;
  if (!d.is_null()) {
    if (typeOf(d, "decoder") == "Sequence")
      for (const json &step : d.at("decoders"))
        steps.push_back(&step);
    else
      steps.push_back(&d);
  }
  for (const json *step : steps) {
    const std::string type = typeOf(*step, "decoder");
    if (type == "ByteLevel") {
      byteLevel = true;
    } else if (type == "ByteFallback") {
      decodeByteFallback = true;
    } else if (type == "Fuse") {
      // Decoded pieces are always joined.
    } else if (type == "Replace") {
      Pattern pattern(step->at("pattern"), "decoder Replace");
      if (!pattern.isLiteral())
        refuse("decoder Replace with a Regex pattern is not supported");
      replaceFrom = pattern.literal();
      replaceTo = step->at("content").get<std::string>();
    } else if (type == "Strip") {
      if (text(*step, "content") != " " || step->value("stop", 0) != 0)
        refuse("decoder Strip other than of leading spaces is not supported");
      leadingSpacesStripped = step->value("start", 0);
    } else if (type == "Metaspace") {
      replaceFrom = text(*step, "replacement", "\u2581");
      replaceTo = " ";
      const std::string scheme =
          text(*step, "prepend_scheme", flag(*step, "add_prefix_space", true) ? "always" : "never");
      leadingSpacesStripped = scheme == "never" ? 0 : 1;
    } else {
      refuseComponent("decoder", type);
    }
  }
  std::unordered_map<std::string, unsigned char> byteOfCharacter;
  const std::array<std::string, 256> chars = byteLevelCharacters();
  for (int b = 0; b < 256; ++b)
    byteOfCharacter[chars[b]] = static_cast<unsigned char>(b);

  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string &token = tokens[id];
    std::string &piece = pieces[id];
    if (const int byte = fallbackByte(token); decodeByteFallback && byte >= 0) {
      piece = std::string(1, static_cast<char>(byte));
      continue;
    }
    std::string t = token;
    if (!replaceFrom.empty())
      for (size_t at = t.find(replaceFrom); at != std::string::npos;
           at = t.find(replaceFrom, at + replaceTo.size()))
        t.replace(at, replaceFrom.size(), replaceTo);
    if (!byteLevel) {
      piece = t;
      continue;
    }
    for (size_t i = 0; i < t.size();) {
      const size_t n = std::min(utf8Length(static_cast<unsigned char>(t[i])), t.size() - i);
      auto it = byteOfCharacter.find(t.substr(i, n));
      if (it != byteOfCharacter.end())
        piece += static_cast<char>(it->second);
      else
        piece.append(t, i, n); // not a byte-level character: itself
      i += n;
    }
  }
}

std::string Tokenizer::Components::normalize(std::string s) const {
  for (const NormalizerStep &step : normalizer) {
    switch (step.kind) {
    case NormalizerStep::Kind::Prepend:
      if (!s.empty())
        s = step.prepend + s;
      break;
    case NormalizerStep::Kind::Replace: {
      std::string out;
      size_t last = 0;
      for (auto [begin, end] : step.pattern->matches(s)) {
        out.append(s, last, begin - last);
        out += step.content;
        last = end;
      }
      out.append(s, last, std::string::npos);
      s = std::move(out);
      break;
    }
    case NormalizerStep::Kind::Nfc:
    case NormalizerStep::Kind::Nfkc: {
      UErrorCode error = U_ZERO_ERROR;
      const UNormalizer2 *form = step.kind == NormalizerStep::Kind::Nfc
                                     ? unorm2_getNFCInstance(&error)
                                     : unorm2_getNFKCInstance(&error);
      int32_t length = 0;
      std::u16string wide(s.size() + 1, u'\0');
      u_strFromUTF8(reinterpret_cast<UChar *>(wide.data()), wide.size(), &length, s.data(),
                    s.size(), &error);
      std::u16string normal(length * 3 + 16, u'\0');
      const int32_t normalLength =
          unorm2_normalize(form, reinterpret_cast<const UChar *>(wide.data()), length,
                           reinterpret_cast<UChar *>(normal.data()), normal.size(), &error);
      std::string out(normalLength * 3 + 1, '\0');
      int32_t outLength = 0;
      u_strToUTF8(out.data(), out.size(), &outLength,
                  reinterpret_cast<const UChar *>(normal.data()), normalLength, &error);
      if (U_SUCCESS(error)) // the text is UTF-8 and the buffers are sized for the worst case
        s = out.substr(0, outLength);
      break;
    }
    }
  }
  return s;
}

namespace {

// Cuts `s` at the [begin, end) matches as `behavior` says, appending the non-empty pieces.
// The matches are the delimiters, or with `invert` the text between them is (each match then a
// piece of its own). As Hugging Face's SplitDelimiterBehavior, merging included.
void splitPieces(const std::string &s, const std::vector<std::pair<size_t, size_t>> &matches,
                 SplitBehavior behavior, bool invert, std::vector<std::string> &out) {
  struct Segment {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Segment> segments;
  size_t last = 0;
  for (auto [begin, end] : matches) {
    if (begin > last)
      segments.push_back({last, begin, invert});
    segments.push_back({begin, end, !invert});
    last = end;
  }
  if (last < s.size())
    segments.push_back({last, s.size(), invert});

  std::vector<std::pair<size_t, size_t>> pieces;
  bool previousDelimiter = false;
  switch (behavior) {
  case SplitBehavior::Isolated:
    for (const Segment &g : segments)
      pieces.emplace_back(g.begin, g.end);
    break;
  case SplitBehavior::Removed:
    for (const Segment &g : segments)
      if (!g.delimiter)
        pieces.emplace_back(g.begin, g.end);
    break;
  case SplitBehavior::MergedWithPrevious:
    for (const Segment &g : segments) {
      if (g.delimiter && !previousDelimiter && !pieces.empty())
        pieces.back().second = g.end;
      else
        pieces.emplace_back(g.begin, g.end);
      previousDelimiter = g.delimiter;
    }
    break;
  case SplitBehavior::MergedWithNext:
    for (auto g = segments.rbegin(); g != segments.rend(); ++g) {
      if (g->delimiter && !previousDelimiter && !pieces.empty())
        pieces.back().first = g->begin;
      else
        pieces.emplace_back(g->begin, g->end);
      previousDelimiter = g->delimiter;
    }
    std::reverse(pieces.begin(), pieces.end());
    break;
  }
  for (auto [begin, end] : pieces)
    if (end > begin)
      out.push_back(s.substr(begin, end - begin));
}

} // namespace

std::vector<std::string> Tokenizer::Components::preTokenize(std::string s,
                                                            bool firstSection) const {
  static const std::array<std::string, 256> byteChars = byteLevelCharacters();
  std::vector<std::string> pieces{std::move(s)};
  for (const PreTokenizerStep &step : preTokenizer) {
    std::vector<std::string> next;
    for (size_t index = 0; index < pieces.size(); ++index) {
      std::string &piece = pieces[index];
      switch (step.kind) {
      case PreTokenizerStep::Kind::Split:
        splitPieces(piece, step.pattern->matches(piece), step.behavior, step.invert, next);
        break;
      case PreTokenizerStep::Kind::ByteLevel: {
        if (step.addPrefixSpace && piece[0] != ' ')
          piece.insert(0, 1, ' ');
        std::vector<std::string> words;
        if (step.pattern)
          splitPieces(piece, step.pattern->matches(piece), SplitBehavior::Isolated, false, words);
        else
          words.push_back(piece);
        for (const std::string &word : words) {
          std::string mapped;
          for (unsigned char c : word)
            mapped += byteChars[c];
          next.push_back(std::move(mapped));
        }
        break;
      }
      case PreTokenizerStep::Kind::Metaspace: {
        std::string replaced;
        for (char c : piece)
          c == ' ' ? replaced += step.replacement : replaced += c;
        const bool prepend =
            step.prependScheme == PrependScheme::Always ||
            (step.prependScheme == PrependScheme::First && firstSection && index == 0);
        if (prepend && replaced.compare(0, step.replacement.size(), step.replacement) != 0)
          replaced.insert(0, step.replacement);
        if (!step.split) {
          next.push_back(std::move(replaced));
          break;
        }
        std::vector<std::pair<size_t, size_t>> marks;
        for (size_t at = replaced.find(step.replacement); at != std::string::npos;
             at = replaced.find(step.replacement, at + step.replacement.size()))
          marks.emplace_back(at, at + step.replacement.size());
        splitPieces(replaced, marks, SplitBehavior::MergedWithNext, false, next);
        break;
      }
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

// The most probable segmentation (Viterbi over the pieces starting at each character); a
// character no piece starts with is unknown, consecutive unknowns one unk (or, with byte
// fallback, their bytes). Among equal scores the earlier start wins, as in Hugging Face's.
void Tokenizer::Components::encodeUnigramWord(const std::string &word,
                                              std::vector<int32_t> &out) const {
  struct Best {
    double score;
    size_t start; // byte offset the last piece starts at
    int32_t id;   // -1: unreachable
  };
  std::vector<size_t> starts; // byte offsets of characters, then the end
  for (size_t i = 0; i < word.size(); i += utf8Length(static_cast<unsigned char>(word[i])))
    starts.push_back(i);
  starts.push_back(word.size());
  std::vector<Best> best(word.size() + 1, Best{0, 0, -1});
  best[0].id = unkId; // reachable
  for (size_t c = 0; c + 1 < starts.size(); ++c) {
    const size_t from = starts[c];
    if (best[from].id < 0)
      continue;
    bool singleCharacter = false;
    for (size_t e = c + 1; e < starts.size() && starts[e] - from <= longestPiece; ++e) {
      auto it = unigramPieces.find(word.substr(from, starts[e] - from));
      // A special token's piece (SentencePiece's control pieces, <unk>) is never text's: as in
      // libsentencepiece, and in plain text (a chat message) where "<s>" must stay characters.
      if (it == unigramPieces.end() || special[it->second])
        continue;
      singleCharacter |= e == c + 1;
      const double score = best[from].score + scores[it->second];
      Best &to = best[starts[e]];
      if (to.id < 0 || score > to.score)
        to = {score, from, it->second};
    }
    if (!singleCharacter) {
      const double score = best[from].score + unkScore;
      Best &to = best[starts[c + 1]];
      if (to.id < 0 || score > to.score)
        to = {score, from, unkId};
    }
  }
  std::vector<std::pair<size_t, int32_t>> path; // (start, id), last piece first
  for (size_t at = word.size(); at > 0; at = best[at].start)
    path.emplace_back(best[at].start, best[at].id);
  std::reverse(path.begin(), path.end());
  for (size_t k = 0; k < path.size(); ++k) {
    const auto [start, id] = path[k];
    const size_t end = k + 1 < path.size() ? path[k + 1].first : word.size();
    if (id != unkId || (!byteFallback && !out.empty() && out.back() == unkId && k > 0 &&
                        path[k - 1].second == unkId)) {
      if (id != unkId)
        out.push_back(id);
      continue;
    }
    if (byteFallback &&
        std::all_of(word.begin() + start, word.begin() + end,
                    [&](char b) { return byteTokens[static_cast<unsigned char>(b)] >= 0; })) {
      for (size_t b = start; b < end; ++b)
        out.push_back(byteTokens[static_cast<unsigned char>(word[b])]);
    } else {
      out.push_back(unkId);
    }
  }
}

void Tokenizer::Components::encodeWord(const std::string &word, std::vector<int32_t> &out) const {
  if (unigram)
    return encodeUnigramWord(word, out);
  if (ignoreMerges) {
    if (int32_t id = idOf(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  bool lastWasUnk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
    const int32_t id = idOf(word.substr(i, n));
    bool unk = false;
    if (id >= 0) {
      symbols.push_back(id);
    } else if (byteFallback &&
               std::all_of(word.begin() + i, word.begin() + i + n,
                           [&](char b) { return byteTokens[static_cast<unsigned char>(b)] >= 0; })) {
      for (size_t b = i; b < i + n; ++b)
        symbols.push_back(byteTokens[static_cast<unsigned char>(word[b])]);
    } else if (unkId >= 0) {
      unk = true;
      if (!(fuseUnk && lastWasUnk))
        symbols.push_back(unkId);
    } // without an unk token an unknown character is dropped, as Hugging Face's BPE does
    lastWasUnk = unk;
    i += n;
  }
  // Merge the lowest-ranked adjacent pair, leftmost first, until no pair has a merge: a heap of
  // candidate pairs over a linked list of symbols, so a long word (SentencePiece's sections have
  // no pre-tokenizer) costs n log n, not n^2. A candidate whose symbols changed is skipped.
  struct Symbol {
    int32_t id;
    int32_t prev, next; // -1 at the ends
    bool merged;        // absorbed into the symbol before it
  };
  struct Candidate {
    uint32_t rank;
    int32_t left; // index of the left symbol
    int32_t id;   // the merged token
    bool operator>(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::vector<Symbol> list(symbols.size());
  for (size_t i = 0; i < symbols.size(); ++i)
    list[i] = {symbols[i], static_cast<int32_t>(i) - 1,
               i + 1 < symbols.size() ? static_cast<int32_t>(i + 1) : -1, false};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int32_t left) {
    if (left < 0 || list[left].next < 0)
      return;
    auto it = merges.find(pairKey(list[left].id, list[list[left].next].id));
    if (it != merges.end())
      heap.push({it->second.first, left, it->second.second});
  };
  for (size_t i = 0; i + 1 < list.size(); ++i)
    consider(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol &left = list[c.left];
    if (left.merged || left.next < 0)
      continue;
    auto it = merges.find(pairKey(left.id, list[left.next].id));
    if (it == merges.end() || it->second.second != c.id || it->second.first != c.rank)
      continue;
    Symbol &right = list[left.next];
    right.merged = true;
    left.id = c.id;
    left.next = right.next;
    if (right.next >= 0)
      list[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  symbols.clear();
  for (int32_t i = list.empty() ? -1 : 0; i >= 0; i = list[i].next)
    symbols.push_back(list[i].id);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void Tokenizer::Components::encodeSection(std::string_view section, bool firstSection,
                                          std::vector<int32_t> &out, size_t maxIds) const {
  const std::string normalized = normalize(std::string(section));
  if (normalized.empty())
    return;
  for (const std::string &word : preTokenize(normalized, firstSection)) {
    if (out.size() > maxIds)
      return;
    encodeWord(word, out);
  }
}

Tokenizer::Tokenizer() : c_(std::make_unique<Components>()) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::fromJson(std::string_view jsonText) {
  const json root = json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Status::error("tokenizer.json: not valid JSON");
  if (!root.is_object())
    return Status::error("tokenizer.json: not a JSON object");
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  Components &c = *tokenizer->c_;
  // nlohmann-json reports a missing key or a wrong type by throwing; both end here as one message.
  try {
    if (!root.contains("model"))
      refuse("no model");
    c.readModel(root["model"]);
    c.readAddedTokens(root.value("added_tokens", json()));
    c.readNormalizer(root.value("normalizer", json()));
    c.readPreTokenizer(root.value("pre_tokenizer", json()));
    c.readPostProcessor(root.value("post_processor", json()));
    c.readDecoder(root.value("decoder", json()));
    for (int32_t id : c.prefix)
      if (id < 0 || static_cast<size_t>(id) >= c.tokens.size())
        refuse("post_processor id " + std::to_string(id) + " is not a token");
    for (int32_t id : c.suffix)
      if (id < 0 || static_cast<size_t>(id) >= c.tokens.size())
        refuse("post_processor id " + std::to_string(id) + " is not a token");
  } catch (const Refusal &refusal) {
    return Status::error(refusal.message);
  } catch (const json::exception &error) {
    return Status::error(std::string("tokenizer.json: ") + error.what());
  } catch (const std::exception &error) { // out of memory, or a library's own check
    return Status::error(std::string("tokenizer.json: ") + error.what());
  }
  c.special.assign(c.tokens.size(), false);
  for (uint32_t i = 0; i < c.added.size(); ++i) {
    c.special[c.added[i].id] = c.added[i].special;
    c.addedByFirstByte[static_cast<unsigned char>(c.added[i].content[0])].push_back(i);
  }
  return tokenizer;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, bool addSpecialTokens,
                                               const std::vector<TextRange> &plainText,
                                               size_t maxIds) const {
  if (!isValidUtf8(input))
    return Status::error("the text is not valid UTF-8");
  const Components &c = *c_;
  std::vector<int32_t> ids;
  if (addSpecialTokens)
    ids = c.prefix;
  // Added tokens are found in the raw text first (leftmost, longest); the text between them is
  // normalized, pre-tokenized and split by the model.
  size_t sectionStart = 0;
  size_t plain = 0; // the first plain range that does not end at or before `at`
  for (size_t at = 0; at < input.size();) {
    while (plain < plainText.size() && plainText[plain].end <= at)
      ++plain;
    const AddedToken *found = nullptr;
    for (uint32_t index : c.addedByFirstByte[static_cast<unsigned char>(input[at])]) {
      const AddedToken &token = c.added[index];
      if (input.compare(at, token.content.size(), token.content) != 0)
        continue;
      const size_t end = at + token.content.size();
      if (token.special && plain < plainText.size() && plainText[plain].begin < end)
        continue; // a special token's text inside (or reaching into) plain text
      if (token.singleWord && ((at > 0 && isWordByte(input[at - 1])) ||
                               (end < input.size() && isWordByte(input[end]))))
        continue;
      found = &token;
      break;
    }
    if (!found) {
      ++at;
      continue;
    }
    size_t sectionEnd = at, next = at + found->content.size();
    if (found->lstrip)
      while (sectionEnd > sectionStart && std::isspace(static_cast<unsigned char>(input[sectionEnd - 1])))
        --sectionEnd;
    if (found->rstrip)
      while (next < input.size() && std::isspace(static_cast<unsigned char>(input[next])))
        ++next;
    c.encodeSection(input.substr(sectionStart, sectionEnd - sectionStart), sectionStart == 0, ids,
                    maxIds);
    if (ids.size() > maxIds)
      return ids; // the section stopped: what follows it is not these ids' continuation
    ids.push_back(found->id);
    sectionStart = at = next;
  }
  if (ids.size() > maxIds)
    return ids;
  c.encodeSection(input.substr(sectionStart), sectionStart == 0, ids, maxIds);
  if (addSpecialTokens)
    ids.insert(ids.end(), c.suffix.begin(), c.suffix.end());
  return ids;
}

Result<std::string> Tokenizer::decode(const std::vector<int32_t> &ids,
                                      bool skipSpecialTokens) const {
  DecodeStream stream(*this, skipSpecialTokens);
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<uint32_t>(id) >= idCount())
      return Status::error("id " + std::to_string(id) + " is not in the tokenizer's vocabulary of " +
                           std::to_string(idCount()));
    stream.push(id, text);
  }
  stream.finish(text);
  return text;
}

uint32_t Tokenizer::idCount() const { return static_cast<uint32_t>(c_->tokens.size()); }

int32_t Tokenizer::tokenId(std::string_view content) const {
  return c_->idOf(std::string(content));
}

bool Tokenizer::isSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < c_->special.size() && c_->special[id];
}

const std::string &Tokenizer::pieceBytes(int32_t id) const {
  static const std::string none;
  return id >= 0 && static_cast<size_t>(id) < c_->pieces.size() ? c_->pieces[id] : none;
}

uint32_t Tokenizer::leadingSpacesStripped() const { return c_->leadingSpacesStripped; }

size_t appendValidUtf8(std::string_view bytes, std::string &out, bool holdIncomplete) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  for (size_t i = 0; i < bytes.size();) {
    const unsigned char lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    size_t need = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                                                 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (need == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // The valid range of the second byte narrows after E0, ED, F0 and F4 (no overlong forms,
    // surrogates or code points past U+10FFFF).
    const unsigned char low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    size_t valid = 1;
    while (valid < need && i + valid < bytes.size()) {
      const unsigned char b = static_cast<unsigned char>(bytes[i + valid]);
      if (valid == 1 ? (b < low || b > high) : (b & 0xC0) != 0x80)
        break;
      ++valid;
    }
    if (valid == need) {
      out.append(bytes.data() + i, need);
    } else if (i + valid == bytes.size() && holdIncomplete) {
      return valid; // a sequence the next bytes may complete
    } else {
      out += kReplacement; // the longest valid start of a sequence becomes one U+FFFD
    }
    i += valid;
  }
  return 0;
}

void DecodeStream::push(int32_t id, std::string &out) {
  if (skipSpecial_ && tokenizer_.isSpecial(id))
    return;
  pending_ += tokenizer_.pieceBytes(id);
  emit(out, false);
}

void DecodeStream::finish(std::string &out) { emit(out, true); }

void DecodeStream::emit(std::string &out, bool final) {
  if (atStart_) {
    size_t strip = 0;
    while (strip < pending_.size() && stripped_ < tokenizer_.leadingSpacesStripped() &&
           pending_[strip] == ' ') {
      ++strip;
      ++stripped_;
    }
    pending_.erase(0, strip);
    if (!pending_.empty())
      atStart_ = false;
  }
  const size_t held = appendValidUtf8(pending_, out, !final);
  pending_.erase(0, pending_.size() - held);
}

} // namespace hetc
