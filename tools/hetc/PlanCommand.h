// `hetc plan`: which device computes each sublayer of a model on a target, and what it costs,
// without weights. `hetc targets`: the target machines the cost model knows.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace hetc::tool {

struct PlanArguments {
  std::string model;
  std::string target;
  uint64_t batch = 1;
  uint64_t len = 512;
  std::string stage; // "prefill", "decode", or empty for both
  std::string timing = "serial";
  std::string placement = "auto";
  bool noResident = false;
  bool json = false;
  bool sweep = false;
  uint64_t maxBatch = 4096; // --sweep's batch bound
  std::string opTimes;      // measured operator times: the split search alone
  uint32_t batches = 1;     // batches sharing the weights in the split search (Eq. 14)
};

struct TargetsArguments {
  std::string name; // one target in full, with sources; empty: list them all
  bool json = false;
};

void addPlanOptions(CLI::App &command, PlanArguments &args);
void addTargetsOptions(CLI::App &command, TargetsArguments &args);

// Print the report on stdout; failures throw std::runtime_error with the one-line message.
int planCommand(const PlanArguments &args);
int targetsCommand(const TargetsArguments &args);

} // namespace hetc::tool
