#include "runtime/server/HttpServer.h"

#include "runtime/sampling/StopStrings.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <malloc.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace hetc::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// How long a connection waits for ids before it writes a keep-alive (and so learns whether its
// client is still there).
constexpr std::chrono::milliseconds kKeepAliveEvery = 1000ms;
std::atomic<uint64_t> nextResponseId{1};

std::string responseId(const char *prefix) {
  char text[48];
  std::snprintf(text, sizeof text, "%s%08llx%08llx", prefix,
                static_cast<unsigned long long>(std::time(nullptr)),
                static_cast<unsigned long long>(nextResponseId.fetch_add(1)));
  return text;
}

ApiError serverError(std::string message) {
  return ApiError{500, std::move(message), "", "server_error", ""};
}

void sendError(HttpResponse &res, const ApiError &error) {
  res.send(error.status, "application/json", error.json());
}

// A token's text as logprobs show it (invalid UTF-8 as U+FFFD) and its bytes.
std::string tokenText(const Tokenizer &tokenizer, int32_t id) {
  std::string text;
  appendValidUtf8(tokenizer.pieceBytes(id), text, false);
  return text;
}

json tokenBytes(const Tokenizer &tokenizer, int32_t id) {
  json bytes = json::array();
  for (unsigned char c : tokenizer.pieceBytes(id))
    bytes.push_back(static_cast<int>(c));
  return bytes;
}

// One choice of a response: a served request, its text as it is decoded and cut at stop strings.
struct Choice {
  std::shared_ptr<ServedRequest> request;
  DecodeStream decoder;
  StopStrings stops;
  size_t seen = 0;             // ids read from the request
  size_t used = 0;             // ids that made the text (those after a stop string do not)
  std::string text;            // decoded and not yet sent (all of it for a plain response)
  json logprobs = json::array(); // per id not yet sent: completions' or chat's entries
  size_t textOffset = 0;       // completions' text_offset of the next id
  bool stoppedByString = false;
  bool ended = false;          // its request ended and every id was taken
  bool started = false;        // chat stream: the role chunk was sent
  bool finishSent = false;
  std::string finishReason;
  std::string failure;
  int failureStatus = 0; // 500: generation failed; 503: the server stopped first

  Choice(std::shared_ptr<ServedRequest> r, const Tokenizer &tokenizer,
         std::vector<std::string> stopStrings)
      : request(std::move(r)), decoder(tokenizer), stops(std::move(stopStrings)) {}
};

// The exchange of one completion request, on its connection's thread.
class Exchange {
public:
  Exchange(const ParsedRequest &parsed, const ServedModel &model,
           std::vector<std::shared_ptr<ServedRequest>> requests)
      : parsed_(parsed), model_(model), tokenizer_(*model.tokenizer->tokenizer),
        id_(responseId(parsed.endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-")),
        created_(std::time(nullptr)) {
    for (auto &request : requests)
      choices_.emplace_back(std::move(request), tokenizer_, parsed.stop);
    for (const auto &prompt : parsed.prompts)
      promptTokens_ += prompt.size();
  }

  bool chat() const { return parsed_.endpoint == Endpoint::ChatCompletions; }
  // Whether a stream's last event ([DONE], or an error) is written.
  bool streamClosed() const { return doneSent_; }

  bool ended() const {
    for (const Choice &choice : choices_)
      if (!choice.ended)
        return false;
    return true;
  }

  // Takes the ids published since the last call, waiting up to `timeout` for some; false when
  // none came and nothing ended.
  bool advance(std::chrono::milliseconds timeout) {
    bool progressed = take();
    if (!progressed && !ended()) {
      for (Choice &choice : choices_)
        if (!choice.ended) {
          choice.request->wait(choice.seen, timeout);
          break;
        }
      progressed = take();
    }
    return progressed;
  }

  // Every request that has not ended ends now: the client left, or the server stops.
  void cancel() {
    for (Choice &choice : choices_)
      choice.request->cancel();
  }

  // The server-sent events for what advance() took: text, logprobs, and each choice's finish;
  // at the end the usage (when asked) and [DONE].
  std::string streamEvents() {
    std::string out;
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice &choice = choices_[i];
      if (!choice.failure.empty()) {
        // An error event ends the stream: no [DONE], which clients take for a complete answer.
        out += "data: " + serverError(choice.failure).json() + "\n\n";
        choice.failure.clear();
        failed_ = true;
        continue;
      }
      const bool finishing = choice.ended && !choice.finishSent;
      if (chat() && !choice.started) {
        json delta = {{"role", "assistant"}, {"content", ""}};
        out += event(chunk(i, delta, json(), json()));
        choice.started = true;
      }
      if (choice.text.empty() && choice.logprobs.empty() && !finishing)
        continue;
      json content = !chat()                              ? json(choice.text)
                     : choice.text.empty() && finishing ? json::object()
                                                        : json{{"content", choice.text}};
      out += event(chunk(i, std::move(content), logprobsJson(choice),
                         finishing ? json(choice.finishReason) : json()));
      choice.text.clear();
      choice.logprobs = json::array();
      choice.finishSent = choice.finishSent || finishing;
    }
    if (ended() && !doneSent_ && failed_) {
      doneSent_ = true; // the stream ends after the error
    } else if (ended() && !doneSent_) {
      if (parsed_.includeUsage) {
        json last = base(true);
        last["choices"] = json::array();
        last["usage"] = usage();
        out += event(last);
      }
      out += "data: [DONE]\n\n";
      doneSent_ = true;
    }
    return out;
  }

  // A plain response's status, once ended(): 200, or the failure's.
  int status() const {
    for (const Choice &choice : choices_)
      if (!choice.failure.empty())
        return choice.failureStatus;
    return 200;
  }

  // The whole response, once ended(): a completion, or the error of a failed choice.
  std::string body() const {
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice &choice = choices_[i];
      if (!choice.failure.empty())
        return ApiError{choice.failureStatus, choice.failure, "", "server_error", ""}.json();
      json entry = {{"index", i}, {"logprobs", logprobsJson(choice)},
                    {"finish_reason", choice.finishReason}};
      if (chat())
        entry["message"] = {{"role", "assistant"}, {"content", choice.text}};
      else
        entry["text"] = choice.text;
      choices.push_back(entry);
    }
    json response = base(false);
    response["choices"] = choices;
    response["usage"] = usage();
    return toWire(response);
  }

private:
  bool take() {
    bool progressed = false;
    for (Choice &choice : choices_) {
      if (choice.ended)
        continue;
      // The end first: the count read after it is final when the request has ended.
      const ServedRequest::End end = choice.request->end();
      const size_t count = choice.request->wait(choice.seen, 0ms);
      for (; choice.seen < count; ++choice.seen)
        takeId(choice, choice.seen);
      progressed = progressed || count > 0;
      if (end != ServedRequest::End::Running) {
        finish(choice, end);
        progressed = true;
      }
    }
    generated_ = 0;
    for (const Choice &choice : choices_)
      generated_ += choice.used;
    return progressed;
  }

  void takeId(Choice &choice, size_t k) {
    if (choice.stoppedByString)
      return; // ids the loop made before it saw the stop
    ++choice.used;
    const int32_t id = choice.request->id(k);
    piece_.clear();
    choice.decoder.push(id, piece_);
    const size_t before = choice.text.size();
    if (choice.stops.push(piece_, choice.text)) {
      choice.stoppedByString = true;
      choice.request->stop();
    }
    if (choice.request->logprobs())
      choice.logprobs.push_back(logprobEntry(choice, k, id));
    choice.textOffset += choice.text.size() - before;
  }

  void finish(Choice &choice, ServedRequest::End end) {
    if (!choice.stoppedByString) {
      piece_.clear();
      choice.decoder.finish(piece_);
      if (choice.stops.push(piece_, choice.text))
        choice.stoppedByString = true;
      else
        choice.stops.finish(choice.text);
    }
    choice.ended = true;
    if (choice.stoppedByString || end == ServedRequest::End::StopId)
      choice.finishReason = "stop";
    else if (end == ServedRequest::End::Length)
      choice.finishReason = "length";
    else if (end == ServedRequest::End::Failed)
      fail(choice, 500, "generation failed: " + choice.request->failure());
    else // cancelled: the server stops (a client that left reads nothing)
      fail(choice, 503, "the server stopped before this request finished");
  }

  static void fail(Choice &choice, int status, std::string message) {
    choice.failure = std::move(message);
    choice.failureStatus = status;
  }

  json logprobEntry(const Choice &choice, size_t k, int32_t id) {
    const ServedRequest &request = *choice.request;
    if (chat()) {
      json top = json::array();
      for (uint32_t j = 0; j < request.topLogprobs(); ++j) {
        const TokenLogprob &alternative = request.alternatives(k)[j];
        top.push_back({{"token", tokenText(tokenizer_, alternative.id)},
                       {"logprob", alternative.logprob},
                       {"bytes", tokenBytes(tokenizer_, alternative.id)}});
      }
      return {{"token", tokenText(tokenizer_, id)},
              {"logprob", request.logprob(k)},
              {"bytes", tokenBytes(tokenizer_, id)},
              {"top_logprobs", top}};
    }
    json top = json::object();
    for (uint32_t j = 0; j < request.topLogprobs(); ++j) {
      const TokenLogprob &alternative = request.alternatives(k)[j];
      top[tokenText(tokenizer_, alternative.id)] = alternative.logprob;
    }
    return {{"token", tokenText(tokenizer_, id)},
            {"logprob", request.logprob(k)},
            {"top", top},
            {"offset", choice.textOffset}};
  }

  // The entries not yet sent, in the endpoint's form; null when logprobs were not asked for.
  json logprobsJson(const Choice &choice) const {
    if (!choice.request->logprobs())
      return json();
    if (chat())
      return {{"content", choice.logprobs}};
    json tokens = json::array(), logprobs = json::array(), top = json::array(),
         offsets = json::array();
    for (const json &entry : choice.logprobs) {
      tokens.push_back(entry["token"]);
      logprobs.push_back(entry["logprob"]);
      top.push_back(entry["top"]);
      offsets.push_back(entry["offset"]);
    }
    return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", top},
            {"text_offset", offsets}};
  }

  // The fields every response and stream chunk starts with.
  json base(bool isChunk) const {
    return {{"id", id_},
            {"object", chat() ? (isChunk ? "chat.completion.chunk" : "chat.completion")
                              : "text_completion"},
            {"created", created_},
            {"model", model_.name}};
  }

  json chunk(size_t index, json content, json logprobs, json finishReason) const {
    json response = base(true);
    json entry = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", finishReason}};
    entry[chat() ? "delta" : "text"] = std::move(content);
    response["choices"] = json::array({entry});
    if (parsed_.includeUsage)
      response["usage"] = json();
    return response;
  }

  static std::string event(const json &data) { return "data: " + toWire(data) + "\n\n"; }

  json usage() const {
    return {{"prompt_tokens", promptTokens_},
            {"completion_tokens", generated_},
            {"total_tokens", promptTokens_ + generated_}};
  }

  const ParsedRequest &parsed_;
  const ServedModel &model_;
  const Tokenizer &tokenizer_;
  std::string id_;
  std::time_t created_;
  std::vector<Choice> choices_;
  size_t promptTokens_ = 0;
  size_t generated_ = 0;
  bool doneSent_ = false; // the stream's last event is written ([DONE], or an error)
  bool failed_ = false;   // an error event was written
  std::string piece_;
};

} // namespace

HttpServer::HttpServer(Engine &engine, const PlanTokenizer &tokenizer, ServerOptions options,
                       const std::string &planName)
    : engine_(engine), tokenizer_(tokenizer), options_(std::move(options)),
      batch_(engine, options_.maxQueue.value_or(4 * size_t{engine.maxBatch()})),
      listener_(
          [this] {
            ListenerOptions listen;
            listen.host = options_.host;
            listen.port = options_.port;
            listen.limits.maxBodyBytes = options_.maxBodyBytes;
            listen.readTimeout = options_.readTimeout;
            listen.tlsCertificate = options_.tlsCertificate;
            listen.tlsKey = options_.tlsKey;
            // A worker for every slot and queue place (each holds one for its whole answer),
            // and a few for health, metrics and refusals.
            listen.workers = batch_.slots() + batch_.maxQueue() + 4;
            return listen;
          }(),
          [this](const HttpRequest &request, HttpResponse &response) {
            handle(request, response);
          },
          [](int status, const std::string &message) {
            ApiError error{status, message, "", status >= 500 ? "server_error"
                                                              : "invalid_request_error", ""};
            return error.json();
          }) {
  model_.name = options_.modelName;
  model_.parseSpecialInMessages = options_.parseSpecialInMessages;
  model_.tokenizer = &tokenizer_;
  model_.vocab = engine.vocab();
  model_.maxSeq = engine.maxSeq();
  model_.maxChoices = engine.maxBatch();
  Result<ChatTemplate> chat = chatTemplateFor(tokenizer_, options_.templateName, planName);
  if (chat) {
    chat_.emplace(std::move(*chat));
    model_.chat = &*chat_;
  } else {
    model_.chat = nullptr;
    model_.chatRefusal = "chat completions are not served: " + chat.message() +
                         " when starting hetc serve";
  }
}

HttpServer::~HttpServer() {
  stop();
  if (loop_.joinable())
    loop_.join();
}

void HttpServer::handle(const HttpRequest &request, HttpResponse &response) {
  const std::string requestId = responseId("req_");
  response.setHeader("X-Request-Id", requestId);
  try {
    route(request, response, requestId);
  } catch (const std::exception &e) {
    if (!response.started())
      sendError(response, serverError("internal error (request " + requestId + "): " + e.what()));
  }
}

void HttpServer::route(const HttpRequest &req, HttpResponse &res, const std::string &requestId) {
  // The API key, when the server has keys, on every route but /health (a load balancer's probe).
  if (!options_.apiKeys.empty() && req.path != "/health") {
    const std::string *header = req.header("authorization");
    if (!header || !authorized(*header)) {
      res.setHeader("WWW-Authenticate", "Bearer");
      return sendError(res, ApiError{401,
                                     "missing or invalid API key: send 'Authorization: Bearer "
                                     "KEY' with a key the server was started with",
                                     "", "invalid_request_error", "invalid_api_key"});
    }
  }
  const bool get = req.method == "GET", post = req.method == "POST";
  if (req.path == "/health" && get) {
    const ServingMetrics &metrics = batch_.metrics();
    json health = {{"status", "ok"},
                   {"model", model_.name},
                   {"slots", batch_.slots()},
                   {"active_slots", metrics.activeSlots.load()},
                   {"queue_depth", metrics.queueDepth.load()},
                   {"queue_capacity", batch_.maxQueue()}};
    return (void)res.send(200, "application/json", toWire(health));
  }
  if (req.path == "/metrics" && get) {
    const ListenerCounters &connections = listener_.counters();
    std::string text = batch_.metrics().prometheus(batch_.slots(), batch_.maxQueue());
    text += "# HELP hetc_http_connections_receiving Connections sending a request or idle.\n"
            "# TYPE hetc_http_connections_receiving gauge\n"
            "hetc_http_connections_receiving " +
            std::to_string(connections.receiving.load()) +
            "\n# HELP hetc_http_connections_dropped_total Connections dropped before their "
            "request came: at the read deadline, or for newer ones past the bound.\n"
            "# TYPE hetc_http_connections_dropped_total counter\n"
            "hetc_http_connections_dropped_total{reason=\"timeout\"} " +
            std::to_string(connections.timedOut.load()) +
            "\nhetc_http_connections_dropped_total{reason=\"evicted\"} " +
            std::to_string(connections.evicted.load()) +
            "\n# HELP hetc_http_requests_malformed_total Requests the HTTP parser refused.\n"
            "# TYPE hetc_http_requests_malformed_total counter\n"
            "hetc_http_requests_malformed_total " +
            std::to_string(connections.malformed.load()) + "\n";
    return (void)res.send(200, "text/plain; version=0.0.4", text);
  }
  if (req.path == "/v1/models" && get) {
    json model = {{"id", model_.name},
                  {"object", "model"},
                  {"created", 0},
                  {"owned_by", "hetc"},
                  {"max_model_len", model_.maxSeq}};
    return (void)res.send(200, "application/json",
                          toWire(json{{"object", "list"}, {"data", json::array({model})}}));
  }
  const bool completions = req.path == "/v1/completions";
  if ((completions || req.path == "/v1/chat/completions") && post) {
    // A large body's text, JSON and ids are freed when this returns: give the pages back (one
    // malloc arena keeps them otherwise, docs/serving.md), for bodies over 1 MiB only.
    struct TrimAfter {
      bool large;
      ~TrimAfter() {
        if (large)
          malloc_trim(0);
      }
    } trim{req.body.size() > (size_t{1} << 20)};
    return complete(completions ? Endpoint::Completions : Endpoint::ChatCompletions, req.body,
                    res);
  }
  static const char *const kRoutes[][2] = {{"/health", "GET"},
                                           {"/metrics", "GET"},
                                           {"/v1/models", "GET"},
                                           {"/v1/completions", "POST"},
                                           {"/v1/chat/completions", "POST"}};
  for (const auto &[path, method] : kRoutes)
    if (req.path == path) {
      res.setHeader("Allow", method);
      return sendError(res, ApiError{405, req.method + " " + req.path + ": only " + method +
                                              " is served here",
                                     "", "invalid_request_error", "method_not_allowed"});
    }
  (void)requestId;
  sendError(res, ApiError{404, "no route " + req.method + " " + req.path, "",
                          "invalid_request_error", "not_found"});
}

void HttpServer::complete(Endpoint endpoint, const std::string &body, HttpResponse &res) {
  ParsedRequest parsed;
  {
    std::variant<ParsedRequest, ApiError> result = parseRequest(endpoint, body, model_);
    if (auto *error = std::get_if<ApiError>(&result))
      return sendError(res, *error);
    parsed = std::move(std::get<ParsedRequest>(result));
  }
  // One served request per prompt and choice; choices of one prompt draw from seeds seed,
  // seed + 1, ... so they differ.
  std::vector<std::shared_ptr<ServedRequest>> requests;
  for (const std::vector<int32_t> &prompt : parsed.prompts)
    for (uint32_t c = 0; c < parsed.choicesPerPrompt; ++c) {
      GenerationRequest generation;
      generation.prompt = prompt;
      generation.maxNew = parsed.maxTokens;
      generation.stopIds = parsed.stopIds;
      generation.sampling = parsed.sampling;
      generation.sampling.seed += c;
      if (Status s = batch_.check(generation); !s)
        return sendError(res, ApiError{400, s.message(), "", "invalid_request_error", ""});
      requests.push_back(std::make_shared<ServedRequest>(std::move(generation), parsed.logprobs,
                                                         parsed.topLogprobs));
    }
  for (const auto &request : requests) {
    const ContinuousBatch::Admission admission = batch_.submit(request);
    if (admission == ContinuousBatch::Admission::Queued)
      continue;
    for (const auto &queued : requests)
      queued->cancel();
    ApiError error;
    if (admission == ContinuousBatch::Admission::QueueFull) {
      error.status = 429;
      error.type = "server_busy";
      error.code = "rate_limit_exceeded";
      error.message = "every slot (" + std::to_string(batch_.slots()) + ") and queue place (" +
                      std::to_string(batch_.maxQueue()) + ") is taken; retry later";
      res.setHeader("Retry-After", std::to_string(batch_.retryAfterSeconds()));
    } else {
      error.status = 503;
      error.type = "server_error";
      error.message = "the server is stopping";
    }
    return sendError(res, error);
  }
  Exchange exchange(parsed, model_, std::move(requests));
  // Whatever ends the answer (its end, the client leaving, an exception), what has not ended is
  // cancelled and stop() stops waiting for it.
  openExchanges_.fetch_add(1);
  struct Release {
    Exchange &exchange;
    std::atomic<int> &open;
    ~Release() {
      exchange.cancel();
      open.fetch_sub(1);
    }
  } release{exchange, openExchanges_};

  if (!parsed.stream) {
    // Nothing is written before the end, so the status says how it ended; the client leaving is
    // seen on its socket, after every step or kKeepAliveEvery.
    while (!exchange.ended()) {
      exchange.advance(kKeepAliveEvery);
      if (res.clientGone())
        return;
    }
    res.send(exchange.status(), "application/json", exchange.body());
    return;
  }
  // A stream writes after every step and, while it waits, a comment: a client that left fails a
  // write.
  res.setHeader("Cache-Control", "no-cache");
  if (!res.start(200, "text/event-stream"))
    return;
  for (;;) {
    const bool progressed = exchange.advance(kKeepAliveEvery);
    std::string out = exchange.streamEvents();
    if (out.empty() && !progressed)
      out = ": waiting\n\n";
    if (!out.empty() && !res.write(out))
      return;
    if (exchange.ended() && exchange.streamClosed())
      break;
    if (res.clientGone())
      return;
  }
  res.finish();
}

Result<int> HttpServer::bind() { return listener_.bind(); }

Status HttpServer::serve() {
  loop_ = std::thread([this] { batch_.run(); });
  const Status served = listener_.run();
  batch_.stop();
  loop_.join();
  return served;
}

void HttpServer::stop() {
  batch_.refuseNew();
  awaitExchanges(options_.drainTimeout);
  batch_.stop();
  // The requests cut short write their error (each worker wakes within kKeepAliveEvery).
  awaitExchanges(2 * kKeepAliveEvery + 500ms);
  listener_.stop();
}

bool HttpServer::authorized(const std::string &header) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.compare(0, kBearer.size(), kBearer) != 0)
    return false;
  const std::string_view given = std::string_view(header).substr(kBearer.size());
  bool match = false;
  for (const std::string &key : options_.apiKeys) {
    // Every byte compared, whatever differs first: the time says nothing about the key.
    unsigned char differ = given.size() != key.size();
    for (size_t i = 0; i < key.size(); ++i)
      differ |= static_cast<unsigned char>(key[i]) ^
                static_cast<unsigned char>(i < given.size() ? given[i] : 0);
    match = match || differ == 0;
  }
  return match;
}

void HttpServer::awaitExchanges(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (openExchanges_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
}

} // namespace hetc::server
