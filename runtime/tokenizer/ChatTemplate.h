// Chat templates of the common model families, written out in C++ from the Jinja text their
// checkpoints ship in tokenizer_config.json (there is no Jinja engine here). A plan's template is
// recognised by marker strings in its chat_template; docs/tokenizers.md lists the families.
//
// Every family here renders a conversation as a prefix that only grows: the rendering of turns
// 1..n is the rendering of turns 1..n-1 with the reply, followed by what turn n adds. A chat keeps
// its KV cache between turns and feeds only that addition (turnDelta).
#pragma once

#include "runtime/format/Status.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hetc {

enum class ChatFamily {
  Llama3,  // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  Llama2,  // <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
  Mistral, // <s>[INST] ... [/INST]...</s>, no system message
  ChatML,  // <|im_start|>role\n...<|im_end|>\n (Qwen2), with the template's default system
  Gemma,   // <start_of_turn>user\n...<end_of_turn>\n, the assistant as "model"
};

struct ChatMessage {
  std::string role; // system, user or assistant
  std::string content;
};

// A rendered conversation and where the messages' own text lies in it (the rest is the
// template's: role headers, control tokens). Tokenizing with the messages' ranges as plain text
// keeps a control token written inside a message from becoming that token.
struct RenderedChat {
  std::string text;
  std::vector<TextRange> messageText; // in order, not overlapping

  // Appends the template's own text.
  void literal(std::string_view s) { text += s; }
  // Appends a message's text.
  void message(std::string_view s) {
    if (!s.empty())
      messageText.push_back({text.size(), text.size() + s.size()});
    text += s;
  }
};

class ChatTemplate {
public:
  // The family's name as --template takes it: llama3, llama2, mistral, chatml, gemma.
  static const char *name(ChatFamily family);
  // "llama3, llama2, mistral, chatml or gemma".
  static std::string names();
  // False when `name` is none of names().
  static bool fromName(std::string_view name, ChatFamily &family);
  // The family whose markers `jinja` holds; false when none does.
  static bool recognise(std::string_view jinja, ChatFamily &family);

  // `bos` and `eos` are the tokenizer's BOS and EOS tokens written as text (as Jinja's
  // bos_token and eos_token). `jinja` is the plan's template (may be empty): ChatML reads the
  // default system message from it.
  ChatTemplate(ChatFamily family, std::string bos, std::string eos, std::string_view jinja = {});

  ChatFamily family() const { return family_; }
  bool supportsSystem() const {
    return family_ != ChatFamily::Mistral && family_ != ChatFamily::Gemma;
  }
  // The token that ends an assistant's reply (generation stops at it).
  const std::string &endOfTurn() const { return endOfTurn_; }

  // What the Jinja template gives for `messages` (system first if any, then user and assistant
  // alternating), with the assistant's header after them when `addGenerationPrompt`.
  std::string render(const std::vector<ChatMessage> &messages, bool addGenerationPrompt) const {
    return renderWithRanges(messages, addGenerationPrompt).text;
  }
  // The same rendering, with where each message's text lies in it.
  RenderedChat renderWithRanges(const std::vector<ChatMessage> &messages,
                                bool addGenerationPrompt) const;

  // The text a turn adds after what the KV cache already holds: for the first turn, the whole
  // rendering of the system message (empty: none) and `user` with the assistant's header; for a
  // later one, the close of the previous reply (without its end-of-turn token when the reply
  // ended with it, `replyEndedWithEndOfTurn`), then `user` and the assistant's header.
  std::string turnDelta(bool firstTurn, const std::string &system, const std::string &user,
                        bool replyEndedWithEndOfTurn) const;

private:
  void userTurn(const std::string &system, const std::string &user, bool first,
                RenderedChat &out) const;
  std::string replyClose(bool endedWithEndOfTurn) const;

  ChatFamily family_;
  std::string bos_;
  std::string eos_;
  std::string endOfTurn_;
  std::string defaultSystem_; // ChatML: the system message the template writes when none is given
};

struct PlanTokenizer;

// The chat template of a plan's tokenizer: the family `name` names (--template) when not empty,
// else the one recognised from the plan's chat_template. Failures are one message naming
// `planName` and --template.
Result<ChatTemplate> chatTemplateFor(const PlanTokenizer &tokenizer, const std::string &name,
                                     const std::string &planName);
// The ids a reply ends at: the tokenizer's end-of-sequence ids and the template's end of turn.
std::vector<int32_t> replyStopIds(const PlanTokenizer &tokenizer, const ChatTemplate &chat);

} // namespace hetc
