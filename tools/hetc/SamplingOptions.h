// The sampling flags of the generating commands (run, chat): one declaration, one check.
#pragma once

#include "runtime/sampling/Sampler.h"

#include <CLI/CLI.hpp>

namespace hetc::tool {

struct SamplingOptions {
  SamplingParams params; // greedy unless a --temperature above 0
  CLI::Option *seed = nullptr;

  // --temperature, --top-k, --top-p, --min-p, the three penalties and --seed on `command`.
  void addTo(CLI::App &command);
  // After parsing: fails (std::runtime_error, one line) on a value out of range; warns on stderr
  // about a filter that greedy decoding ignores; without --seed, a sampling run gets a random one,
  // printed so the run can be repeated.
  void finish();
  bool samples() const { return !params.greedy() || params.penalizes(); }
};

} // namespace hetc::tool
