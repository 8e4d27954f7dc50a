// The tokenizer on small hand-written tokenizer.json files, one per model form and component:
// byte-level BPE (GPT-2's ByteLevel, Llama 3's Split + ByteLevel with ignore_merges),
// SentencePiece-style BPE (Llama 2's Prepend/Replace normalizers with byte fallback, Mistral's
// Metaspace), added and special tokens, the post-processor's BOS, the decoders, streaming decode,
// and the one-line refusals. tests/e2e/tokenizers compares real files with Hugging Face's port.
#include "runtime/tokenizer/Tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

namespace hetc {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load(const std::string &json) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(json);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  return tokenizer.ok() ? std::move(tokenizer.value()) : nullptr;
}

Ids encode(const Tokenizer &tokenizer, const std::string &text, bool special = true) {
  Result<Ids> ids = tokenizer.encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.message();
  return ids.ok() ? *ids : Ids{};
}

std::string decode(const Tokenizer &tokenizer, const Ids &ids, bool skipSpecial = true) {
  Result<std::string> text = tokenizer.decode(ids, skipSpecial);
  EXPECT_TRUE(text.ok()) << text.message();
  return text.ok() ? *text : "";
}

std::string refusal(const std::string &json) {
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(json);
  EXPECT_FALSE(tokenizer.ok());
  return tokenizer.ok() ? "" : tokenizer.message();
}

// GPT-2's form: ByteLevel pre-tokenizer (its regex) and decoder; "Ġ" is the space byte.
const char *kByteLevel = R"({
  "added_tokens": [{"id": 12, "content": "<|end|>", "special": true, "lstrip": false,
                    "rstrip": false, "single_word": false, "normalized": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": {"type": "ByteLevel"},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
    "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7,
              "he": 8, "ll": 9, "hell": 10, "Ġw": 11, "Ã": 13, "©": 14, "Ã©": 15, "!": 16,
              "ĠĠ": 17, "1": 18, "2": 19},
    "merges": ["h e", "l l", "he ll", "Ġ w", "Ã ©", "Ġ Ġ"]}
})";

TEST(TokenizerTest, ByteLevelBpeMergesByRankWithinRegexPieces) {
  auto t = load(kByteLevel);
  ASSERT_TRUE(t);
  // "hello" -> h e l l o -> he ll o -> hell o; " world" -> Ġw o r l d.
  EXPECT_EQ(encode(*t, "hello world"), (Ids{10, 3, 11, 3, 6, 2, 7}));
  // é is the bytes C3 A9, mapped to "Ã©" and merged.
  EXPECT_EQ(encode(*t, "hé"), (Ids{0, 15}));
  // Runs of spaces: "\s+(?!\S)" keeps the last space with the next word.
  EXPECT_EQ(encode(*t, "h   w"), (Ids{0, 17, 11}));
  EXPECT_EQ(decode(*t, encode(*t, "hello world! hé  12")), "hello world! hé  12");
}

TEST(TokenizerTest, SpecialTokensAreMatchedBeforePreTokenization) {
  auto t = load(kByteLevel);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "he<|end|>he"), (Ids{8, 12, 8}));
  EXPECT_TRUE(t->isSpecial(12));
  EXPECT_FALSE(t->isSpecial(8));
  EXPECT_EQ(t->tokenId("<|end|>"), 12);
  EXPECT_EQ(decode(*t, {8, 12, 8}, /*skipSpecial=*/false), "he<|end|>he");
  EXPECT_EQ(decode(*t, {8, 12, 8}, /*skipSpecial=*/true), "hehe");
}

// A special token's text inside a plain range is text (a chat message's); outside it, and across
// a range's edge never, it is the token.
TEST(TokenizerTest, SpecialTokensInPlainTextAreText) {
  auto t = load(kByteLevel);
  ASSERT_TRUE(t);
  const std::string text = "he<|end|>he<|end|>";
  // "he<|end|>he" with its token's text as text: no id 12.
  Result<std::vector<int32_t>> plainIds = t->encode("he<|end|>he", false, {{0, 11}});
  ASSERT_TRUE(plainIds);
  const Ids asText = *plainIds;
  EXPECT_EQ(std::count(asText.begin(), asText.end(), 12), 0);
  EXPECT_GT(asText.size(), 3u);
  auto encodeWith = [&](std::vector<TextRange> plain) {
    Result<std::vector<int32_t>> ids = t->encode(text, false, plain);
    EXPECT_TRUE(ids);
    return ids ? *ids : Ids{};
  };
  EXPECT_EQ(encodeWith({}), (Ids{8, 12, 8, 12}));
  Ids expected = asText;
  expected.push_back(12);
  EXPECT_EQ(encodeWith({{0, 11}}), expected);               // the first one is the message's
  EXPECT_EQ(encodeWith({{5, 6}, {9, 11}}), expected);       // a range inside the token's text
  EXPECT_NE(encodeWith({{11, 12}}), (Ids{8, 12, 8, 12})); // reaching into the second: text
  EXPECT_EQ(encodeWith({{9, 11}})[1], 12);                 // a range after the first: it stays
}

// A bounded encode is the unbounded one's prefix, and stops soon after the bound: the work a
// long text costs a server is its first maxIds tokens'.
TEST(TokenizerTest, BoundedEncodeStopsPastTheBound) {
  auto t = load(kByteLevel);
  ASSERT_TRUE(t);
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += i % 7 == 3 ? "<|end|>" : (i % 2 ? " world" : " hello");
  const Ids whole = encode(*t, text);
  for (size_t bound : {size_t{0}, size_t{1}, size_t{10}, size_t{999}}) {
    Result<Ids> bounded = t->encode(text, true, {}, bound);
    ASSERT_TRUE(bounded) << bounded.message();
    EXPECT_GT(bounded->size(), bound);
    // Past the bound by at most one word's ids ("world" is five).
    EXPECT_LE(bounded->size(), bound + 6);
    EXPECT_TRUE(std::equal(bounded->begin(), bounded->end(), whole.begin()));
  }
  // A text within the bound: every id, the same as unbounded.
  Result<Ids> fits = t->encode("hello world", true, {}, 7);
  ASSERT_TRUE(fits);
  EXPECT_EQ(*fits, encode(*t, "hello world"));
}

TEST(TokenizerTest, TemplateProcessingAddsBos) {
  std::string json = kByteLevel;
  json.replace(json.find(R"("post_processor": {"type": "ByteLevel"})"),
               std::string(R"("post_processor": {"type": "ByteLevel"})").size(),
               R"("post_processor": {"type": "TemplateProcessing",
                   "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                              {"Sequence": {"id": "A", "type_id": 0}}],
                   "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [12],
                                                  "tokens": ["<|end|>"]}}})");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "he"), (Ids{12, 8}));
  EXPECT_EQ(encode(*t, "he", /*special=*/false), (Ids{8}));
}

// Llama 2's form: Prepend "▁" and Replace " " by "▁", no pre-tokenizer, byte fallback, and the
// decoder sequence that undoes them.
const char *kSentencePiece = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                   {"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "<0xE2>": 5,
              "<0x82>": 6, "<0xAC>": 7, "▁": 8, "h": 9, "i": 10, "▁h": 11, "▁hi": 12},
    "merges": ["▁ h", "▁h i"]}
})";

TEST(TokenizerTest, SentencePieceBpeFallsBackToBytes) {
  auto t = load(kSentencePiece);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "hi hi"), (Ids{1, 12, 12}));
  // é is not in the vocabulary: its bytes <0xC3> <0xA9>.
  EXPECT_EQ(encode(*t, "hi é"), (Ids{1, 12, 8, 3, 4}));
  EXPECT_EQ(decode(*t, encode(*t, "hi é")), "hi é");
  // The Strip removes the space Prepend added, once, at the start of the text.
  EXPECT_EQ(decode(*t, {12, 12}), "hi hi");
  EXPECT_EQ(decode(*t, {1, 12}, /*skipSpecial=*/false), "<s> hi");
}

TEST(TokenizerTest, OnlyHexByteTokensDecodeAsBytes) {
  std::string json = kSentencePiece;
  json.replace(json.find(R"("▁hi": 12})"), std::string(R"("▁hi": 12})").size(),
               R"("▁hi": 12, "<0xZZ>": 13})");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(decode(*t, {12, 13}), "hi<0xZZ>");
}

TEST(TokenizerTest, SentencePieceUnknownCharactersFuseIntoOneUnk) {
  std::string json = kSentencePiece;
  json.replace(json.find(R"("byte_fallback": true)"), std::string(R"("byte_fallback": true)").size(),
               R"("byte_fallback": false)");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "hi xyz", false), (Ids{12, 8, 0}));
}

// Mistral's newer form: the Metaspace pre-tokenizer (prepend_scheme first) and decoder.
const char *kMetaspace = R"({
  "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "[INST]", "special": true, "lstrip": true, "rstrip": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                    "split": false},
  "post_processor": null,
  "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
  "model": {"type": "BPE", "unk_token": null, "byte_fallback": true,
    "vocab": {"<s>": 1, "[INST]": 2, "▁": 3, "h": 4, "i": 5, "▁h": 6, "▁hi": 7, "hi": 8},
    "merges": ["▁ h", "▁h i", "h i"]}
})";

TEST(TokenizerTest, MetaspacePrependsOnlyToTheFirstSection) {
  auto t = load(kMetaspace);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "hi hi"), (Ids{7, 7}));
  // After an added token, "first" does not prepend; lstrip/rstrip absorb the spaces around it.
  EXPECT_EQ(encode(*t, "hi [INST] hi"), (Ids{7, 2, 8}));
  EXPECT_EQ(decode(*t, {7, 7}), "hi hi");
}

// Llama 3's form: a Split with the tiktoken-style regex, then ByteLevel without its regex;
// ignore_merges takes a word the vocabulary holds whole.
const char *kSplitByteLevel = R"({
  "added_tokens": [],
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "ignore_merges": true,
    "vocab": {"1": 0, "2": 1, "3": 2, "4": 3, "12": 4, "123": 5, "a": 6, "b": 7, "ab": 8,
              "Ġ": 9, "Ġab": 10, "abb": 11},
    "merges": ["1 2", "12 3", "a b", "Ġ ab"]}
})";

// A SentencePiece Unigram model (T5's and ALBERT's kind, with Metaspace): the most probable
// segmentation; unknown characters fused into one unk, or their bytes with byte_fallback.
const char *kUnigram = R"({
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                    "split": false},
  "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
  "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
    "vocab": [["<unk>", 0.0], ["▁", -2.0], ["a", -3.0], ["b", -3.0], ["ab", -5.0], ["▁ab", -4.0],
              ["▁a", -2.5], ["<0xC3>", -9.0], ["<0xA9>", -9.0], ["c", -3.0], ["bc", -5.5]]}
})";

TEST(TokenizerTest, UnigramFindsTheMostProbableSegmentation) {
  auto t = load(kUnigram);
  ASSERT_TRUE(t);
  // "▁ab": whole (-4) beats "▁a" "b" (-5.5) and "▁" "ab" (-7).
  EXPECT_EQ(encode(*t, "ab"), (Ids{5}));
  // "▁abc": "▁ab" "c" (-7) beats "▁a" "bc" (-8).
  EXPECT_EQ(encode(*t, "abc"), (Ids{5, 9}));
  EXPECT_EQ(decode(*t, {5, 9}), "abc");
  // Unknown characters, fused: "é" and "ü" are one unk.
  EXPECT_EQ(encode(*t, "a éü"), (Ids{6, 1, 0}));
}

TEST(TokenizerTest, UnigramByteFallback) {
  std::string json = kUnigram;
  json.replace(json.find(R"("byte_fallback": false)"), std::string(R"("byte_fallback": false)").size(),
               R"("byte_fallback": true)");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "é"), (Ids{1, 7, 8}));
  // A character whose bytes are not all in the vocabulary stays unknown.
  EXPECT_EQ(encode(*t, "ü"), (Ids{1, 0}));
  // The byte pieces stand for bytes: text that spells one is characters (unknown here), as in
  // libsentencepiece.
  EXPECT_EQ(encode(*t, "<0xC3>", false), encode(*t, "<0xC4>", false));
}

TEST(TokenizerTest, UnigramNeverMatchesASpecialTokensPieceInText) {
  // "<s>" is a control piece of the vocabulary (SentencePiece's, score 0): in text read as plain
  // text it is characters, as libsentencepiece reads it, not the token.
  std::string json = kUnigram;
  json.replace(json.find(R"(["bc", -5.5]])"), std::string(R"(["bc", -5.5]])").size(),
               R"(["bc", -5.5], ["<s>", 0.0]])");
  json.replace(json.find(R"("special": true}])"), std::string(R"("special": true}])").size(),
               R"("special": true}, {"id": 11, "content": "<s>", "special": true}])");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "a<s>", false), (Ids{6, 11}));
  EXPECT_EQ(*t->encode("a<s>", false, {{0, 4}}), (Ids{6, 0}));
}

TEST(TokenizerTest, SplitRegexAndIgnoreMerges) {
  auto t = load(kSplitByteLevel);
  ASSERT_TRUE(t);
  // Digits in threes; "abb" is in the vocabulary whole although no merge makes it (by the merges
  // it would be "ab" "b", as " abb" is).
  EXPECT_EQ(encode(*t, "1234abb abb"), (Ids{5, 3, 11, 10, 7}));
  EXPECT_EQ(decode(*t, {5, 3, 11, 10, 7}), "1234abb abb");
}

TEST(TokenizerTest, SplitBehaviorsAndInvert) {
  // GPT-4o's form: the regex's matches are the pieces (Removed, inverted), adjacent ones kept apart.
  std::string json = kSplitByteLevel;
  json.replace(json.find(R"("behavior": "Isolated", "invert": false)"),
               std::string(R"("behavior": "Isolated", "invert": false)").size(),
               R"("behavior": "Removed", "invert": true)");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "1234"), (Ids{5, 3}));
  // Removed without invert drops the matches: only what lies between them stays (nothing here).
  json.replace(json.find(R"("invert": true)"), std::string(R"("invert": true)").size(),
               R"("invert": false)");
  t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "1234"), Ids{});
}

TEST(TokenizerTest, NfcNormalizerComposes) {
  std::string json = kByteLevel;
  json.replace(json.find(R"("normalizer": null)"), std::string(R"("normalizer": null)").size(),
               R"("normalizer": {"type": "NFC"})");
  auto t = load(json);
  ASSERT_TRUE(t);
  // e + U+0301 composes to é, C3 A9.
  EXPECT_EQ(encode(*t, "he\xCC\x81"), (Ids{0, 15}));
}

TEST(TokenizerTest, SingleWordAddedTokenNeedsWordBoundaries) {
  std::string json = kByteLevel;
  json.replace(json.find(R"("single_word": false)"), std::string(R"("single_word": false)").size(),
               R"("single_word": true)");
  auto t = load(json);
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "h <|end|> h"), (Ids{0, 4, 12, 4, 0}));
  EXPECT_NE(encode(*t, "h<|end|>h"), (Ids{0, 12, 0}));
}

TEST(TokenizerTest, DecodeStreamHoldsBackIncompleteUtf8) {
  auto t = load(kSentencePiece);
  ASSERT_TRUE(t);
  // € is E2 82 AC: nothing comes out until its last byte arrives.
  DecodeStream stream(*t);
  std::string out;
  stream.push(12, out);
  EXPECT_EQ(out, "hi");
  stream.push(8, out);
  stream.push(5, out);
  EXPECT_EQ(out, "hi ");
  stream.push(6, out);
  EXPECT_EQ(out, "hi ");
  stream.push(7, out);
  EXPECT_EQ(out, "hi \xE2\x82\xAC");
  // An unfinished sequence at the end becomes U+FFFD; so does a byte that starts none.
  stream.push(5, out);
  stream.finish(out);
  EXPECT_EQ(out, "hi \xE2\x82\xAC\xEF\xBF\xBD");
  EXPECT_EQ(decode(*t, {4, 12}), "\xEF\xBF\xBD hi");
}

TEST(TokenizerTest, RejectsInvalidUtf8AndUnknownIds) {
  auto t = load(kByteLevel);
  ASSERT_TRUE(t);
  Result<Ids> ids = t->encode("h\xC3");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.message(), "the text is not valid UTF-8");
  // A bad sequence of three bytes (replaced by U+FFFD, three bytes too) is refused as well.
  EXPECT_FALSE(t->encode("\t\xF2\x96\x81" "2").ok());
  Result<std::string> text = t->decode({99}, false);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.message().find("id 99 is not in the tokenizer's vocabulary"), std::string::npos);
}

TEST(TokenizerTest, RefusesWhatItDoesNotImplementNamingTheComponent) {
  auto with = [](const std::string &from, const std::string &to) {
    std::string json = kByteLevel;
    json.replace(json.find(from), from.size(), to);
    return json;
  };
  EXPECT_EQ(refusal(with(R"("pre_tokenizer": {"type": "ByteLevel")",
                         R"("pre_tokenizer": {"type": "BertPreTokenizer")")),
            "tokenizer.json: pre_tokenizer type 'BertPreTokenizer' is not supported");
  EXPECT_EQ(refusal(with(R"("model": {"type": "BPE")", R"("model": {"type": "Unigram")")),
            "tokenizer.json: model Unigram vocab is not a list of [piece, score]");
  EXPECT_EQ(refusal(with(R"("model": {"type": "BPE")", R"("model": {"type": "WordPiece")")),
            "tokenizer.json: model type 'WordPiece' is not supported");
  EXPECT_EQ(refusal(with(R"("normalizer": null)", R"("normalizer": {"type": "Lowercase"})")),
            "tokenizer.json: normalizer type 'Lowercase' is not supported");
  EXPECT_EQ(refusal(with(R"("decoder": {"type": "ByteLevel"})", R"("decoder": {"type": "WordPiece"})")),
            "tokenizer.json: decoder type 'WordPiece' is not supported");
  EXPECT_EQ(refusal(with(R"("post_processor": {"type": "ByteLevel"})",
                         R"("post_processor": {"type": "RobertaProcessing"})")),
            "tokenizer.json: post_processor type 'RobertaProcessing' is not supported");
  EXPECT_EQ(refusal(with(R"("Ġ Ġ"])", R"("Ġ x"])")),
            "tokenizer.json: merge 'Ġ x' names a token that is not in the vocab");
  EXPECT_EQ(refusal("{\"model\": "), "tokenizer.json: not valid JSON");
  std::string unigram = kUnigram;
  unigram.replace(unigram.find(R"("unk_id": 0, )"), std::string(R"("unk_id": 0, )").size(), "");
  EXPECT_EQ(refusal(unigram), "tokenizer.json: model Unigram without unk_id is not supported");
  EXPECT_EQ(refusal("{}"), "tokenizer.json: no model");
  // Ids are integers in range (a float past int64's range is not converted).
  EXPECT_EQ(refusal(with(R"("h": 0,)", R"("h": 1e100,)")),
            "tokenizer.json: model vocab id of 'h' is not an integer");
  EXPECT_EQ(refusal(with(R"({"id": 12,)", R"({"id": 4294967308,)")),
            "tokenizer.json: added token id 4294967308 is out of range");
  EXPECT_EQ(refusal(with(R"("vocab": {)", R"("vocab": [], "x": {)")),
            "tokenizer.json: model vocab is not an object of token: id");
  EXPECT_NE(refusal(with(R"("use_regex": true})", R"("use_regex": 7})")).find("tokenizer.json: "),
            std::string::npos);
}

} // namespace
} // namespace hetc

namespace hetc {
namespace {

// A byte-level BPE over all 256 bytes with a few merges: lossless, so any UTF-8 text must come
// back from decode exactly, and DecodeStream fed one id at a time must print the same bytes.
std::string fullByteLevelJson() {
  // GPT-2's bytes_to_unicode, as the ByteLevel components use it.
  std::vector<std::string> chars(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const int cp = printable ? b : next++;
    chars[b] = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                         : std::string{static_cast<char>(0xC0 | (cp >> 6)),
                                       static_cast<char>(0x80 | (cp & 0x3F))};
  }
  std::string vocab, quote = "\"";
  auto escape = [](const std::string &s) {
    std::string out;
    for (char c : s)
      out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out;
  };
  for (int b = 0; b < 256; ++b)
    vocab += quote + escape(chars[b]) + "\": " + std::to_string(b) + ", ";
  // Merges: "Ġt", "he", "Ġthe", and the first two bytes of a Cyrillic and a CJK letter.
  vocab += "\"Ġt\": 256, \"he\": 257, \"Ġthe\": 258, \"Ð¿\": 259, \"ä½\": 260";
  return R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
             "decoder": {"type": "ByteLevel"},
             "model": {"type": "BPE", "vocab": {)" +
         vocab + R"(}, "merges": ["Ġ t", "h e", "Ġt he", "Ð ¿", "ä ½"]}})";
}

// Random valid UTF-8 from ASCII, Latin-1, Cyrillic, CJK, emoji, ZWJ and whitespace.
std::string randomText(uint64_t &state, size_t characters) {
  const uint32_t ranges[][2] = {{0x20, 0x7E},    {0x09, 0x0D},   {0xA0, 0xFF},    {0x400, 0x4FF},
                                {0x4E00, 0x4F00}, {0x1F600, 0x1F64F}, {0x200D, 0x200D}, {0x20, 0x20}};
  std::string s;
  for (size_t i = 0; i < characters; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto &range = ranges[(state >> 33) % 8];
    const uint32_t cp = range[0] + static_cast<uint32_t>((state >> 40) % (range[1] - range[0] + 1));
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | cp >> 6);
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | cp >> 12);
      s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | cp >> 18);
      s += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
      s += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

TEST(TokenizerTest, ByteLevelRoundTripsRandomTextAndStreamsTheSameBytes) {
  auto t = load(fullByteLevelJson());
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, " the"), (Ids{258}));
  uint64_t state = 7;
  for (int round = 0; round < 200; ++round) {
    const std::string text = randomText(state, 1 + round % 40);
    const Ids ids = encode(*t, text);
    ASSERT_EQ(decode(*t, ids), text) << "round " << round;
    DecodeStream stream(*t);
    std::string streamed;
    for (int32_t id : ids) {
      const size_t before = streamed.size();
      stream.push(id, streamed);
      std::string valid;
      // What has come out so far always ends on a whole character.
      EXPECT_EQ(appendValidUtf8(streamed, valid, /*holdIncomplete=*/false), 0u);
      EXPECT_EQ(valid, streamed) << "round " << round << " after " << before << " bytes";
    }
    stream.finish(streamed);
    EXPECT_EQ(streamed, text) << "round " << round;
  }
}

} // namespace
} // namespace hetc
