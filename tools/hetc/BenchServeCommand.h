// `hetc bench-serve`: a serving benchmark. Clients stream /v1/completions from an OpenAI-compatible
// server (a running one, or `hetc serve PLAN` started for the run) at each concurrency of a
// sweep, and report time to first token, inter-token latency, end-to-end latency and throughput,
// with the server's own token counts from /metrics as a cross-check.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace hetc::tool {

struct BenchServeArguments {
  std::string planPath;                // start `hetc serve PLAN --port 0` for the run
  std::string url;                     // or benchmark the server already at this URL
  std::string concurrency = "1,2,4,8"; // comma-separated concurrent clients, one level each
  uint32_t requests = 0;               // requests per level; 0: 4 x its concurrency
  uint32_t promptTokens = 32;          // prompt length, sent as token ids
  std::string prompt;                  // or this text as every prompt
  uint32_t maxTokens = 32;             // max_tokens of every request
  uint64_t seed = 0;                   // draws the prompt ids; sent as each request's seed
  uint32_t vocab = 0;                  // ids are drawn below it; 0: from /v1/models or the plan
  std::string model;                   // the model field; empty: the first of /v1/models
  std::string jsonPath;                // also write the report as JSON here
  bool logprobs = false;               // ask logprobs: 0, which count the tokens of each chunk
  double timeout = 600;                // seconds a request may go without a byte before it fails
  // Passed to the `hetc serve` it starts (0 threads, a negative queue: serve's defaults).
  unsigned threads = 0;
  int64_t maxQueue = -1;
  double startTimeout = 600; // seconds to wait for its listening line
};

// Declares the options of the `bench-serve` subcommand.
void addBenchServeOptions(CLI::App &command, BenchServeArguments &args);

// Runs the sweep and prints one table row per concurrency on stdout. A server that cannot be
// reached or stops answering, or a level where every request fails, throws std::runtime_error
// with the one-line message.
int benchServeCommand(const BenchServeArguments &args);

} // namespace hetc::tool
