// SentencePiece models trained at test time by libsentencepiece's trainer on a small multilingual
// corpus, converted into tokenizer.json (hetc_sentencepiece) and run by the runtime's Tokenizer:
// over texts that hold characters the corpus never had (byte fallback, unknown pieces), tabs,
// newlines and runs of spaces, the ids are libsentencepiece's Encode's and the text decoded back
// is its DecodeIds's. Models whose normalization hetc cannot reproduce, and malformed files, are
// refused in one message.
#include "SentencePieceConversion.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hetc {
namespace {

namespace fs = std::filesystem;

// Sentences of many scripts, digits, emoji, code and runs of spaces, combined into the training
// lines.
const char *const kSentences[] = {
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore, 3 times a day.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: η γρήγορη καφέ αλεπού πηδάει.",
    "日本語のテキストです。東京は大きい都市です。",
    "中文文本测试，你好世界。今天天气很好。",
    "한국어 텍스트를 시험합니다.",
    "العربية نص تجريبي للاختبار",
    "עברית היא שפה יפה",
    "हिन्दी पाठ का परीक्षण",
    "ภาษาไทยเป็นภาษาที่สวยงาม",
    "Numbers: 12345 67890 3.14159 2024-06-01 100%",
    "Emoji 😀 🎉 👍 ❤️ are fun",
    "def square(x):    return x * x  # code",
    "for (int i = 0; i < n; ++i) { total += values[i]; }",
    "if x == 1 && y != 2 { println!(\"{}\", x); }",
    "Runs   of    spaces     and  tabs",
    "Café, naïve, résumé, coöperate, façade.",
};

// The sentences, then lines of their words drawn in a fixed pseudo-random order.
std::string trainingCorpus() {
  std::vector<std::string> words;
  std::string corpus;
  for (const char *sentence : kSentences) {
    corpus += std::string(sentence) + "\n";
    std::istringstream in(sentence);
    for (std::string word; in >> word;)
      words.push_back(word);
  }
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>(state >> 33);
  };
  for (int line = 0; line < 3000; ++line) {
    const size_t count = 3 + next() % 8;
    for (size_t w = 0; w < count; ++w)
      corpus += (w ? " " : "") + words[next() % words.size()];
    corpus += "\n";
  }
  return corpus;
}

// Texts to encode: the training sentences, and what the corpus never held.
std::vector<std::string> evaluationTexts() {
  std::vector<std::string> texts(std::begin(kSentences), std::end(kSentences));
  for (const char *text : {
           "",
           " ",
           "   ",
           "x",
           " leading space",
           "   three leading spaces",
           "trailing spaces   ",
           "inner    run   of spaces",
           "tab\tseparated\tvalues",
           "two\nlines\n",
           "\n\nblank lines first",
           "Straße, Ærøskøbing, Łódź, İstanbul", // letters the corpus never had
           "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝓂𝒶𝓉𝒽 ∮ ∑ ∞ ≠ ≤",             // outside the basic plane
           "🦀🧬🪐 new emoji 🏳️‍🌈 with joiners 👩‍👩‍👧",
           "Ꙭ Ⰰ ᚠᛁᚱ ᓀᐦᐃᔭᐍᐏᐣ", // scripts the corpus never had
           "mixed 日本 and Русский and 한국 in one line",
           "code: std::vector<int> v{1, 2, 3}; // ok",
           "a\u2581literal U+2581 inside",
           "digits 000111222333444555666777888999",
           "The quick brown fox jumps over the lazy dog. The quick brown fox!",
       })
    texts.push_back(text);
  return texts;
}

class SentencePieceModel {
public:
  // Trains a model named `name` with the trainer flags `flags` (once per process).
  SentencePieceModel(const std::string &name, const std::string &flags) {
    const fs::path dir = fs::path(HETC_SPM_WORKDIR);
    fs::create_directories(dir);
    const fs::path corpus = dir / "corpus.txt";
    { // written whole, then renamed over the last one: tests may run side by side
      const fs::path partial = dir / ("corpus." + name);
      std::ofstream(partial, std::ios::binary) << trainingCorpus();
      fs::rename(partial, corpus);
    }
    const fs::path prefix = dir / name;
    const std::string args = "--input=" + corpus.string() + " --model_prefix=" + prefix.string() +
                             " --num_threads=1 --minloglevel=2 " + flags;
    const auto status = ::sentencepiece::SentencePieceTrainer::Train(args);
    if (!status.ok()) {
      error_ = std::string("training failed: ") + status.message();
      return;
    }
    std::ifstream in(prefix.string() + ".model", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    bytes_ = text.str();
    const auto loaded = processor_.LoadFromSerializedProto(bytes_);
    if (!loaded.ok())
      error_ = std::string("libsentencepiece cannot load its own model: ") + loaded.message();
  }

  const std::string &error() const { return error_; }
  const std::string &bytes() const { return bytes_; }
  const ::sentencepiece::SentencePieceProcessor &processor() const { return processor_; }

private:
  std::string error_, bytes_;
  ::sentencepiece::SentencePieceProcessor processor_;
};

struct Coverage {
  size_t byteIds = 0, unkIds = 0, mergedIds = 0; // ids seen over all texts, by kind
};

// Encodes every evaluation text with libsentencepiece and with the converted tokenizer; the ids
// must be the same. Where they hold no unknown id, the decoded texts must be the same too, and
// the original text when `lossless`.
void expectSameAsSentencePiece(const SentencePieceModel &model, bool lossless, Coverage &coverage) {
  Result<spm::Conversion> conversion = spm::convertSentencePiece(model.bytes(), {});
  EXPECT_TRUE(conversion.ok()) << conversion.message();
  if (!conversion)
    return;
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(conversion->tokenizerJson);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (!tokenizer)
    return;
  const auto &sp = model.processor();
  for (const std::string &text : evaluationTexts()) {
    std::vector<int> expected;
    ASSERT_TRUE(sp.Encode(text, &expected).ok());
    Result<std::vector<int32_t>> ids = (*tokenizer)->encode(text, /*addSpecialTokens=*/false);
    ASSERT_TRUE(ids.ok()) << ids.message();
    EXPECT_EQ(std::vector<int32_t>(expected.begin(), expected.end()), *ids)
        << "text: '" << text << "'";

    bool unknown = false;
    for (int id : expected) {
      unknown |= sp.IsUnknown(id);
      coverage.unkIds += sp.IsUnknown(id);
      coverage.byteIds += sp.IsByte(id);
      coverage.mergedIds += sp.IdToPiece(id).size() > 4; // longer than one character
    }
    if (unknown) // libsentencepiece writes an unknown piece as " ⁇ ", a tokenizer.json its text
      continue;
    std::string expectedText;
    ASSERT_TRUE(sp.Decode(expected, &expectedText).ok());
    Result<std::string> decoded = (*tokenizer)->decode(*ids, /*skipSpecialTokens=*/true);
    ASSERT_TRUE(decoded.ok()) << decoded.message();
    EXPECT_EQ(expectedText, *decoded) << "ids of '" << text << "'";
    if (lossless && text.find("\u2581") == std::string::npos) // U+2581 decodes as a space
      EXPECT_EQ(text, *decoded);
  }
  // BOS, which Llama's tokenizer adds and libsentencepiece's Encode does not, comes first.
  Result<std::vector<int32_t>> withBos = (*tokenizer)->encode("hello", true);
  std::vector<int> plain;
  sp.Encode("hello", &plain);
  plain.insert(plain.begin(), sp.bos_id());
  EXPECT_EQ(std::vector<int32_t>(plain.begin(), plain.end()), *withBos);
  EXPECT_EQ(conversion->bosId, sp.bos_id());
  EXPECT_EQ(conversion->eosId, sp.eos_id());
}

// Llama 2's kind: BPE, byte fallback, identity normalization, spaces kept as they are.
TEST(SentencePieceConversion, BpeWithByteFallbackLikeLlama2) {
  SentencePieceModel model("bpe_byte_fallback",
                           "--model_type=bpe --vocab_size=700 --byte_fallback=true "
                           "--normalization_rule_name=identity --remove_extra_whitespaces=false "
                           "--character_coverage=0.999");
  ASSERT_EQ(model.error(), "");
  Coverage coverage;
  expectSameAsSentencePiece(model, /*lossless=*/true, coverage);
  EXPECT_GT(coverage.byteIds, 20u); // the texts reached byte fallback...
  EXPECT_EQ(coverage.unkIds, 0u);
  EXPECT_GT(coverage.mergedIds, 100u); // ...and merges
}

// Unigram with identity normalization and SentencePiece's default whitespace handling (extra
// spaces removed): unknown characters without byte fallback.
TEST(SentencePieceConversion, UnigramWithUnknownPieces) {
  SentencePieceModel model("unigram",
                           "--model_type=unigram --vocab_size=300 --hard_vocab_limit=false "
                           "--normalization_rule_name=identity");
  ASSERT_EQ(model.error(), "");
  Coverage coverage;
  expectSameAsSentencePiece(model, /*lossless=*/false, coverage);
  EXPECT_GT(coverage.unkIds, 5u);
  EXPECT_EQ(coverage.byteIds, 0u);
  EXPECT_GT(coverage.mergedIds, 100u);
}

// No dummy prefix, byte fallback, spaces kept: Unigram that round-trips every text.
TEST(SentencePieceConversion, UnigramWithoutDummyPrefix) {
  SentencePieceModel model(
      "unigram_no_prefix",
      "--model_type=unigram --vocab_size=600 --byte_fallback=true --hard_vocab_limit=false "
      "--normalization_rule_name=identity --add_dummy_prefix=false "
      "--remove_extra_whitespaces=false");
  ASSERT_EQ(model.error(), "");
  Coverage coverage;
  expectSameAsSentencePiece(model, /*lossless=*/true, coverage);
  EXPECT_GT(coverage.byteIds, 20u);
  EXPECT_EQ(coverage.unkIds, 0u);
}

// BPE without byte fallback or dummy prefix, extra spaces removed: runs of unknown characters.
TEST(SentencePieceConversion, BpeWithoutDummyPrefixOrByteFallback) {
  SentencePieceModel model("bpe_no_prefix", "--model_type=bpe --vocab_size=500 "
                                            "--normalization_rule_name=identity "
                                            "--add_dummy_prefix=false");
  ASSERT_EQ(model.error(), "");
  Coverage coverage;
  expectSameAsSentencePiece(model, /*lossless=*/false, coverage);
  EXPECT_GT(coverage.unkIds, 5u);
}

// spm_train's default normalization, nmt_nfkc, rewrites text by a character map: refused.
TEST(SentencePieceConversion, RefusesNmtNfkc) {
  SentencePieceModel model("nmt_nfkc",
                           "--model_type=unigram --vocab_size=300 --hard_vocab_limit=false");
  ASSERT_EQ(model.error(), "");
  Result<spm::Conversion> conversion = spm::convertSentencePiece(model.bytes(), {});
  ASSERT_FALSE(conversion.ok());
  EXPECT_EQ(conversion.message(),
            "normalizer 'nmt_nfkc' (a precompiled character map) is not supported: only "
            "'identity' converts exactly (spm_train --normalization_rule_name=identity)");
}

TEST(SentencePieceConversion, RefusesMalformedModels) {
  SentencePieceModel model("malformed_source", "--model_type=bpe --vocab_size=500 "
                                               "--normalization_rule_name=identity");
  ASSERT_EQ(model.error(), "");
  const std::string &bytes = model.bytes();
  for (const std::string &bad :
       {std::string(), std::string("not a model at all"), bytes.substr(0, bytes.size() / 2),
        bytes.substr(0, 7), std::string(bytes.size(), '\xff')}) {
    Result<spm::Conversion> conversion = spm::convertSentencePiece(bad, {});
    ASSERT_FALSE(conversion.ok()) << bad.size() << " bytes";
    EXPECT_EQ(conversion.message().rfind("libsentencepiece cannot load it: ", 0), 0u)
        << conversion.message();
  }
}

// tokenizer_config.json's add_bos_token / add_eos_token decide what encoding adds.
TEST(SentencePieceConversion, AddBosAndEosAsTold) {
  SentencePieceModel model("specials", "--model_type=bpe --vocab_size=500 "
                                       "--normalization_rule_name=identity");
  ASSERT_EQ(model.error(), "");
  std::vector<int> plain;
  model.processor().Encode("hello world", &plain);
  const int32_t bos = model.processor().bos_id(), eos = model.processor().eos_id();
  for (auto [addBos, addEos] : {std::pair{false, false}, {true, true}, {false, true}}) {
    Result<spm::Conversion> conversion = spm::convertSentencePiece(model.bytes(), {addBos, addEos});
    ASSERT_TRUE(conversion.ok()) << conversion.message();
    auto tokenizer = Tokenizer::fromJson(conversion->tokenizerJson);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
    std::vector<int32_t> expected(plain.begin(), plain.end());
    if (addBos)
      expected.insert(expected.begin(), bos);
    if (addEos)
      expected.push_back(eos);
    EXPECT_EQ(*(*tokenizer)->encode("hello world", true), expected);
    // Control pieces are special tokens: left out of decoded text when asked.
    EXPECT_TRUE((*tokenizer)->isSpecial(bos));
    EXPECT_TRUE((*tokenizer)->isSpecial(eos));
  }
}

} // namespace
} // namespace hetc
