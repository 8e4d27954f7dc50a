#include "runtime/server/OpenAiRequest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace hetc::server {
namespace {

using nlohmann::json;

std::string typeName(const json &value) {
  switch (value.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "an integer";
  case json::value_t::number_float:
    return "a number";
  case json::value_t::string:
    return "a string";
  case json::value_t::array:
    return "an array";
  case json::value_t::object:
    return "an object";
  default:
    return "a value";
  }
}

ApiError invalid(const std::string &param, const std::string &message) {
  ApiError error;
  error.param = param;
  error.message = param.empty() ? message : param + ": " + message;
  return error;
}

ApiError wrongType(const std::string &param, const char *expected, const json &value) {
  return invalid(param, std::string("expected ") + expected + ", got " + typeName(value));
}

// Reads the request's fields one at a time; the first failure is kept and the rest is skipped.
class Fields {
public:
  explicit Fields(const json &body) : body_(body) {}
  bool failed() const { return error_.has_value(); }
  ApiError error() const { return *error_; }
  void fail(ApiError error) {
    if (!error_)
      error_ = std::move(error);
  }

  // A field that is absent or null is left as it is.
  const json *get(const char *name) const {
    auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }

  void number(const char *name, double low, double high, float &out) {
    const json *value = get(name);
    if (!value || failed())
      return;
    if (!value->is_number())
      return fail(wrongType(name, "a number", *value));
    const double v = value->get<double>();
    if (!(v >= low && v <= high))
      return fail(invalid(name, "must be in [" + shortNumber(low) + ", " + shortNumber(high) +
                                    "], got " + shortNumber(v)));
    out = static_cast<float>(v);
  }

  template <typename T> bool integer(const char *name, int64_t low, int64_t high, T &out) {
    const json *value = get(name);
    if (!value || failed())
      return false;
    if (!value->is_number_integer())
      return fail(wrongType(name, "an integer", *value)), false;
    const int64_t v = value->is_number_unsigned()
                          ? static_cast<int64_t>(std::min<uint64_t>(value->get<uint64_t>(),
                                                                    INT64_MAX))
                          : value->get<int64_t>();
    if (v < low || v > high)
      return fail(invalid(name, "must be in [" + std::to_string(low) + ", " +
                                    std::to_string(high) + "], got " + std::to_string(v))),
             false;
    out = static_cast<T>(v);
    return true;
  }

  void boolean(const char *name, bool &out) {
    const json *value = get(name);
    if (!value || failed())
      return;
    if (!value->is_boolean())
      return fail(wrongType(name, "a boolean", *value));
    out = value->get<bool>();
  }

  static std::string shortNumber(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
  }

private:
  const json &body_;
  std::optional<ApiError> error_;
};

bool isIdArray(const json &value) {
  return value.is_array() && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const json &v) { return v.is_number_integer(); });
}

// A prompt whose tokenization stopped past the context: how long it is was never computed.
ApiError tooLong(const std::string &param, const ServedModel &model) {
  return invalid(param, "the prompt is longer than the model's context of " +
                             std::to_string(model.maxSeq) +
                             " tokens (--max-seq): tokenizing it stopped there");
}

// One prompt: text (encoded with the tokenizer's special tokens, as Hugging Face's pipelines do)
// or ids. Text is tokenized no further than the context.
std::optional<ApiError> readPrompt(const json &value, const std::string &param,
                                   const ServedModel &model, std::vector<int32_t> &ids) {
  if (value.is_string()) {
    Result<std::vector<int32_t>> encoded =
        model.tokenizer->tokenizer->encode(value.get_ref<const std::string &>(), true, {},
                                           model.maxSeq);
    if (!encoded)
      return invalid(param, encoded.message());
    if (encoded->size() > model.maxSeq)
      return tooLong(param, model);
    ids = std::move(*encoded);
  } else if (isIdArray(value)) {
    for (size_t i = 0; i < value.size(); ++i) {
      const int64_t id = value[i].get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(model.vocab))
        return invalid(param + "[" + std::to_string(i) + "]",
                       "token id " + std::to_string(id) + " is outside the vocabulary of " +
                           std::to_string(model.vocab) + " ids");
      ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    return wrongType(param, "a string or an array of token ids", value);
  }
  if (ids.empty())
    return invalid(param, "is empty");
  return std::nullopt;
}

std::optional<ApiError> readPrompts(const json *value, const ServedModel &model,
                                    std::vector<std::vector<int32_t>> &prompts) {
  if (!value)
    return invalid("prompt", "is required");
  // A list of prompts: strings or id arrays (an array of integers is one prompt).
  if (value->is_array() && !value->empty() && !isIdArray(*value)) {
    for (size_t i = 0; i < value->size(); ++i) {
      prompts.emplace_back();
      if (auto error =
              readPrompt((*value)[i], "prompt[" + std::to_string(i) + "]", model, prompts.back()))
        return error;
    }
    return std::nullopt;
  }
  prompts.emplace_back();
  return readPrompt(*value, "prompt", model, prompts.back());
}

// OpenAI's message content: a string, or an array of parts of which only text is taken.
std::optional<ApiError> readContent(const json &message, const std::string &param,
                                    std::string &content) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null())
    return invalid(param + ".content", "is required");
  if (it->is_string()) {
    content = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array())
    return wrongType(param + ".content", "a string or an array of content parts", *it);
  for (size_t i = 0; i < it->size(); ++i) {
    const json &part = (*it)[i];
    const std::string partName = param + ".content[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string())
      return invalid(partName, "only text parts ({\"type\": \"text\", \"text\": ...}) are taken");
    content += part["text"].get<std::string>();
  }
  return std::nullopt;
}

// The conversation rendered by the plan's chat template, with the assistant's header after it.
std::optional<ApiError> readMessages(const json *value, const ServedModel &model,
                                     std::vector<int32_t> &ids) {
  if (!value)
    return invalid("messages", "is required");
  if (!value->is_array())
    return wrongType("messages", "an array", *value);
  if (value->empty())
    return invalid("messages", "is empty");
  if (!model.chat)
    return invalid("messages", model.chatRefusal);
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < value->size(); ++i) {
    const json &message = (*value)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!message.is_object())
      return wrongType(param, "an object", message);
    auto role = message.find("role");
    if (role == message.end() || !role->is_string())
      return invalid(param + ".role", "expected a string: system, user or assistant");
    std::string name = role->get<std::string>();
    if (name == "developer") // OpenAI's newer name for the system message
      name = "system";
    if (name != "system" && name != "user" && name != "assistant")
      return invalid(param + ".role", "'" + name + "' is not system, user or assistant");
    // The templates take one optional system message first, then user and assistant in turns,
    // ending with the user's.
    const bool expectUser = messages.empty() || messages.back().role != "user";
    if (name == "system") {
      if (i != 0)
        return invalid(param + ".role", "a system message may only come first");
      if (!model.chat->supportsSystem())
        return invalid(param + ".role", std::string("the model's chat template (") +
                                            ChatTemplate::name(model.chat->family()) +
                                            ") has no system message");
    } else if ((name == "user") != expectUser) {
      return invalid(param + ".role", "expected " + std::string(expectUser ? "user" : "assistant") +
                                          ": after an optional system message, user and "
                                          "assistant messages alternate, starting with user");
    }
    ChatMessage read;
    read.role = name;
    if (auto error = readContent(message, param, read.content))
      return error;
    messages.push_back(std::move(read));
  }
  if (messages.back().role != "user")
    return invalid("messages", "the last message must be the user's");
  // Special tokens in the rendering (BOS, headers) are written as text: matched as tokens, with
  // nothing added around them; inside the messages' own text only with parseSpecialInMessages.
  const RenderedChat rendered = model.chat->renderWithRanges(messages, true);
  Result<std::vector<int32_t>> encoded = model.tokenizer->tokenizer->encode(
      rendered.text, false,
      model.parseSpecialInMessages ? std::vector<TextRange>{} : rendered.messageText,
      model.maxSeq);
  if (!encoded)
    return invalid("messages", encoded.message());
  if (encoded->size() > model.maxSeq)
    return tooLong("messages", model);
  ids = std::move(*encoded);
  return std::nullopt;
}

std::optional<ApiError> readStop(const json *value, std::vector<std::string> &stop) {
  constexpr size_t kMaxStops = 16;
  if (!value)
    return std::nullopt;
  if (value->is_string()) {
    stop.push_back(value->get<std::string>());
  } else if (value->is_array()) {
    if (value->size() > kMaxStops)
      return invalid("stop", "at most " + std::to_string(kMaxStops) + " stop strings, got " +
                                 std::to_string(value->size()));
    for (size_t i = 0; i < value->size(); ++i) {
      if (!(*value)[i].is_string())
        return wrongType("stop[" + std::to_string(i) + "]", "a string", (*value)[i]);
      stop.push_back((*value)[i].get<std::string>());
    }
  } else {
    return wrongType("stop", "a string or an array of strings", *value);
  }
  return std::nullopt;
}

} // namespace

std::string toWire(const nlohmann::json &value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ApiError::json() const {
  nlohmann::json error = {{"message", message},
                          {"type", type},
                          {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                          {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  return toWire(nlohmann::json{{"error", error}});
}

// Where in a body JSON's parser failed: the field whose value it was reading ("prompt",
// "messages[1].content"), so that a refusal names it as any other bad field is named.
class FieldAtError : public nlohmann::json_sax<json> {
public:
  std::string path() const {
    std::string out;
    for (const Frame &frame : frames_) {
      if (frame.array)
        out += "[" + std::to_string(frame.index) + "]";
      else if (frame.inValue)
        out += (out.empty() ? "" : ".") + frame.key;
    }
    return out;
  }
  const std::string &message() const { return message_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t &) override { return value(); }
  bool string(string_t &) override { return value(); }
  bool binary(binary_t &) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t &name) override {
    frames_.back().key = name;
    frames_.back().inValue = true;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &e) override {
    message_ = e.what();
    return false;
  }

private:
  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    bool inValue = false; // a key was read and its value is being read
  };
  // A value is complete: the next one in its array, or its object's next key.
  bool value() {
    if (!frames_.empty()) {
      Frame &frame = frames_.back();
      if (frame.array)
        ++frame.index;
      else
        frame.inValue = false;
    }
    return true;
  }
  bool open(bool array) {
    frames_.push_back(Frame{array, 0, "", false});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  std::vector<Frame> frames_;
  std::string message_;
};

std::variant<ParsedRequest, ApiError> parseRequest(Endpoint endpoint, const std::string &text,
                                                   const ServedModel &model) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    // A parse error, or a number past double's range (1e400): read again to find the field.
    FieldAtError where;
    json::sax_parse(text, &where);
    return invalid(where.path(), "the body is not valid JSON: " + where.message());
  }
  if (!body.is_object())
    return invalid("", "the body must be a JSON object, got " + typeName(body));

  ParsedRequest request;
  request.endpoint = endpoint;
  Fields fields(body);
  const bool chat = endpoint == Endpoint::ChatCompletions;

  if (const json *name = fields.get("model")) {
    if (!name->is_string())
      return wrongType("model", "a string", *name);
    if (name->get<std::string>() != model.name) {
      ApiError error = invalid("model", "the model '" + name->get<std::string>() +
                                            "' does not exist; this server serves '" +
                                            model.name + "'");
      error.status = 404;
      error.code = "model_not_found";
      return error;
    }
  }
  // Fields that would change the answer in ways hetc does not do.
  for (const char *name : {"suffix", "tools", "functions", "tool_choice", "response_format"})
    if (fields.get(name))
      return invalid(name, "is not supported by this server");
  if (const json *echo = fields.get("echo"); echo && *echo != false)
    return invalid("echo", "is not supported by this server");
  if (const json *bias = fields.get("logit_bias"); bias && !(bias->is_object() && bias->empty()))
    return invalid("logit_bias", "is not supported by this server");
  uint32_t bestOf = 1;
  fields.integer("best_of", 1, 1, bestOf);

  if (chat) {
    request.prompts.emplace_back();
    if (auto error = readMessages(fields.get("messages"), model, request.prompts.back()))
      return *error;
  } else if (auto error = readPrompts(fields.get("prompt"), model, request.prompts)) {
    return *error;
  }

  fields.integer("n", 1, model.maxChoices, request.choicesPerPrompt);
  if (!fields.failed() &&
      request.prompts.size() * request.choicesPerPrompt > model.maxChoices)
    return invalid(request.prompts.size() > 1 ? "prompt" : "n",
                   std::to_string(request.prompts.size()) + " prompts x n " +
                       std::to_string(request.choicesPerPrompt) + " choices exceed the " +
                       std::to_string(model.maxChoices) + " the server runs at once");

  size_t longest = 0;
  for (const std::vector<int32_t> &prompt : request.prompts)
    longest = std::max(longest, prompt.size());
  const uint64_t fits = longest < model.maxSeq ? model.maxSeq - longest : 0;
  const char *promptField = chat ? "messages" : "prompt";
  if (fits == 0)
    return invalid(promptField, "the prompt is " + std::to_string(longest) +
                                    " tokens but the model's context is " +
                                    std::to_string(model.maxSeq) +
                                    " (--max-seq), leaving no room to generate");
  const char *maxTokensField =
      chat && fields.get("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  bool given = fields.integer(maxTokensField, 1, INT32_MAX, request.maxTokens);
  if (!fields.failed() && given && request.maxTokens > fits)
    return invalid(maxTokensField, "the prompt is " + std::to_string(longest) + " tokens and " +
                                       maxTokensField + " " + std::to_string(request.maxTokens) +
                                       " more exceed the model's context of " +
                                       std::to_string(model.maxSeq) + " tokens (--max-seq)");
  if (!given)
    request.maxTokens = static_cast<uint32_t>(chat ? fits : std::min<uint64_t>(16, fits));

  SamplingParams &sampling = request.sampling;
  sampling.temperature = 1.0f; // OpenAI's default; 0 is greedy
  fields.number("temperature", 0.0, 2.0, sampling.temperature);
  fields.number("top_p", 0.0, 1.0, sampling.topP);
  if (!fields.failed() && sampling.topP == 0.0f)
    return invalid("top_p", "must be above 0");
  fields.integer("top_k", 0, INT32_MAX, sampling.topK);
  fields.number("min_p", 0.0, 1.0, sampling.minP);
  fields.number("frequency_penalty", -2.0, 2.0, sampling.frequencyPenalty);
  fields.number("presence_penalty", -2.0, 2.0, sampling.presencePenalty);
  fields.number("repetition_penalty", 0.01, 100.0, sampling.repetitionPenalty);
  fields.integer("seed", INT64_MIN, INT64_MAX, sampling.seed);

  if (chat) {
    fields.boolean("logprobs", request.logprobs);
    if (fields.integer("top_logprobs", 0, 20, request.topLogprobs) && !request.logprobs)
      return invalid("top_logprobs", "needs logprobs: true");
  } else if (fields.integer("logprobs", 0, 5, request.topLogprobs)) {
    request.logprobs = true;
  }
  fields.boolean("stream", request.stream);
  if (const json *options = fields.get("stream_options")) {
    if (!options->is_object())
      return wrongType("stream_options", "an object", *options);
    if (!request.stream)
      return invalid("stream_options", "is only allowed with stream: true");
    Fields inner(*options);
    inner.boolean("include_usage", request.includeUsage);
    if (inner.failed()) {
      ApiError error = inner.error();
      error.param = "stream_options." + error.param;
      error.message = "stream_options." + error.message;
      return error;
    }
  }
  if (fields.failed())
    return fields.error();
  if (auto error = readStop(fields.get("stop"), request.stop))
    return *error;

  request.stopIds = model.tokenizer->eosIds;
  if (chat)
    request.stopIds = replyStopIds(*model.tokenizer, *model.chat);
  return request;
}

} // namespace hetc::server
