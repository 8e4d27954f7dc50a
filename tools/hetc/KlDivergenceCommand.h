// `hetc kl-divergence BASE TEST`: how far a plan's next-token distributions are from another's on
// the same ids, as llama.cpp's KL-divergence tool reports it for a quantized model against its
// float one: both plans read the same sequences one id at a time (teacher forced, so neither
// plan's choices change what the other reads), and at every position the divergence
// KL(base || test) of the softmaxed logits and whether the two argmaxes agree are taken.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hetc::tool {

struct KlDivergenceArguments {
  std::string basePath;               // the reference plan (float32 weights, typically)
  std::string testPath;               // the plan compared with it
  std::vector<std::string> promptIds; // --prompt-ids, one sequence each
  std::vector<std::string> prompts;   // --prompt, text through the base plan's tokenizer
  // Without prompts: `sequences` sequences of `length` ids drawn from the vocabulary by a fixed
  // generator seeded with `seed` (the same ids on every machine).
  uint32_t sequences = 8;
  uint32_t length = 64;
  uint64_t seed = 1;
  bool json = false;
  unsigned threads = 0;
  bool noPin = false;
  std::string device = "auto"; // --device
};

void addKlDivergenceOptions(CLI::App &command, KlDivergenceArguments &args);

// Prints the mean, median, 99th percentile and largest KL divergence in nats and the share of
// positions whose argmaxes agree. Failures end the command with one message.
int klDivergenceCommand(const KlDivergenceArguments &args);

} // namespace hetc::tool
