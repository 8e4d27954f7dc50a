// Text to token ids and back, read from a Hugging Face tokenizer.json: byte-level BPE (GPT-2,
// Llama 3, Qwen2), SentencePiece-style BPE with byte fallback (Llama 2, Mistral) and Unigram,
// with added and special tokens, the normalizers, pre-tokenizers, post-processors and decoders
// those checkpoints use. What it does not implement is refused at load, naming the component.
// docs/tokenizers.md lists both.
#pragma once

#include "runtime/format/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hetc {

// Where a piece of text lies in a longer one: [begin, end) byte offsets.
struct TextRange {
  size_t begin, end;
};

class Tokenizer {
public:
  // Parses and checks tokenizer.json's text; every failure is one message starting
  // "tokenizer.json: ".
  static Result<std::unique_ptr<Tokenizer>> fromJson(std::string_view json);
  ~Tokenizer();
  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

  // The ids of `text` (valid UTF-8), with the post-processor's special tokens (BOS) when
  // `addSpecialTokens`. Added and special tokens written in the text are matched as tokens.
  Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecialTokens = true) const {
    return encode(text, addSpecialTokens, {});
  }
  // The same, with `plainText` (in order, not overlapping) read as text only: a special token
  // written inside one of those ranges is not matched as that token (a chat message that holds
  // "<|im_end|>" cannot end its turn); added tokens that are not special still are.
  // Encoding stops once it has more than `maxIds` ids (a server's context: a long text costs no
  // more than its first maxIds tokens' work); more than maxIds returned means "longer".
  Result<std::vector<int32_t>> encode(std::string_view text, bool addSpecialTokens,
                                      const std::vector<TextRange> &plainText,
                                      size_t maxIds = SIZE_MAX) const;
  // The text of `ids`; special tokens are left out when `skipSpecialTokens`. Byte sequences
  // that are not UTF-8 become U+FFFD, as Hugging Face's decoders do.
  Result<std::string> decode(const std::vector<int32_t> &ids, bool skipSpecialTokens) const;

  // One past the largest id (model vocabulary and added tokens).
  uint32_t idCount() const;
  // The id of a token written as `content` (an added token or a vocabulary entry), or -1.
  int32_t tokenId(std::string_view content) const;
  bool isSpecial(int32_t id) const;

  // The bytes id contributes to decoded text, before the decoder's leading strip (see
  // DecodeStream). Empty for an id outside the vocabulary.
  const std::string &pieceBytes(int32_t id) const;
  // Leading spaces the decoder removes from the start of a text (SentencePiece's Strip or
  // Metaspace decoder: the space the encoder prepended).
  uint32_t leadingSpacesStripped() const;

  struct Components;

private:
  Tokenizer();
  std::unique_ptr<Components> c_;
};

// Decodes ids one at a time, as generation produces them, into text that never ends inside a
// UTF-8 sequence: the bytes of an incomplete sequence are held back until the ids that complete
// it arrive (or `finish`). Nothing is allocated per id once `text`'s capacity suffices.
class DecodeStream {
public:
  explicit DecodeStream(const Tokenizer &tokenizer, bool skipSpecialTokens = true)
      : tokenizer_(tokenizer), skipSpecial_(skipSpecialTokens) {}
  // Appends id's complete characters to `out`.
  void push(int32_t id, std::string &out);
  // Appends what is held back, each byte of an unfinished sequence as U+FFFD.
  void finish(std::string &out);

private:
  void emit(std::string &out, bool final);
  const Tokenizer &tokenizer_;
  bool skipSpecial_;
  bool atStart_ = true;
  uint32_t stripped_ = 0;
  std::string pending_;
};

// Appends `bytes` to `out` with every byte that does not begin a valid UTF-8 sequence replaced
// by U+FFFD. Returns how many trailing bytes form a sequence that is valid so far but incomplete
// (and were not appended) when `holdIncomplete`; 0 otherwise.
size_t appendValidUtf8(std::string_view bytes, std::string &out, bool holdIncomplete);

} // namespace hetc
