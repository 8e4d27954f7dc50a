// `hetc serve`: the plan behind OpenAI-compatible HTTP (runtime/server).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hetc::tool {

struct ServeArguments {
  std::string planPath;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::optional<size_t> maxQueue; // unset: 4 per slot
  std::string modelName;    // empty: the plan file's name without .hplan
  std::string templateName; // a built-in chat template; empty: recognised from the plan
  double drainTimeout = 30;  // seconds running requests get to finish after SIGTERM
  std::vector<std::string> apiKeys; // --api-key, each accepted
  bool parseSpecialInMessages = false;
  std::string apiKeyFile;           // --api-key-file: one key a line
  double readTimeout = 10;          // seconds a request's head and body may take to arrive
  std::string tlsCertificate;       // --tls-cert and --tls-key: serve HTTPS
  std::string tlsKey;
  unsigned threads = 0;
  bool noPin = false;
  std::string device = "auto"; // --device
};

void addServeOptions(CLI::App &command, ServeArguments &args);

// Serves until SIGINT or SIGTERM; returns the exit code. Failures to start throw
// std::runtime_error with the one-line message.
int serveCommand(ServeArguments &args);

} // namespace hetc::tool
