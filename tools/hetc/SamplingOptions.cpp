#include "SamplingOptions.h"

#include <cstdio>
#include <random>
#include <stdexcept>

namespace hetc::tool {

void SamplingOptions::addTo(CLI::App &command) {
  command.add_option("--temperature", params.temperature,
                     "Sample from softmax(logits / T); 0 = greedy (the default)");
  command.add_option("--top-k", params.topK, "Sample among the K most likely ids (0 = all)");
  command.add_option("--top-p", params.topP,
                     "Sample among the fewest most likely ids whose probability reaches P, in (0, 1]");
  command.add_option("--min-p", params.minP,
                     "Sample among ids at least P times as likely as the most likely, in [0, 1]");
  command.add_option("--repetition-penalty", params.repetitionPenalty,
                     "Divide positive (multiply negative) logits of ids in the prompt or generated "
                     "(1 = none)");
  command.add_option("--frequency-penalty", params.frequencyPenalty,
                     "Subtract this times its count from the logit of each generated id, in [-2, 2]");
  command.add_option("--presence-penalty", params.presencePenalty,
                     "Subtract this from the logit of each id generated once or more, in [-2, 2]");
  seed = command.add_option(
      "--seed", params.seed,
      "Random seed of each sequence: same seed, prompts and flags give the same ids (without it "
      "a random seed, printed on stderr)");
}

void SamplingOptions::finish() {
  if (Status status = params.check(); !status.ok())
    throw std::runtime_error(status.message());
  const bool seedGiven = seed && seed->count() > 0;
  if (params.greedy()) {
    const char *ignored = params.topK          ? "--top-k"
                          : params.topP < 1.0f ? "--top-p"
                          : params.minP > 0.0f ? "--min-p"
                          : seedGiven          ? "--seed"
                                               : nullptr;
    if (ignored)
      std::fprintf(stderr, "hetc: %s has no effect without --temperature above 0 (greedy)\n",
                   ignored);
  } else if (!seedGiven) {
    std::random_device device;
    params.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
    std::fprintf(stderr, "hetc: sampling with --seed %llu\n",
                 static_cast<unsigned long long>(params.seed));
  }
}

} // namespace hetc::tool
