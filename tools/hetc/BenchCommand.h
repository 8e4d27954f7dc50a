// `hetc bench`: decode throughput against the read bandwidth measured in the same run.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace hetc::tool {

struct BenchArguments {
  std::string planPath;
  uint64_t context = 0;
  uint32_t batch = 1;
  // A sweep: comma-separated contexts and batch sizes, every combination (empty: --context or
  // --batch alone).
  std::string contexts;
  std::string batches;
  uint32_t gen = 16;
  // A sweep: every point is run this many times, in interleaved rounds; each point keeps its
  // fastest run.
  uint32_t rounds = 1;
  std::string fill = "auto";
  unsigned threads = 0;
  bool noPin = false;
  std::string device = "auto"; // --device
  bool json = false;
  bool profile = false;
  bool noPaired = false;
  uint64_t probeMiB = 0;    // 0: the probe's default size
  std::string plotPath;     // an SVG of the sweep
  std::string compareTorch; // the model directory models/export.py wrote
  std::string python;       // default: the build's HETC_PYTHON
  std::string torchScript;  // default: models/bench_torch.py of the source tree built from
  // Set once the command line is parsed: whether --context and --batch were given.
  bool contextGiven = false;
  bool batchGiven = false;
};

// Declares the options of the `bench` subcommand.
void addBenchOptions(CLI::App &command, BenchArguments &args);

// Runs the benchmark and prints the report (text, or one JSON object) on stdout. Failures throw
// std::runtime_error with the one-line message.
int benchCommand(const BenchArguments &args);

} // namespace hetc::tool
