// libFuzzer target: the chat templates (runtime/tokenizer/ChatTemplate). The input is fields
// separated by 0x01 bytes: the first byte's low bits pick the family (bit 3: the generation
// prompt), then the plan's Jinja text (recognised, and ChatML's default system message read from
// it), BOS and EOS as text, and the messages, each a role byte (system, user, assistant or an
// unknown role) and its content. The rendering is tokenized with a byte-level tokenizer that knows
// the family's control tokens (tests/fuzz/tokenizers/).
//
// What holds, besides no crash and no sanitizer report:
// - the messages' ranges are in order, inside the text, and each holds text of a message;
// - the rendering of a conversation is the first turn's delta, then for each later turn the
//   reply and that turn's delta (turnDelta): hetc chat feeds only what a turn adds, so the KV
//   cache then holds what the whole rendering would be;
// - tokenized with the messages as plain text, the text comes back, and no control token lies in
//   a message's text (a user cannot close a turn by typing <|im_end|>).
#include "runtime/tokenizer/ChatTemplate.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

using hetc::ChatFamily;
using hetc::ChatMessage;
using hetc::ChatTemplate;

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "fuzz_chat_template: %s\n", what.c_str());
  std::abort();
}

std::unique_ptr<hetc::Tokenizer> loadTokenizer(const char *name) {
  std::ifstream in(std::string(HETC_FUZZ_TOKENIZERS) + "/" + name, std::ios::binary);
  std::stringstream json;
  json << in.rdbuf();
  auto tokenizer = hetc::Tokenizer::fromJson(json.str());
  if (!tokenizer)
    fail(std::string(name) + ": " + tokenizer.message());
  return std::move(tokenizer.value());
}

// ChatML's control tokens (GPT-2's byte-level BPE over all bytes) and Llama 3's.
std::unique_ptr<hetc::Tokenizer> gChatml, gLlama3;

// The templates' trim: Python's str.strip() on ASCII whitespace.
std::string trim(const std::string &text) {
  const char *space = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

void checkRanges(const hetc::RenderedChat &rendered, const std::vector<ChatMessage> &messages) {
  size_t end = 0;
  for (const hetc::TextRange &range : rendered.messageText) {
    if (range.begin < end || range.end <= range.begin || range.end > rendered.text.size())
      fail("message ranges out of order or outside the text");
    end = range.end;
    const std::string text = rendered.text.substr(range.begin, range.end - range.begin);
    bool found = false;
    for (const ChatMessage &m : messages)
      found |= m.content.find(text) != std::string::npos;
    if (!found)
      fail("a message range holds text of no message");
  }
}

// Tokenized with the messages as plain text: the text comes back, and every control token lies
// outside the messages.
void checkTokens(const hetc::Tokenizer &tokenizer, const hetc::RenderedChat &rendered) {
  std::string valid;
  hetc::appendValidUtf8(rendered.text, valid, false);
  if (valid != rendered.text)
    return; // the fuzzer's BOS, EOS or messages were not UTF-8: refused before rendering
  auto ids = tokenizer.encode(rendered.text, false, rendered.messageText);
  if (!ids)
    fail("the rendering does not encode: " + ids.message());
  auto back = tokenizer.decode(*ids, false);
  if (!back || *back != rendered.text)
    fail("the rendering does not come back from its ids");
  size_t at = 0, range = 0;
  for (int32_t id : *ids) {
    const size_t length = tokenizer.pieceBytes(id).size();
    while (range < rendered.messageText.size() && rendered.messageText[range].end <= at)
      ++range;
    if (tokenizer.isSpecial(id) && range < rendered.messageText.size() &&
        rendered.messageText[range].begin < at + length)
      fail("control token " + std::to_string(id) + " at byte " + std::to_string(at) +
           " comes from a message's text");
    at += length;
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  gChatml = loadTokenizer("byte_level_full.json");
  gLlama3 = loadTokenizer("split_byte_level_full.json");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  std::vector<std::string> fields(1);
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 1)
      fields.emplace_back();
    else
      fields.back() += static_cast<char>(data[i]);
  }
  fields.resize(std::max<size_t>(fields.size(), 3));
  const std::string &jinja = fields[0], &bos = fields[1], &eos = fields[2];

  ChatFamily recognised;
  if (ChatTemplate::recognise(jinja, recognised) && !ChatTemplate::fromName(ChatTemplate::name(recognised), recognised))
    fail("a recognised family has no name");
  const ChatFamily families[] = {ChatFamily::Llama3, ChatFamily::Llama2, ChatFamily::Mistral,
                                 ChatFamily::ChatML, ChatFamily::Gemma};
  const ChatFamily family = families[(data[0] & 7) % 5];
  const bool generationPrompt = data[0] & 8;
  const ChatTemplate chat(family, bos, eos, jinja);

  static const char *const kRoles[] = {"system", "user", "assistant", "tool"};
  std::vector<ChatMessage> messages;
  for (size_t i = 3; i < fields.size(); ++i) {
    const std::string &f = fields[i];
    messages.push_back({kRoles[f.empty() ? 1 : static_cast<uint8_t>(f[0]) % 4],
                        f.empty() ? "" : f.substr(1)});
  }
  const hetc::RenderedChat rendered = chat.renderWithRanges(messages, generationPrompt);
  if (rendered.text != chat.render(messages, generationPrompt))
    fail("render and renderWithRanges differ");
  checkRanges(rendered, messages);
  const hetc::Tokenizer &tokenizer = family == ChatFamily::Llama3 ? *gLlama3 : *gChatml;
  checkTokens(tokenizer, rendered);

  // The same contents as a conversation: an optional system message, then user and assistant
  // turns alternating (replies as a model writes them: trimmed), rendered with the generation
  // prompt, against what hetc chat feeds turn by turn.
  std::vector<ChatMessage> conversation;
  std::string system;
  size_t next = 0;
  if (!messages.empty() && messages[0].role == "system")
    system = messages[next++].content;
  if (!system.empty())
    conversation.push_back({"system", system});
  std::string fed;
  bool userTurn = true;
  for (; next < messages.size(); ++next, userTurn = !userTurn) {
    const std::string &content = messages[next].content;
    if (userTurn) {
      fed += chat.turnDelta(conversation.size() <= (system.empty() ? 0 : 1), system, content,
                            false);
      conversation.push_back({"user", content});
    } else {
      const std::string reply = trim(content);
      fed += (family == ChatFamily::Llama2 ? " " : "") + reply;
      conversation.push_back({"assistant", reply});
    }
  }
  if (!userTurn && !conversation.empty()) {
    const hetc::RenderedChat whole = chat.renderWithRanges(conversation, true);
    if (whole.text != fed)
      fail("the conversation's rendering is not what its turns feed:\n  rendered '" + whole.text +
           "'\n  fed      '" + fed + "'");
    checkRanges(whole, conversation);
    checkTokens(tokenizer, whole);
  }
  return 0;
}
