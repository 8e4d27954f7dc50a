// The bodies of OpenAI's /v1/completions and /v1/chat/completions, read into what a served
// request needs. Every field is checked for its type and range against the plan; a request that
// fails gets one ApiError naming the field, which the server sends as OpenAI's error object.
//
// Taken: model, prompt (text, ids, or a list of either: one choice each), messages (content as a
// string or as text parts), max_tokens (max_completion_tokens), n, temperature, top_p, seed, stop,
// frequency_penalty, presence_penalty, logprobs (completions: 0..5 alternatives; chat: a flag with
// top_logprobs 0..20), stream, stream_options.include_usage, and the extensions top_k, min_p and
// repetition_penalty that vLLM and llama.cpp's server take. Fields that would change the answer in
// ways hetc does not do (echo, suffix, best_of > 1, logit_bias, tools, response_format) are
// refused, naming the field; other fields (user, metadata) are ignored.
#pragma once

#include "runtime/sampling/Sampler.h"
#include "runtime/tokenizer/ChatTemplate.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hetc::server {

struct ApiError {
  int status = 400;                      // HTTP status
  std::string message;                   // one line, naming the field and the limit
  std::string param;                     // the field, empty when none
  std::string type = "invalid_request_error";
  std::string code;                      // empty: null
  // {"error": {"message", "type", "param", "code"}}
  std::string json() const;
};

// `value` serialized for the wire. Invalid UTF-8 in its strings (a message quoting the bytes a
// client sent: a path, a body that is not JSON) becomes U+FFFD rather than an exception.
std::string toWire(const nlohmann::json &value);

enum class Endpoint : uint8_t { Completions, ChatCompletions };

// What a request asks for, once read.
struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts; // one per prompt (chat: the rendered conversation)
  uint32_t choicesPerPrompt = 1;             // n
  uint32_t maxTokens = 0;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings
  std::vector<int32_t> stopIds;   // EOS (and the chat template's end of turn)
  bool logprobs = false;          // each id's log-probability
  uint32_t topLogprobs = 0;       // alternatives per id
  bool stream = false;
  bool includeUsage = false;      // stream_options.include_usage
};

// What the server knows when it reads a request.
struct ServedModel {
  std::string name;                 // the model id /v1/models lists
  const PlanTokenizer *tokenizer;   // not null
  const ChatTemplate *chat;         // null: the plan's template is not known (chat is refused)
  std::string chatRefusal;          // why chat is refused when `chat` is null
  uint32_t vocab = 0;
  uint64_t maxSeq = 0;
  uint32_t maxChoices = 0;          // the most choices one request may ask for (the slots)
  // Whether a control token written in a message's text is that token (Hugging Face's default)
  // or text (ours: a user cannot close a turn or forge another role's).
  bool parseSpecialInMessages = false;
};

// Reads `body` for `endpoint`. Prompts are checked against the vocabulary and, with max_tokens,
// against max-seq; without max_tokens, completions take 16 (as OpenAI's default) and chat
// whatever fits.
std::variant<ParsedRequest, ApiError> parseRequest(Endpoint endpoint, const std::string &body,
                                                   const ServedModel &model);

} // namespace hetc::server
