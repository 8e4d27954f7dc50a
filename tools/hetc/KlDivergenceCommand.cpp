#include "KlDivergenceCommand.h"

#include "CommandSupport.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>

namespace hetc::tool {
namespace {

// log-softmax of `logits` in double: each logit less the log of the sum of their exponentials.
void logSoftmax(const float *logits, size_t vocab, std::vector<double> &out) {
  double largest = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < vocab; ++i)
    largest = std::max(largest, static_cast<double>(logits[i]));
  double sum = 0.0;
  for (size_t i = 0; i < vocab; ++i)
    sum += std::exp(static_cast<double>(logits[i]) - largest);
  const double logSum = largest + std::log(sum);
  out.resize(vocab);
  for (size_t i = 0; i < vocab; ++i)
    out[i] = static_cast<double>(logits[i]) - logSum;
}

size_t argmaxFirst(const float *values, size_t n) {
  return static_cast<size_t>(std::max_element(values, values + n) - values);
}

// The sequences both plans read: the prompts given, or the fixed default set.
std::vector<std::vector<int32_t>> sequencesOf(const KlDivergenceArguments &args, const Plan &base,
                                              uint32_t vocab) {
  std::vector<std::vector<int32_t>> sequences;
  for (const std::string &text : args.promptIds)
    sequences.push_back(parsePromptIds(text));
  if (!args.prompts.empty()) {
    std::unique_ptr<PlanTokenizer> tokenizer = requireTokenizer(base, args.basePath, "--prompt");
    for (const std::string &text : args.prompts) {
      Result<std::vector<int32_t>> ids = tokenizer->tokenizer->encode(text, true);
      if (!ids)
        fail("--prompt: " + ids.message());
      if (ids->empty())
        fail("--prompt '" + text + "' gives no token ids");
      sequences.push_back(std::move(ids.value()));
    }
  }
  if (!sequences.empty())
    return sequences;
  if (args.sequences == 0 || args.length == 0)
    fail("--sequences and --length must be at least 1");
  // A 64-bit linear congruential generator (Knuth's MMIX constants), its high bits taken, so the
  // default ids are the same everywhere.
  uint64_t state = args.seed;
  for (uint32_t s = 0; s < args.sequences; ++s) {
    std::vector<int32_t> ids(args.length);
    for (int32_t &id : ids) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<int32_t>((state >> 33) % vocab);
    }
    sequences.push_back(std::move(ids));
  }
  return sequences;
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1) + 0.5));
  return values[at];
}

} // namespace

void addKlDivergenceOptions(CLI::App &command, KlDivergenceArguments &args) {
  command.add_option("base", args.basePath, "The reference plan (float32 weights, typically)")
      ->required();
  command.add_option("test", args.testPath, "The plan compared with it")->required();
  command.add_option("--prompt-ids", args.promptIds,
                     "A sequence of ids, comma-separated (repeatable)");
  command.add_option("--prompt", args.prompts,
                     "A text, encoded by the base plan's tokenizer (repeatable)");
  command
      .add_option("--sequences", args.sequences,
                  "Without prompts: this many sequences of fixed pseudo-random ids")
      ->capture_default_str();
  command.add_option("--length", args.length, "Without prompts: ids per sequence")
      ->capture_default_str();
  command.add_option("--seed", args.seed, "Without prompts: the seed of the ids")
      ->capture_default_str();
  command.add_flag("--json", args.json, "One JSON object on stdout instead of text");
  addEngineOptions(command, args.threads, args.noPin, args.device);
}

int klDivergenceCommand(const KlDivergenceArguments &args) {
  std::shared_ptr<const Plan> basePlan = loadPlan(args.basePath);
  std::shared_ptr<const Plan> testPlan = loadPlan(args.testPath);
  const EngineOptions options = engineOptions(args.threads, args.noPin);
  const GpuProbe gpu = probeGpu();
  std::unique_ptr<Engine> base = createEngine(basePlan, options, gpu, args.device);
  std::unique_ptr<Engine> test = createEngine(testPlan, options, gpu, args.device);
  const uint32_t vocab = base->vocab();
  if (test->vocab() != vocab)
    fail("the plans' vocabularies differ: " + std::to_string(vocab) + " and " +
         std::to_string(test->vocab()));
  const std::vector<std::vector<int32_t>> sequences = sequencesOf(args, *basePlan, vocab);
  const uint64_t maxSeq = std::min(base->maxSeq(), test->maxSeq());
  for (size_t s = 0; s < sequences.size(); ++s) {
    if (sequences[s].size() > maxSeq)
      fail("sequence " + std::to_string(s) + " has " + std::to_string(sequences[s].size()) +
           " ids but the plans hold " + std::to_string(maxSeq) + " positions");
    for (int32_t id : sequences[s])
      if (id < 0 || static_cast<uint32_t>(id) >= vocab)
        fail("sequence " + std::to_string(s) + " has id " + std::to_string(id) +
             " outside the vocabulary of " + std::to_string(vocab));
  }

  // Both engines step the same slots with the same id; each sequence's logits after each of its
  // ids are compared.
  // One id per sequence a step: at most the slots, and the tokens a step takes, of both plans.
  const size_t slots =
      std::min({base->maxBatch(), test->maxBatch(), base->maxStepTokens(), test->maxStepTokens()});
  std::vector<double> divergences;
  size_t agreements = 0;
  std::vector<double> p, q;
  std::vector<StepSequence> step;
  for (size_t first = 0; first < sequences.size(); first += slots) {
    const size_t count = std::min(slots, sequences.size() - first);
    size_t longest = 0;
    for (size_t i = 0; i < count; ++i)
      longest = std::max(longest, sequences[first + i].size());
    for (size_t position = 0; position < longest; ++position) {
      step.clear();
      for (size_t i = 0; i < count; ++i) {
        const std::vector<int32_t> &ids = sequences[first + i];
        if (position < ids.size())
          step.push_back({static_cast<uint32_t>(i), position, &ids[position], 1, true});
      }
      for (Engine *engine : {base.get(), test.get()})
        if (Status status = engine->step(step.data(), step.size()); !status)
          fail(status.message());
      for (size_t i = 0; i < step.size(); ++i) {
        const float *baseLogits = base->logits(i);
        const float *testLogits = test->logits(i);
        logSoftmax(baseLogits, vocab, p);
        logSoftmax(testLogits, vocab, q);
        double kl = 0.0;
        for (size_t v = 0; v < vocab; ++v)
          if (p[v] != -std::numeric_limits<double>::infinity()) // a masked id adds nothing
            kl += std::exp(p[v]) * (p[v] - q[v]);
        if (!std::isfinite(kl))
          fail("a non-finite divergence at position " + std::to_string(position) +
               ": the logits of one plan are not finite");
        divergences.push_back(std::max(kl, 0.0));
        agreements += argmaxFirst(baseLogits, vocab) == argmaxFirst(testLogits, vocab);
      }
    }
  }

  double mean = 0.0;
  for (double kl : divergences)
    mean += kl;
  mean /= static_cast<double>(divergences.size());
  const double median = quantile(divergences, 0.5);
  const double p99 = quantile(divergences, 0.99);
  const double largest = *std::max_element(divergences.begin(), divergences.end());
  const double top1 = static_cast<double>(agreements) / static_cast<double>(divergences.size());
  if (args.json) {
    nlohmann::json json = {{"base", args.basePath},
                           {"test", args.testPath},
                           {"sequences", sequences.size()},
                           {"positions", divergences.size()},
                           {"kl_mean", mean},
                           {"kl_median", median},
                           {"kl_p99", p99},
                           {"kl_max", largest},
                           {"top1_agreement", top1}};
    std::cout << json.dump(2) << "\n";
  } else {
    char text[512];
    std::snprintf(text, sizeof(text),
                  "%zu positions of %zu sequences, %s against %s\n"
                  "  KL divergence (nats)  mean %.6f  median %.6f  p99 %.6f  max %.6f\n"
                  "  same top-1 id         %.2f%% (%zu of %zu)\n",
                  divergences.size(), sequences.size(), args.testPath.c_str(),
                  args.basePath.c_str(), mean, median, p99, largest, 100.0 * top1, agreements,
                  divergences.size());
    std::cout << text;
  }
  std::cout.flush();
  if (!std::cout)
    fail("cannot write to standard output");
  return 0;
}

} // namespace hetc::tool
