#include "runtime/tokenizer/ChatTemplate.h"

#include "runtime/tokenizer/PlanTokenizer.h"

#include <algorithm>

namespace hetc {

namespace {

// Jinja's trim and Python's str.strip() on the whitespace these templates meet.
std::string trim(const std::string &text) {
  const char *space = " \t\n\r\f\v";
  const size_t first = text.find_first_not_of(space);
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

// A Jinja string literal's text with its escapes (\n, \t, \', \", \\) resolved; false when the
// text holds a quote, i.e. it is not one literal.
bool unescapeLiteral(std::string_view text, std::string &out) {
  out.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'' || c == '"')
      return false;
    if (c != '\\' || i + 1 == text.size()) {
      out += c;
      continue;
    }
    const char next = text[++i];
    out += next == 'n' ? '\n' : next == 't' ? '\t' : next;
  }
  return true;
}

// Qwen2's template writes "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" when the
// conversation has no system message: the first such literal in the template, if any.
std::string chatmlDefaultSystem(std::string_view jinja) {
  for (const std::string_view header : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    for (size_t at = jinja.find(header); at != std::string_view::npos;
         at = jinja.find(header, at + 1)) {
      const size_t start = at + header.size();
      const size_t end = jinja.find("<|im_end|>", start);
      std::string text;
      if (end != std::string_view::npos && unescapeLiteral(jinja.substr(start, end - start), text))
        return text;
    }
  }
  return "";
}

} // namespace

const char *ChatTemplate::name(ChatFamily family) {
  switch (family) {
  case ChatFamily::Llama3:
    return "llama3";
  case ChatFamily::Llama2:
    return "llama2";
  case ChatFamily::Mistral:
    return "mistral";
  case ChatFamily::ChatML:
    return "chatml";
  case ChatFamily::Gemma:
    return "gemma";
  }
  return "";
}

std::string ChatTemplate::names() { return "llama3, llama2, mistral, chatml or gemma"; }

bool ChatTemplate::fromName(std::string_view name, ChatFamily &family) {
  for (ChatFamily f : {ChatFamily::Llama3, ChatFamily::Llama2, ChatFamily::Mistral,
                       ChatFamily::ChatML, ChatFamily::Gemma})
    if (name == ChatTemplate::name(f)) {
      family = f;
      return true;
    }
  return false;
}

bool ChatTemplate::recognise(std::string_view jinja, ChatFamily &family) {
  auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  // Most specific first: Llama 2's template holds [INST] as Mistral's does.
  if (has("<|start_header_id|>") && has("<|eot_id|>"))
    family = ChatFamily::Llama3;
  else if (has("<|im_start|>") && has("<|im_end|>"))
    family = ChatFamily::ChatML;
  else if (has("<start_of_turn>") && has("<end_of_turn>"))
    family = ChatFamily::Gemma;
  else if (has("[INST]") && has("<<SYS>>"))
    family = ChatFamily::Llama2;
  else if (has("[INST]") && has("[/INST]"))
    family = ChatFamily::Mistral;
  else
    return false;
  return true;
}

ChatTemplate::ChatTemplate(ChatFamily family, std::string bos, std::string eos,
                           std::string_view jinja)
    : family_(family), bos_(std::move(bos)), eos_(std::move(eos)) {
  switch (family_) {
  case ChatFamily::Llama3:
    endOfTurn_ = "<|eot_id|>";
    break;
  case ChatFamily::ChatML:
    endOfTurn_ = "<|im_end|>";
    defaultSystem_ = chatmlDefaultSystem(jinja);
    break;
  case ChatFamily::Gemma:
    endOfTurn_ = "<end_of_turn>";
    break;
  case ChatFamily::Llama2:
  case ChatFamily::Mistral:
    endOfTurn_ = eos_;
    break;
  }
}

// One user message and the assistant's header, as the template writes it; `first`: the
// conversation's first, with what comes before it (BOS, the system message).
void ChatTemplate::userTurn(const std::string &system, const std::string &user, bool first,
                            RenderedChat &out) const {
  switch (family_) {
  case ChatFamily::Llama3:
    if (first) {
      out.literal(bos_);
      if (!system.empty()) {
        out.literal("<|start_header_id|>system<|end_header_id|>\n\n");
        out.message(trim(system));
        out.literal("<|eot_id|>");
      }
    }
    out.literal("<|start_header_id|>user<|end_header_id|>\n\n");
    out.message(trim(user));
    out.literal("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    break;
  case ChatFamily::ChatML:
    if (first && !system.empty()) {
      out.literal("<|im_start|>system\n");
      out.message(system);
      out.literal("<|im_end|>\n");
    } else if (first && !defaultSystem_.empty()) {
      out.literal("<|im_start|>system\n" + defaultSystem_ + "<|im_end|>\n");
    }
    out.literal("<|im_start|>user\n");
    out.message(user);
    out.literal("<|im_end|>\n<|im_start|>assistant\n");
    break;
  case ChatFamily::Gemma:
    if (first)
      out.literal(bos_);
    out.literal("<start_of_turn>user\n");
    out.message(trim(user));
    out.literal("<end_of_turn>\n<start_of_turn>model\n");
    break;
  case ChatFamily::Llama2:
    out.literal(bos_ + "[INST] ");
    // trim(content): with a system message, content starts with <<SYS>>, so only its end is
    // trimmed: the user's trailing whitespace, and with no user text the "\n\n" before it.
    if (first && !system.empty()) {
      const std::string userText = trim("x" + user).substr(1); // the end trimmed, the start kept
      out.literal("<<SYS>>\n");
      out.message(system);
      out.literal(userText.empty() ? "\n<</SYS>>" : "\n<</SYS>>\n\n");
      out.message(userText);
    } else {
      out.message(trim(user));
    }
    out.literal(" [/INST]");
    break;
  case ChatFamily::Mistral:
    if (first)
      out.literal(bos_);
    out.literal("[INST] ");
    out.message(user);
    out.literal(" [/INST]");
    break;
  }
}

// What follows a reply's text; the end-of-turn token left out when the reply ended with it.
std::string ChatTemplate::replyClose(bool endedWithEndOfTurn) const {
  switch (family_) {
  case ChatFamily::Llama3:
  case ChatFamily::Mistral:
    return endedWithEndOfTurn ? "" : endOfTurn_;
  case ChatFamily::ChatML:
  case ChatFamily::Gemma:
    return (endedWithEndOfTurn ? "" : endOfTurn_) + "\n";
  case ChatFamily::Llama2:
    // ' ' + content.strip() + ' ' + eos_token: a reply that ended with EOS has it already.
    return endedWithEndOfTurn ? "" : " " + eos_;
  }
  return "";
}

RenderedChat ChatTemplate::renderWithRanges(const std::vector<ChatMessage> &messages,
                                            bool addGenerationPrompt) const {
  size_t next = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system")
    system = messages[next++].content;
  RenderedChat out;
  bool first = true;
  for (; next < messages.size(); ++next) {
    const ChatMessage &message = messages[next];
    if (message.role == "user") {
      userTurn(system, message.content, first, out);
      // The assistant's header belongs to the next message or to the generation prompt.
      const bool last = next + 1 == messages.size();
      if (last && !addGenerationPrompt) {
        const std::string header = family_ == ChatFamily::Llama3
                                       ? "<|start_header_id|>assistant<|end_header_id|>\n\n"
                                   : family_ == ChatFamily::ChatML ? "<|im_start|>assistant\n"
                                   : family_ == ChatFamily::Gemma  ? "<start_of_turn>model\n"
                                                                   : "";
        out.text.resize(out.text.size() - header.size()); // the template's text only
      }
      first = false;
    } else {
      const bool trims = family_ == ChatFamily::Llama3 || family_ == ChatFamily::Gemma ||
                         family_ == ChatFamily::Llama2;
      if (family_ == ChatFamily::Llama2)
        out.literal(" ");
      out.message(trims ? trim(message.content) : message.content);
      out.literal(replyClose(false));
    }
  }
  return out;
}

std::string ChatTemplate::turnDelta(bool firstTurn, const std::string &system,
                                    const std::string &user, bool replyEndedWithEndOfTurn) const {
  RenderedChat out;
  if (!firstTurn)
    out.literal(replyClose(replyEndedWithEndOfTurn));
  userTurn(system, user, firstTurn, out);
  return out.text;
}

namespace {

// The first characters of a template, on one line, for a message.
std::string templateExcerpt(const std::string &jinja) {
  std::string excerpt;
  for (char c : jinja.substr(0, 60))
    excerpt += c == '\n' ? std::string("\\n") : std::string(1, c);
  return excerpt + (jinja.size() > 60 ? "..." : "");
}

// A special token written as text, as Jinja's bos_token and eos_token; empty for -1 or an id
// the tokenizer cannot decode.
std::string tokenText(const Tokenizer &tokenizer, int32_t id) {
  if (id < 0)
    return "";
  Result<std::string> text = tokenizer.decode({id}, false);
  return text ? *text : std::string();
}

} // namespace

Result<ChatTemplate> chatTemplateFor(const PlanTokenizer &tokenizer, const std::string &name,
                                     const std::string &planName) {
  ChatFamily family{};
  if (!name.empty()) {
    if (!ChatTemplate::fromName(name, family))
      return Status::error("--template '" + name + "': expected " + ChatTemplate::names());
  } else if (tokenizer.chatTemplate.empty()) {
    return Status::error(planName +
                         " packs no chat template (tokenizer_config.json's chat_template): give "
                         "--template " +
                         ChatTemplate::names());
  } else if (!ChatTemplate::recognise(tokenizer.chatTemplate, family)) {
    return Status::error(planName + "'s chat template is not one of the built-in ones (it begins '" +
                         templateExcerpt(tokenizer.chatTemplate) + "'): give --template " +
                         ChatTemplate::names());
  }
  return ChatTemplate(family, tokenText(*tokenizer.tokenizer, tokenizer.bosId),
                      tokenText(*tokenizer.tokenizer,
                                tokenizer.eosIds.empty() ? -1 : tokenizer.eosIds[0]),
                      tokenizer.chatTemplate);
}

std::vector<int32_t> replyStopIds(const PlanTokenizer &tokenizer, const ChatTemplate &chat) {
  std::vector<int32_t> stopIds = tokenizer.eosIds;
  const int32_t endOfTurn = tokenizer.tokenizer->tokenId(chat.endOfTurn());
  if (endOfTurn >= 0 && std::find(stopIds.begin(), stopIds.end(), endOfTurn) == stopIds.end())
    stopIds.push_back(endOfTurn);
  return stopIds;
}

} // namespace hetc
