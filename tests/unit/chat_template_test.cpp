// The built-in chat templates against the text the Jinja templates of real checkpoints give for
// a two-turn conversation (written out by hand from the templates below), and the property the
// chat's KV reuse rests on: what a turn feeds is exactly what a full re-render adds.
#include "runtime/tokenizer/ChatTemplate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hetc {
namespace {

// tokenizer_config.json's chat_template of each family's checkpoints (Meta-Llama-3-8B-Instruct,
// Llama-2-7b-chat-hf, Mistral-7B-Instruct-v0.1, Qwen2-7B-Instruct, gemma-7b-it).
const char *kLlama3Jinja =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif "
    "%}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}";
const char *kLlama2Jinja =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% "
    "endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' "
    "[/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";
const char *kMistralJinja =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
    "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% endif %}{% endfor %}";
const char *kQwen2Jinja =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif "
    "%}{{'<|im_start|>' "
    "+ message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char *kGemmaJinja =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set "
    "role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + "
    "role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
    "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";

struct Family {
  ChatFamily family;
  const char *jinja;
  const char *bos;
  const char *eos;
  bool system;
  // render(system, U1, A1, U2) with the generation prompt, as the Jinja template gives it.
  const char *twoTurns;
};

const Family kFamilies[] = {
    {ChatFamily::Llama3, kLlama3Jinja, "<|begin_of_text|>", "<|end_of_text|>", true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {ChatFamily::Llama2, kLlama2Jinja, "<s>", "</s>", true,
     "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]"},
    {ChatFamily::Mistral, kMistralJinja, "<s>", "</s>", false,
     "<s>[INST] U1 [/INST]A1</s>[INST] U2 [/INST]"},
    {ChatFamily::ChatML, kQwen2Jinja, "", "<|im_end|>", true,
     "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
     "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {ChatFamily::Gemma, kGemmaJinja, "<bos>", "<eos>", false,
     "<bos><start_of_turn>user\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n"
     "<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n"},
};

std::vector<ChatMessage> conversation(const Family &f, int upTo) {
  std::vector<ChatMessage> messages;
  if (f.system)
    messages.push_back({"system", "S"});
  const ChatMessage turns[] = {{"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}};
  for (int i = 0; i < upTo; ++i)
    messages.push_back(turns[i]);
  return messages;
}

TEST(ChatTemplateTest, TwoTurnsRenderAsTheJinjaTemplates) {
  for (const Family &f : kFamilies) {
    SCOPED_TRACE(ChatTemplate::name(f.family));
    ChatFamily recognised{};
    ASSERT_TRUE(ChatTemplate::recognise(f.jinja, recognised));
    EXPECT_EQ(recognised, f.family);
    const ChatTemplate chat(f.family, f.bos, f.eos, f.jinja);
    EXPECT_EQ(chat.render(conversation(f, 3), true), f.twoTurns);
  }
}

// Turn 2 feeds what render(turns 1..2) adds to render(turn 1) and the reply as generated, whether
// the reply ended with the end-of-turn token (then already in the cache) or was cut short.
TEST(ChatTemplateTest, TurnDeltaIsWhatAFullRenderAdds) {
  for (const Family &f : kFamilies) {
    SCOPED_TRACE(ChatTemplate::name(f.family));
    const ChatTemplate chat(f.family, f.bos, f.eos, f.jinja);
    const std::string system = f.system ? "S" : "";
    const std::string turn1 = chat.render(conversation(f, 1), true);
    const std::string turns2 = chat.render(conversation(f, 3), true);
    EXPECT_EQ(chat.turnDelta(true, system, "U1", false), turn1);
    // Llama 2 writes ' ' + reply: a SentencePiece model generates the reply's leading space.
    const std::string reply = f.family == ChatFamily::Llama2 ? " A1" : "A1";
    ASSERT_EQ(turns2.substr(0, turn1.size() + reply.size()), turn1 + reply);
    const std::string added = turns2.substr(turn1.size() + reply.size());
    EXPECT_EQ(chat.turnDelta(false, system, "U2", false), added);
    if (f.family != ChatFamily::Llama2) {
      ASSERT_EQ(added.substr(0, chat.endOfTurn().size()), chat.endOfTurn());
      EXPECT_EQ(chat.turnDelta(false, system, "U2", true), added.substr(chat.endOfTurn().size()));
    } else {
      EXPECT_EQ(chat.turnDelta(false, system, "U2", true), "<s>[INST] U2 [/INST]");
    }
  }
}

// The ranges renderWithRanges gives are each message's text (as the family writes it: trimmed or
// not), and everything else is the template's.
TEST(ChatTemplateTest, MessageRangesHoldTheMessagesText) {
  for (const Family &f : kFamilies) {
    SCOPED_TRACE(ChatTemplate::name(f.family));
    const ChatTemplate chat(f.family, f.bos, f.eos, f.jinja);
    const RenderedChat rendered = chat.renderWithRanges(conversation(f, 3), true);
    EXPECT_EQ(rendered.text, f.twoTurns);
    std::vector<std::string> texts;
    for (const TextRange &r : rendered.messageText) {
      ASSERT_LE(r.end, rendered.text.size());
      texts.push_back(rendered.text.substr(r.begin, r.end - r.begin));
    }
    std::vector<std::string> expected = {"U1", "A1", "U2"};
    if (f.system)
      expected.insert(expected.begin(), "S");
    EXPECT_EQ(texts, expected);
  }
  // Llama 2 trims the end of "<<SYS>>...<</SYS>>\n\n" + user: an empty user message takes the
  // "\n\n" with it, as the Jinja template's trim does.
  const ChatTemplate llama2(ChatFamily::Llama2, "<s>", "</s>");
  const RenderedChat empty = llama2.renderWithRanges({{"system", "S"}, {"user", " "}}, true);
  EXPECT_EQ(empty.text, "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
  ASSERT_EQ(empty.messageText.size(), 1u);
}

TEST(ChatTemplateTest, Llama3FirstTurnWithoutSystem) {
  const ChatTemplate chat(ChatFamily::Llama3, "<|begin_of_text|>", "<|end_of_text|>");
  EXPECT_EQ(chat.turnDelta(true, "", "  Hi \n", false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Qwen2's template writes its default system message when the conversation has none.
TEST(ChatTemplateTest, ChatMLDefaultSystemComesFromTheTemplate) {
  const ChatTemplate qwen2(ChatFamily::ChatML, "", "<|im_end|>", kQwen2Jinja);
  EXPECT_EQ(qwen2.render({{"user", "U1"}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate plain(ChatFamily::ChatML, "", "<|im_end|>");
  EXPECT_EQ(plain.render({{"user", "U1"}}, true),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n");
  // Qwen3's system literal is followed by an expression, not text: no default.
  const ChatTemplate qwen3(
      ChatFamily::ChatML, "", "<|im_end|>",
      "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}");
  EXPECT_EQ(qwen3.render({{"user", "U1"}}, true),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, NamesAndUnknownTemplates) {
  ChatFamily family{};
  for (const char *name : {"llama3", "llama2", "mistral", "chatml", "gemma"}) {
    ASSERT_TRUE(ChatTemplate::fromName(name, family));
    EXPECT_STREQ(ChatTemplate::name(family), name);
  }
  EXPECT_FALSE(ChatTemplate::fromName("zephyr", family));
  EXPECT_FALSE(ChatTemplate::recognise(
      "{% for message in messages %}{{ '<|user|>\\n' + message['content'] }}{% endfor %}", family));
  EXPECT_FALSE(ChatTemplate::recognise("", family));
}

} // namespace
} // namespace hetc
