// `hetc serve`: OpenAI-compatible HTTP over one plan.
//
//   POST /v1/completions, POST /v1/chat/completions   (stream: true as server-sent events)
//   GET  /v1/models, GET /health, GET /metrics (Prometheus text)
//
// Connections are HttpListener's (one thread reads every request, with deadlines; workers answer
// whole requests). Each completion request becomes one ServedRequest per choice in the
// ContinuousBatch, whose loop runs on a thread of its own. The worker turns the ids into text as
// they come (DecodeStream, then the request's stop strings) and writes them. While a request
// waits, a stream carries SSE comments; a plain request watches its socket for the client's close.
// Either way a client that left is noticed within a step or a second and its slots are freed.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Status.h"
#include "runtime/server/HttpListener.h"
#include "runtime/server/OpenAiRequest.h"
#include "runtime/serving/ContinuousBatch.h"
#include "runtime/tokenizer/ChatTemplate.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace hetc::server {

struct ServerOptions {
  std::string host = "127.0.0.1"; // loopback unless asked
  int port = 8080;                // 0: any free port
  std::optional<size_t> maxQueue; // requests that may wait for a slot; unset: 4 per slot
  std::string modelName;          // the id /v1/models lists and requests name
  std::string templateName;       // a built-in chat template; empty: recognised from the plan
  size_t maxBodyBytes = 8u << 20; // larger request bodies get 413
  // A request must arrive within this of its start (408 otherwise; HttpListener).
  std::chrono::milliseconds readTimeout{10000};
  // TLS when both are set: PEM certificate (with its chain) and key.
  std::string tlsCertificate;
  std::string tlsKey;
  // Whether a control token typed in a chat message is read as that token (--parse-special-in-
  // messages); by default it is text.
  bool parseSpecialInMessages = false;
  // Accepted API keys: every route but /health then needs `Authorization: Bearer KEY` with one
  // of them (401 otherwise). Empty: no authentication.
  std::vector<std::string> apiKeys;
  // On stop(), how long running and queued requests may go on before they end with an error.
  std::chrono::milliseconds drainTimeout{30000};
};

class HttpServer {
public:
  // The engine and tokenizer must outlive the server. A plan whose chat template is not known
  // still serves completions; chat requests then get 400 naming --template (`chatNote` says so).
  HttpServer(Engine &engine, const PlanTokenizer &tokenizer, ServerOptions options,
             const std::string &planName);
  ~HttpServer();

  // Binds the socket; returns the port (the one chosen when options.port is 0).
  Result<int> bind();
  // Serves until stop(): the batch loop on its own thread, requests on a pool of workers sized
  // for every slot and queue place and a few more.
  Status serve();
  // Any thread. Graceful: new requests get 503 at once; running and queued ones have
  // options.drainTimeout to finish, then end with an error (an error event for a stream, an
  // error object for a plain request, never a finish reason); the listener closes once every
  // response is written.
  void stop();

  // Why chat completions are refused (empty when they are served).
  const std::string &chatNote() const { return model_.chatRefusal; }
  const ServedModel &model() const { return model_; }
  size_t maxQueue() const { return batch_.maxQueue(); }
  bool tls() const { return listener_.tls(); }

  // Answers one request: the listener's workers call it; the fuzzer too, without sockets. Every
  // response carries X-Request-Id; an exception becomes a 500 naming it.
  void handle(const HttpRequest &request, HttpResponse &response);

private:
  void route(const HttpRequest &request, HttpResponse &response, const std::string &requestId);
  void complete(Endpoint endpoint, const std::string &body, HttpResponse &response);

  Engine &engine_;
  const PlanTokenizer &tokenizer_;
  ServerOptions options_;
  std::optional<ChatTemplate> chat_;
  ServedModel model_;
  ContinuousBatch batch_;
  HttpListener listener_;
  std::thread loop_;
  // Responses being written (requests admitted and not yet released), for stop() to wait on.
  std::atomic<int> openExchanges_{0};
  // Whether an Authorization header carries one of options.apiKeys.
  bool authorized(const std::string &header) const;
  // Waits until no response is being written, or `timeout`.
  void awaitExchanges(std::chrono::milliseconds timeout) const;
};

} // namespace hetc::server
