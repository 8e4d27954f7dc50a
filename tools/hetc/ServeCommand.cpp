#include "ServeCommand.h"

#include "CommandSupport.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/Devices.h"
#include "runtime/server/HttpServer.h"
#include "runtime/tokenizer/ChatTemplate.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <csignal>
#include <cstdlib>
#include <malloc.h>
#include <pthread.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

namespace hetc::tool {

void addServeOptions(CLI::App &command, ServeArguments &args) {
  command.add_option("plan", args.planPath, "Plan file (with a packed tokenizer)")->required();
  command.add_option("--host", args.host, "Address to listen on (default: loopback only)");
  command.add_option("--port", args.port, "Port to listen on; 0 takes a free one")
      ->check(CLI::Range(0, 65535));
  command.add_option("--max-queue", args.maxQueue,
                     "Requests that may wait for a slot; more get 429 (default: 4 per slot; 0: none)");
  command.add_option("--drain-timeout", args.drainTimeout,
                     "On SIGINT or SIGTERM, seconds the running and queued requests get to finish "
                     "(new ones get 503) before the rest end with an error (default: 30)")
      ->check(CLI::Range(0.0, 86400.0));
  command.add_flag("--parse-special-in-messages", args.parseSpecialInMessages,
                   "Read a control token typed in a chat message (<|im_end|>, </s>) as that token, "
                   "as Hugging Face's apply_chat_template does; by default it is text, so a user "
                   "cannot end a turn or forge another role's");
  command.add_option("--api-key", args.apiKeys,
                     "Require 'Authorization: Bearer KEY' on every route but /health (repeatable; "
                     "any one given is accepted; 401 otherwise). A key here shows in ps: prefer "
                     "--api-key-file");
  command.add_option("--api-key-file", args.apiKeyFile,
                     "A file of accepted API keys, one a line (blank lines and lines starting "
                     "with # ignored)");
  command.add_option("--read-timeout", args.readTimeout,
                     "Seconds a request (headers and body) may take to arrive, from its first "
                     "byte; slower ones get 408 and are closed (default: 10)")
      ->check(CLI::Range(0.1, 3600.0));
  command.add_option("--tls-cert", args.tlsCertificate,
                     "Serve HTTPS with this PEM certificate (its chain may follow it); needs "
                     "--tls-key");
  command.add_option("--tls-key", args.tlsKey, "The PEM private key of --tls-cert");
  command.add_option("--model-name", args.modelName,
                     "The model id clients name (default: the plan file's name)");
  command.add_option("--template", args.templateName,
                     "Chat template for /v1/chat/completions: llama3, llama2, mistral, chatml or "
                     "gemma; default: recognised from the plan's chat_template");
  addEngineOptions(command, args.threads, args.noPin, args.device);
}

int serveCommand(ServeArguments &args) {
  // SIGINT and SIGTERM are taken by one thread (sigwait), so every other thread, the server's
  // included, inherits them blocked.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  // A client that leaves mid-write must not end the process.
  std::signal(SIGPIPE, SIG_IGN);
  // One malloc arena for the process. glibc gives each connection thread an arena of its own,
  // and a large request's memory (a long prompt's text and ids) stays in the arena it was freed
  // to: six concurrent 3 MB prompts, three times, left 859 MB resident with the default and
  // 106 MB with one arena (61 MB with the server's trim after large bodies; docs/serving.md). The per-token path does not allocate, so the one
  // lock costs the server nothing it measures. MALLOC_ARENA_MAX set by the user wins.
  if (!std::getenv("MALLOC_ARENA_MAX"))
    mallopt(M_ARENA_MAX, 1);

  ChatFamily family;
  if (!args.templateName.empty() && !ChatTemplate::fromName(args.templateName, family))
    fail("--template '" + args.templateName + "': expected " + ChatTemplate::names());
  std::vector<std::string> apiKeys = args.apiKeys;
  if (!args.apiKeyFile.empty()) {
    std::ifstream file(args.apiKeyFile);
    if (!file)
      fail("--api-key-file '" + args.apiKeyFile + "': cannot be read");
    for (std::string line; std::getline(file, line);) {
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      if (!line.empty() && line[0] != '#')
        apiKeys.push_back(line);
    }
    if (apiKeys.size() == args.apiKeys.size())
      fail("--api-key-file '" + args.apiKeyFile + "' holds no key");
  }
  for (const std::string &key : apiKeys)
    if (key.empty() || key.find_first_of(" \t\r\n") != std::string::npos)
      fail("an API key must be one word, without spaces");

  if (args.tlsCertificate.empty() != args.tlsKey.empty())
    fail(args.tlsCertificate.empty() ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key");
  const std::shared_ptr<const Plan> plan = loadPlan(args.planPath);
  const std::unique_ptr<PlanTokenizer> packed = requireTokenizer(*plan, args.planPath, "serve");
  const std::unique_ptr<Engine> created =
      createEngine(plan, engineOptions(args.threads, args.noPin), probeGpu(), args.device);
  Engine &engine = *created;

  server::ServerOptions serverOptions;
  serverOptions.host = args.host;
  serverOptions.port = args.port;
  serverOptions.maxQueue = args.maxQueue;
  serverOptions.templateName = args.templateName;
  serverOptions.apiKeys = std::move(apiKeys);
  serverOptions.parseSpecialInMessages = args.parseSpecialInMessages;
  serverOptions.readTimeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.readTimeout * 1000.0));
  serverOptions.tlsCertificate = args.tlsCertificate;
  serverOptions.tlsKey = args.tlsKey;
  serverOptions.drainTimeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.drainTimeout * 1000.0));
  serverOptions.modelName = args.modelName.empty()
                                ? std::filesystem::path(args.planPath).stem().string()
                                : args.modelName;
  server::HttpServer server(engine, *packed, serverOptions, args.planPath);
  Result<int> port = server.bind();
  if (!port)
    fail(port.message());
  if (!server.chatNote().empty())
    std::fprintf(stderr, "hetc serve: %s\n", server.chatNote().c_str());
  std::fprintf(stderr, "hetc serve: listening on %s://%s:%d (model %s, %u slots, queue %zu)\n",
               server.tls() ? "https" : "http", args.host.c_str(), *port, serverOptions.modelName.c_str(), engine.maxBatch(),
               server.maxQueue());
  std::fflush(stderr);

  std::atomic<bool> served{false};
  std::thread signals([&server, &served, stopSignals] {
    int signal = 0;
    sigwait(&stopSignals, &signal);
    if (!served)
      std::fprintf(stderr, "hetc serve: %s, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  const Status status = server.serve();
  // The server may have stopped on its own: wake the signal thread so it can be joined.
  served = true;
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  if (!status) {
    std::fprintf(stderr, "hetc: %s\n", status.message().c_str());
    return 1;
  }
  return 0;
}

} // namespace hetc::tool
