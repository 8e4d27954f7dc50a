// hetc: compile an ONNX model into a plan, run a plan, benchmark it, show what a plan holds, and
// (with the compiler) plan a model's devices on a target without its weights and measure this
// machine as a target.
//
// Output contract: `run` prints one line per prompt with the generated ids and nothing else on
// stdout (with --session or --arrive-at-step too); with text prompts (--prompt, --prompt-file) it
// prints each prompt's generated text followed by a newline instead, one prompt's as it is
// generated, ended before the first --stop string. `tokenize` prints ids separated by commas, or
// text. Details go to stderr with
// --verbose. Every failure is one line "hetc: error: <message>" on stderr and exit code 1.
#include "BenchCommand.h"
#include "BenchServeCommand.h"
#include "ChatCommand.h"
#include "CommandSupport.h"
#include "KlDivergenceCommand.h"
#include "SamplingOptions.h"
#include "ServeCommand.h"
#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/kv/Session.h"
#include "runtime/platform/Devices.h"
#include "runtime/sampling/StopStrings.h"
#include "runtime/serving/ElasticBatch.h"
#include "runtime/tokenizer/PlanTokenizer.h"
#include "tools/report/Inspect.h"

#ifdef HETC_WITH_COMPILER
#include "CalibrateCommand.h"
#include "PlanCommand.h"
#include "hetc/compiler/Compile.h"
#endif

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <iterator>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

using hetc::tool::fail;
using hetc::tool::loadPlan;
using hetc::tool::parsePromptIds;

void check(const hetc::Status &status) {
  if (!status)
    fail(status.message());
}

// A float32 array as NumPy's .npy v1.0: magic, version, header length, a Python dict literal
// padded with spaces to a multiple of 64 bytes, then the data in C order.
void writeNpy(std::FILE *file, const std::string &path, const float *data,
              const std::vector<size_t> &shape) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  size_t elements = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    header += (i ? ", " : "") + std::to_string(shape[i]);
    elements *= shape[i];
  }
  header += shape.size() == 1 ? ",), }" : "), }"; // a Python tuple: "(2,)" or "(2, 3)"

  const size_t prefix = 10; // magic (6) + version (2) + header length (2)
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const uint16_t headerLength = static_cast<uint16_t>(header.size());
  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(headerLength & 0xff),
                                      static_cast<unsigned char>(headerLength >> 8)};
  const bool ok = std::fwrite(preamble, 1, sizeof(preamble), file) == sizeof(preamble) &&
                  std::fwrite(header.data(), 1, header.size(), file) == header.size() &&
                  std::fwrite(data, sizeof(float), elements, file) == elements &&
                  std::fflush(file) == 0;
  if (!ok)
    fail("cannot write --logits-out " + path + ": " + std::strerror(errno));
}

// Removes `path` when destroyed unless the path was cleared: output written only in part.
struct UnfinishedFile {
  std::string path;
  ~UnfinishedFile() {
    if (!path.empty())
      std::remove(path.c_str());
  }
};

struct RunArguments {
  std::string planPath;
  std::vector<std::string> promptIds;
  std::vector<std::string> promptTexts;
  std::vector<std::string> promptFiles;
  uint32_t maxNew = 32;
  std::string logitsOut;
  std::vector<uint64_t> arriveAtStep;
  std::string session;
  unsigned threads = 0;
  bool noPin = false;
  std::string device = "auto"; // --device
  bool portableKernels = false;
  bool verbose = false;
  hetc::tool::SamplingOptions sampling;
  std::vector<std::string> stops;
  // Set from the plan's tokenizer for text prompts: ids that end a sequence.
  std::vector<int32_t> stopIds;
  // Set for text prompts or --stop: decodes each id and ends a sequence at a stop string.
  std::function<bool(size_t, int32_t)> stopWhen;
};

// --logits-out: opened once the request has been checked, so a huge request is refused before its
// logits are sized and a bad path fails before the work; removed if the run fails afterwards
// rather than left looking like output.
class LogitsOutput {
public:
  explicit LogitsOutput(std::string path) : path_(std::move(path)) {}

  // [prompts, maxNew, vocab] floats to fill, or null without --logits-out.
  float *open(size_t prompts, uint32_t maxNew, uint32_t vocab) {
    if (path_.empty())
      return nullptr;
    file_.reset(std::fopen(path_.c_str(), "wb"));
    if (!file_)
      fail("cannot write --logits-out " + path_ + ": " + std::strerror(errno));
    unfinished_.path = path_;
    shape_ = {prompts, maxNew, vocab};
    logits_.resize(prompts * static_cast<size_t>(maxNew) * vocab);
    return logits_.data();
  }

  void write() {
    if (!file_)
      return;
    writeNpy(file_.get(), path_, logits_.data(), shape_);
    unfinished_.path.clear();
  }

private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> file_{nullptr, &std::fclose};
  UnfinishedFile unfinished_;
  std::vector<float> logits_;
  std::vector<size_t> shape_;
};

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Every prompt from step 0 in slots 0..n-1.
std::vector<std::vector<int32_t>> runBatch(hetc::Engine &engine, const RunArguments &args,
                                           const std::vector<std::vector<int32_t>> &prompts,
                                           LogitsOutput &logitsOutput) {
  check(hetc::checkGenerateRequest(engine, prompts, args.maxNew));
  float *logits = logitsOutput.open(prompts.size(), args.maxNew, engine.vocab());
  hetc::Result<hetc::GenerateResult> generated =
      hetc::generateGreedy(engine, prompts, args.maxNew, logits);
  if (!generated)
    fail(generated.message());
  if (args.verbose) {
    const hetc::GenerateResult &r = *generated;
    size_t promptTokens = 0;
    for (const auto &prompt : prompts)
      promptTokens += prompt.size();
    const size_t decodeTokens = prompts.size() * (args.maxNew > 0 ? args.maxNew - 1 : 0);
    std::fprintf(stderr, "hetc: prefill %zu tokens in %u steps: %.3f ms (%.1f tokens/s)\n",
                 promptTokens, r.prefillSteps, r.prefillSeconds * 1e3,
                 r.prefillSeconds > 0 ? promptTokens / r.prefillSeconds : 0.0);
    std::fprintf(stderr,
                 "hetc: decode %zu tokens in %u steps: %.3f ms (%.3f ms/step, %.1f "
                 "tokens/s)\n",
                 decodeTokens, r.decodeSteps, r.decodeSeconds * 1e3,
                 r.decodeSteps ? r.decodeSeconds * 1e3 / r.decodeSteps : 0.0,
                 r.decodeSeconds > 0 ? decodeTokens / r.decodeSeconds : 0.0);
  }
  return generated->tokens;
}

// Runs `requests` as an elastic batch; logits of request i go to row block i of --logits-out.
hetc::ElasticBatch runElastic(hetc::Engine &engine, const RunArguments &args,
                              std::vector<hetc::GenerationRequest> requests,
                              LogitsOutput &logitsOutput) {
  check(hetc::ElasticBatch::check(engine, requests));
  if (float *logits = logitsOutput.open(requests.size(), args.maxNew, engine.vocab()))
    for (size_t i = 0; i < requests.size(); ++i)
      requests[i].logits = logits + i * static_cast<size_t>(args.maxNew) * engine.vocab();
  for (hetc::GenerationRequest &request : requests) {
    request.stopIds = args.stopIds;
    request.sampling = args.sampling.params;
  }
  hetc::Result<hetc::ElasticBatch> batch = hetc::ElasticBatch::create(engine, std::move(requests));
  if (!batch)
    fail(batch.message());
  if (args.stopWhen)
    batch->stopWhen(args.stopWhen);
  check(batch->run());
  if (args.verbose) {
    const hetc::ElasticBatchStats &stats = batch->stats();
    std::fprintf(stderr,
                 "hetc: %llu steps (%llu with prefill and decode together), %llu prompt ids "
                 "prefilled, %llu ids decoded, at most %u of %u slots busy: %.3f ms\n",
                 static_cast<unsigned long long>(stats.steps),
                 static_cast<unsigned long long>(stats.mixedSteps),
                 static_cast<unsigned long long>(stats.prefillTokens),
                 static_cast<unsigned long long>(stats.decodeTokens), stats.mostActive,
                 engine.maxBatch(), stats.seconds * 1e3);
  }
  return std::move(batch.value());
}

// Prompt i joins at step --arrive-at-step i (at step 0 without them).
std::vector<std::vector<int32_t>> runArrivals(hetc::Engine &engine, const RunArguments &args,
                                              const std::vector<std::vector<int32_t>> &prompts,
                                              LogitsOutput &logitsOutput) {
  std::vector<hetc::GenerationRequest> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests[i].prompt = prompts[i];
    requests[i].maxNew = args.maxNew;
    requests[i].arrivalStep = i < args.arriveAtStep.size() ? args.arriveAtStep[i] : 0;
  }
  hetc::ElasticBatch batch = runElastic(engine, args, std::move(requests), logitsOutput);
  std::vector<std::vector<int32_t>> tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const hetc::RequestOutcome &outcome = batch.outcomes()[i];
    tokens.push_back(outcome.tokens);
    if (args.verbose)
      std::fprintf(stderr,
                   "hetc: sequence %zu: slot %u, arrived at step %llu, joined at step %llu, "
                   "finished at step %llu\n",
                   i, outcome.slot, static_cast<unsigned long long>(batch.requests()[i].arrivalStep),
                   static_cast<unsigned long long>(outcome.joinedAtStep),
                   static_cast<unsigned long long>(outcome.finishedAtStep));
  }
  return tokens;
}

// The one prompt continues the sequence kept in --session (a new one when the file does not
// exist): its KV cache is restored into slot 0, only the ids it does not hold yet are prefilled,
// and the file is saved again with the history grown by the prompt and the generated ids.
std::vector<std::vector<int32_t>> runSession(hetc::Engine &engine, const RunArguments &args,
                                             const std::vector<int32_t> &prompt,
                                             LogitsOutput &logitsOutput) {
  const std::string &path = args.session;
  if (engine.deviceSteps())
    fail("--session reads and writes the KV cache on the host; it is on the device here "
         "(--device " + args.device + "): use --device cpu");
  std::vector<int32_t> history;
  uint64_t positions = 0;
  std::error_code error;
  const bool exists = std::filesystem::exists(path, error);
  if (error)
    fail("cannot read session file " + path + ": " + error.message());
  if (exists) {
    const auto start = std::chrono::steady_clock::now();
    hetc::Result<hetc::SessionInfo> restored =
        hetc::restoreSession(path, engine.plan(), engine.kvCache(), 0);
    if (!restored)
      fail(restored.message());
    history = std::move(restored->history);
    positions = restored->positions;
    if (args.verbose)
      std::fprintf(stderr,
                   "hetc: session %s: restored %llu positions and %zu history ids (%llu bytes) "
                   "in %.3f ms\n",
                   path.c_str(), static_cast<unsigned long long>(positions), history.size(),
                   static_cast<unsigned long long>(restored->fileBytes), millisecondsSince(start));
  } else if (args.verbose) {
    std::fprintf(stderr, "hetc: session %s: new\n", path.c_str());
  }

  hetc::GenerationRequest request;
  request.prompt.assign(history.begin() + static_cast<std::ptrdiff_t>(positions), history.end());
  request.prompt.insert(request.prompt.end(), prompt.begin(), prompt.end());
  request.maxNew = args.maxNew;
  request.slot = 0;
  request.start = positions;
  request.context.assign(history.begin(),
                         history.begin() + static_cast<std::ptrdiff_t>(positions));
  hetc::ElasticBatch batch = runElastic(engine, args, {request}, logitsOutput);
  const std::vector<int32_t> &generated = batch.outcomes()[0].tokens;

  history.insert(history.end(), prompt.begin(), prompt.end());
  history.insert(history.end(), generated.begin(), generated.end());
  const auto start = std::chrono::steady_clock::now();
  check(hetc::saveSession(path, engine.plan(), engine.kvCache(), 0, history));
  if (args.verbose)
    std::fprintf(stderr, "hetc: session %s: saved %llu positions and %zu history ids in %.3f ms\n",
                 path.c_str(), static_cast<unsigned long long>(engine.cachedPositions(0)),
                 history.size(), millisecondsSince(start));
  return {generated};
}

// The policies the plan's tables give this run: prefill of every prompt at the longest one's
// length, and decode of every sequence at the positions its last step attends.
hetc::EngineOptions runEngineOptions(const RunArguments &args) {
  hetc::EngineOptions options = hetc::tool::engineOptions(args.threads, args.noPin);
  options.portableKernels = args.portableKernels;
  return options;
}

std::string runPolicyText(const hetc::Engine &engine,
                          const std::vector<std::vector<int32_t>> &prompts,
                          const RunArguments &args) {
  uint64_t longest = 0;
  for (const std::vector<int32_t> &prompt : prompts)
    longest = std::max<uint64_t>(longest, prompt.size());
  const uint64_t batch = prompts.size();
  const uint64_t decodeLen = longest + (args.maxNew > 0 ? args.maxNew - 1 : 0);
  return hetc::policyLookupText(engine.policyTables(), hetc::plan::StageDef::Prefill, batch,
                                longest) +
         "; " +
         hetc::policyLookupText(engine.policyTables(), hetc::plan::StageDef::Decode, batch,
                                decodeLen) +
         hetc::tool::policyRanOn(engine);
}

std::string readPromptFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot read --prompt-file " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int runCommand(RunArguments args) {
  std::vector<std::string> texts = args.promptTexts;
  for (const std::string &path : args.promptFiles)
    texts.push_back(readPromptFile(path));
  const bool textPrompts = !texts.empty();
  if (textPrompts && !args.promptIds.empty())
    fail("give --prompt-ids or --prompt / --prompt-file, not both");
  if (!textPrompts && args.promptIds.empty())
    fail("give a prompt: --prompt TEXT, --prompt-file FILE or --prompt-ids IDS");
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string &text : args.promptIds)
    prompts.push_back(parsePromptIds(text));
  const size_t promptCount = textPrompts ? texts.size() : prompts.size();
  const std::string promptOption = textPrompts ? "--prompt" : "--prompt-ids";
  if (!args.session.empty() && promptCount != 1)
    fail("--session continues one sequence: give one " + promptOption + ", not " +
         std::to_string(promptCount));
  if (!args.session.empty() && !args.arriveAtStep.empty())
    fail("--session continues one sequence; --arrive-at-step is for several");
  if (!args.arriveAtStep.empty() && args.arriveAtStep.size() != promptCount)
    fail("--arrive-at-step: give one per " + promptOption + " (" + std::to_string(promptCount) +
         " prompts, " + std::to_string(args.arriveAtStep.size()) + " --arrive-at-step)");

  args.sampling.finish();
  for (const std::string &stop : args.stops)
    if (stop.empty())
      fail("--stop '': must not be empty");
  const bool samples = args.sampling.samples();

  std::shared_ptr<const hetc::Plan> plan = loadPlan(args.planPath);
  std::unique_ptr<hetc::PlanTokenizer> tokenizer;
  if (!textPrompts && !args.stops.empty())
    tokenizer = hetc::tool::requireTokenizer(*plan, args.planPath, "--stop");
  if (textPrompts) {
    tokenizer = hetc::tool::requireTokenizer(*plan, args.planPath, "--prompt");
    // A session that already holds a conversation continues it: no second BOS.
    std::error_code error;
    const bool continuing = !args.session.empty() && std::filesystem::exists(args.session, error);
    for (const std::string &text : texts) {
      hetc::Result<std::vector<int32_t>> ids = tokenizer->tokenizer->encode(text, !continuing);
      if (!ids)
        fail("--prompt: " + ids.message());
      if (ids->empty())
        fail("--prompt '" + text + "' gives no token ids");
      prompts.push_back(std::move(ids.value()));
    }
    args.stopIds = tokenizer->eosIds;
  }
  // A plan for a GPU target runs here on the CPU: said once, verbose or not.
  const hetc::GpuProbe gpu = hetc::probeGpu();
  const std::unique_ptr<hetc::Engine> created =
      hetc::tool::createEngine(plan, runEngineOptions(args), gpu, args.device);
  hetc::Engine &engine = *created;
  if (args.verbose) {
    std::fprintf(stderr, "hetc: devices: %s\n",
                 hetc::tool::describeEngineDevices(engine, gpu).c_str());
    std::fprintf(stderr, "hetc: memory: %s\n", engine.memoryBinding().describe().c_str());
    if (!engine.policyTables().empty())
      std::fprintf(stderr, "hetc: policy: %s\n", runPolicyText(engine, prompts, args).c_str());
    std::fprintf(stderr,
                 "hetc: plan %s: %zu ops, vocab %u, max-batch %u, max-seq %llu, "
                 "max-step-tokens %u\n",
                 args.planPath.c_str(), static_cast<size_t>(plan->def().ops()->size()),
                 engine.vocab(), engine.maxBatch(),
                 static_cast<unsigned long long>(engine.maxSeq()), engine.maxStepTokens());
    std::fprintf(stderr,
                 "hetc: threads %u (%u pinned), activation arena %.2f MiB, KV arena "
                 "%.2f MiB reserved\n",
                 engine.threads(), engine.pinnedThreads(),
                 engine.activationArenaBytes() / 1048576.0, engine.kvArenaBytes() / 1048576.0);
    for (const hetc::KernelUse &use : engine.kernelSummary())
      std::fprintf(stderr, "hetc: kernel %s: %s, %zu op%s\n", use.opKind.c_str(),
                   use.kernel.c_str(), use.count, use.count == 1 ? "" : "s");
  }

  // Each prompt's text as it is generated, ended before the first --stop string; one text prompt
  // is printed as it comes. The decode stream holds back the bytes of a character until its last
  // byte is there, the stop strings whatever could still begin one.
  struct TextOutput {
    hetc::DecodeStream stream;
    hetc::StopStrings stops;
    std::string text;
  };
  std::deque<TextOutput> outputs;
  const bool streaming = textPrompts && prompts.size() == 1;
  std::string piece, released;
  if (tokenizer) {
    for (size_t i = 0; i < prompts.size(); ++i)
      outputs.push_back(TextOutput{hetc::DecodeStream(*tokenizer->tokenizer),
                                   hetc::StopStrings(args.stops), std::string()});
    piece.reserve(256);
    released.reserve(256);
    args.stopWhen = [&](size_t r, int32_t id) {
      TextOutput &output = outputs[r];
      piece.clear();
      released.clear();
      output.stream.push(id, piece);
      const bool stopped = output.stops.push(piece, released);
      if (streaming)
        std::cout << released << std::flush;
      else
        output.text += released;
      return stopped;
    };
  }

  LogitsOutput logitsOutput(args.logitsOut);
  const std::vector<std::vector<int32_t>> generated =
      !args.session.empty() ? runSession(engine, args, prompts[0], logitsOutput)
      : !args.arriveAtStep.empty() || textPrompts || samples || !args.stops.empty()
          ? runArrivals(engine, args, prompts, logitsOutput)
          : runBatch(engine, args, prompts, logitsOutput);

  if (textPrompts) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      TextOutput &output = outputs[i];
      released.clear();
      if (!output.stops.stopped()) {
        piece.clear();
        output.stream.finish(piece);
        output.stops.push(piece, released);
        output.stops.finish(released);
      }
      if (streaming) {
        std::cout << released << '\n';
      } else if (!args.stops.empty()) {
        std::cout << output.text << released << '\n';
      } else {
        hetc::Result<std::string> text = tokenizer->tokenizer->decode(generated[i], true);
        if (!text)
          fail(text.message());
        std::cout << *text << '\n';
      }
    }
  } else {
    for (const std::vector<int32_t> &ids : generated) {
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i)
        line += (i ? " " : "") + std::to_string(ids[i]);
      std::cout << line << '\n';
    }
  }
  std::cout.flush();
  if (!std::cout)
    fail("cannot write the generated ids to standard output");
  logitsOutput.write();
  return 0;
}

struct TokenizeArguments {
  std::string planPath;
  std::string text;
  std::string ids;
  bool noSpecial = false;
  bool special = false;
};

// --text: the ids, comma-separated; --ids: the text.
int tokenizeCommand(const TokenizeArguments &args) {
  std::shared_ptr<const hetc::Plan> plan = loadPlan(args.planPath);
  std::unique_ptr<hetc::PlanTokenizer> tokenizer = hetc::tool::requireTokenizer(*plan, args.planPath, "tokenize");
  if (!args.ids.empty()) {
    hetc::Result<std::string> text =
        tokenizer->tokenizer->decode(parsePromptIds(args.ids, "--ids"), !args.special);
    if (!text)
      fail("--ids: " + text.message());
    std::cout << *text << '\n';
  } else {
    hetc::Result<std::vector<int32_t>> ids = tokenizer->tokenizer->encode(args.text, !args.noSpecial);
    if (!ids)
      fail("--text: " + ids.message());
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i)
      line += (i ? "," : "") + std::to_string((*ids)[i]);
    std::cout << line << '\n';
  }
  std::cout.flush();
  if (!std::cout)
    fail("cannot write to standard output");
  return 0;
}

int inspectCommand(const std::string &planPath, bool json) {
  std::shared_ptr<const hetc::Plan> plan = loadPlan(planPath);
  if (json)
    hetc::printPlanJson(*plan, std::cout);
  else
    hetc::printPlanSummary(*plan, std::cout);
  std::cout.flush();
  return 0;
}

// What a session file holds, read without a plan.
int sessionShowCommand(const std::string &path) {
  hetc::Result<hetc::SessionInfo> read = hetc::readSessionInfo(path);
  if (!read)
    fail(read.message());
  const hetc::SessionInfo &info = *read;
  char fingerprint[20];
  std::snprintf(fingerprint, sizeof(fingerprint), "%016llx",
                static_cast<unsigned long long>(info.fingerprint));
  std::cout << "session " << path << "\n"
            << "  format version " << info.formatVersion << ", " << info.fileBytes
            << " bytes, model fingerprint " << fingerprint << "\n"
            << "  KV cache: " << info.positions << " positions of " << info.layers << " layers x "
            << info.kvHeads << " KV heads x head_dim " << info.headDim << ", "
            << hetc::plan::EnumNameDTypeDef(info.kvDtype) << " (" << info.kvBytes << " bytes)\n"
            << "  history: " << info.history.size() << " ids, "
            << info.history.size() - info.positions << " not yet in the KV cache\n"
            << "  ids:";
  for (int32_t id : info.history)
    std::cout << ' ' << id;
  std::cout << '\n';
  std::cout.flush();
  if (!std::cout)
    fail("cannot write to standard output");
  return 0;
}

struct CompileArguments {
  std::string onnxPath;
  std::string outputPath;
  std::string target = "host";
  uint32_t maxBatch = 4;
  std::string maxSeq = "4096";
  bool maxSeqGiven = false; // --max-seq on the command line (the default yields to the model's)
  uint32_t maxStepTokens = 512;
  std::string weights = "bf16";
  std::string kv; // empty: as the weights
  uint32_t groupSize = 32;
  bool int4Symmetric = false;
  std::string lmHead; // empty: bf16, f32 with --weights f32
  bool noResident = false;
  bool verbose = false;
  bool explain = false;
  std::string tokenizer;
};

int compileCommand(const CompileArguments &args) {
#ifdef HETC_WITH_COMPILER
  hetc::compiler::CompileOptions options;
  options.onnxPath = args.onnxPath;
  options.outputPath = args.outputPath;
  options.target = args.target;
  options.residentLayers = !args.noResident;
  options.maxBatch = args.maxBatch;
  options.maxSeqDefault = !args.maxSeqGiven;
  if (args.maxSeq == "auto") {
    options.maxSeqAuto = true;
  } else {
    size_t used = 0;
    try {
      options.maxSeq = std::stoull(args.maxSeq, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used == 0 || used != args.maxSeq.size() || args.maxSeq[0] == '-')
      fail("--max-seq: expected a number of positions or auto, got '" + args.maxSeq + "'");
  }
  options.maxStepTokens = args.maxStepTokens;
  options.weights = args.weights == "f32"    ? hetc::compiler::WeightFormat::F32
                    : args.weights == "int8" ? hetc::compiler::WeightFormat::INT8
                    : args.weights == "int4" ? hetc::compiler::WeightFormat::INT4
                                             : hetc::compiler::WeightFormat::BF16;
  options.groupSize = args.groupSize;
  options.int4Symmetric = args.int4Symmetric;
  if (!args.lmHead.empty())
    options.lmHead = args.lmHead == "f32"    ? hetc::compiler::WeightFormat::F32
                     : args.lmHead == "int8" ? hetc::compiler::WeightFormat::INT8
                     : args.lmHead == "int4" ? hetc::compiler::WeightFormat::INT4
                                             : hetc::compiler::WeightFormat::BF16;
  if (!args.kv.empty())
    options.kv = args.kv == "f32"    ? hetc::compiler::KvFormat::F32
                 : args.kv == "int8" ? hetc::compiler::KvFormat::INT8
                                     : hetc::compiler::KvFormat::BF16;
  options.verbose = args.verbose;
  options.explain = args.explain;
  options.tokenizer = args.tokenizer;
  check(hetc::compiler::compileOnnxToPlan(options));
  return 0;
#else
  (void)args;
  fail("this build of hetc has no compiler (configure with -DHETC_BUILD_COMPILER=ON); it can "
       "run and inspect plans");
#endif
}

int runTool(int argc, char **argv) {
  CLI::App app{"hetc: ahead-of-time compiler and runtime for Llama-family inference on CPUs"};
  app.name("hetc");
  app.require_subcommand(1);

  CompileArguments compileArgs;
  CLI::App *compile = app.add_subcommand("compile", "Compile an ONNX model into a plan file");
  compile->add_option("model", compileArgs.onnxPath, "ONNX model")->required();
  compile->add_option("-o,--output", compileArgs.outputPath, "Plan file to write")->required();
  compile
      ->add_option("--target", compileArgs.target,
                   "Target machine: host (this machine's CPU alone), a name from hetc targets, "
                   "or a .json target file; the plan records each op's device and each tensor's "
                   "memory tier on it")
      ->capture_default_str();
  compile->add_flag("--no-resident", compileArgs.noResident,
                    "Keep no decoder layers resident in spare GPU memory (no LIA Optimization-1)");
  compile->add_option("--max-batch", compileArgs.maxBatch, "Sequence slots (B_max)")
      ->capture_default_str();
  compile
      ->add_option("--max-seq", compileArgs.maxSeq,
                   "Positions per sequence (S_max), or auto: the largest that fits in 90% of the "
                   "available memory")
      ->capture_default_str();
  compile
      ->add_option("--max-step-tokens", compileArgs.maxStepTokens,
                   "Tokens one step processes (prefill chunk)")
      ->capture_default_str();
  compile
      ->add_option("--weights", compileArgs.weights,
                   "Linear and lm_head weights: bf16 (packed for the BF16 kernels), int8 (the "
                   "linears but the lm_head with a scale per output column), int4 (the same in 4 "
                   "bits, a scale and zero point per output column and --group-size k) or f32 "
                   "(exact); with int8 and int4 the lm_head stays bf16 unless --lm-head says")
      ->check(CLI::IsMember({"bf16", "int8", "int4", "f32"}))
      ->capture_default_str();
  compile
      ->add_option("--group-size", compileArgs.groupSize,
                   "With --weights int4 or --lm-head int4: k per scale and zero point (16, 32, "
                   "64 or 128: 6.5, "
                   "5.25, 4.625 or 4.3125 bits a weight with the scales and zero points)")
      ->check(CLI::IsMember({16u, 32u, 64u, 128u}))
      ->capture_default_str();
  compile
      ->add_option("--lm-head", compileArgs.lmHead,
                   "lm_head weights, and a tied embedding table's: bf16, int8 (a scale per vocab "
                   "row), int4 (--group-size, --int4-symmetric) or f32; default: bf16, f32 with "
                   "--weights f32. An lm_head imported in 4 or 8 bits keeps them")
      ->check(CLI::IsMember({"bf16", "int8", "int4", "f32"}));
  compile->add_flag("--int4-symmetric", compileArgs.int4Symmetric,
                    "With --weights int4 or --lm-head int4: symmetric groups (scale max|w|/7, "
                    "zero point 8) instead of fitting each group's range");
  compile
      ->add_option("--kv", compileArgs.kv,
                   "KV cache elements: bf16 (half the bytes per position), int8 (a scale per "
                   "head and position, about half of bf16's bytes) or f32 (exact); default: bf16 "
                   "with --weights bf16, int8 or int4, f32 with --weights f32")
      ->check(CLI::IsMember({"bf16", "int8", "f32"}));
  compile->add_flag("--verbose", compileArgs.verbose, "Print the IR after each stage to stderr");
  compile->add_option("--tokenizer", compileArgs.tokenizer,
                      "tokenizer.json, SentencePiece .model, or their directory (tokenizer.json "
                      "first) to pack into the plan; default: the one beside the model, when "
                      "there is one");
  compile->add_flag("--explain", compileArgs.explain,
                    "Print which ONNX nodes became which LLM op (with its parameters and "
                    "fusions) to stdout");

  RunArguments runArgs;
  CLI::App *run = app.add_subcommand(
      "run", "Generate (greedily, or sampled with --temperature) from text or token-id prompts");
  run->add_option("plan", runArgs.planPath, "Plan file")->required();
  run->add_option("--prompt-ids", runArgs.promptIds,
                  "Comma-separated token ids of one prompt; repeat for a batch")
      ->allow_extra_args(false);
  run->add_option("--prompt", runArgs.promptTexts,
                  "The text of one prompt, encoded by the plan's tokenizer; repeat for a batch. "
                  "Prints the generated text; stops at the tokenizer's end of sequence")
      ->allow_extra_args(false);
  run->add_option("--prompt-file", runArgs.promptFiles,
                  "A file whose whole content is one text prompt; repeat for a batch")
      ->allow_extra_args(false);
  run->add_option("--max-new", runArgs.maxNew, "Tokens to generate per prompt")
      ->capture_default_str();
  run->add_option("--logits-out", runArgs.logitsOut,
                  "Write the logits as float32 .npy of shape (prompts, max_new, vocab)");
  run->add_option("--arrive-at-step", runArgs.arriveAtStep,
                  "One per --prompt-ids: the step its sequence joins the running batch (sequences "
                  "join and leave between steps; more prompts than --max-batch wait for a slot)")
      ->allow_extra_args(false);
  run->add_option("--session", runArgs.session,
                  "Continue the one sequence kept in this file (started when it does not exist) "
                  "and save it back with the prompt and generated ids")
      ->allow_extra_args(false);
  hetc::tool::addEngineOptions(*run, runArgs.threads, runArgs.noPin, runArgs.device);
  run->add_flag("--portable-kernels", runArgs.portableKernels,
                "The CPU's portable row-wise and attention kernels (plain C++), whose bits the "
                "software device (--device sim) gives too, instead of the host's fastest");
  run->add_flag("--verbose", runArgs.verbose, "Threads, arena sizes and timings on stderr");
  runArgs.sampling.addTo(*run);
  run->add_option("--stop", runArgs.stops,
                  "End a sequence when its text holds this string, printed without it; repeat "
                  "for several (needs the plan's tokenizer)")
      ->allow_extra_args(false);

  TokenizeArguments tokenizeArgs;
  CLI::App *tokenize =
      app.add_subcommand("tokenize", "Text to token ids, or ids to text, by the plan's tokenizer");
  tokenize->add_option("plan", tokenizeArgs.planPath, "Plan file")->required();
  CLI::Option *textOption =
      tokenize->add_option("--text", tokenizeArgs.text, "Text: prints its ids, comma-separated");
  CLI::Option *idsOption =
      tokenize->add_option("--ids", tokenizeArgs.ids, "Comma-separated ids: prints their text");
  textOption->excludes(idsOption);
  tokenize->add_flag("--no-special", tokenizeArgs.noSpecial,
                     "With --text: without the special tokens the tokenizer adds (BOS)");
  tokenize->add_flag("--special", tokenizeArgs.special,
                     "With --ids: write special tokens (BOS, EOS) as text instead of leaving "
                     "them out");

  std::string inspectPath;
  bool inspectJson = false;
  CLI::App *inspect = app.add_subcommand("inspect", "Show what the compiler decided");
  inspect->add_option("plan", inspectPath, "Plan file")->required();
  inspect->add_flag("--json", inspectJson, "One JSON object instead of text");

  std::string sessionPath;
  CLI::App *session = app.add_subcommand("session", "Session files of hetc run --session");
  session->require_subcommand(1);
  CLI::App *sessionShow = session->add_subcommand("show", "Show a session file's header and ids");
  sessionShow->add_option("file", sessionPath, "Session file")->required();

  hetc::tool::ChatArguments chatArgs;
  CLI::App *chat = app.add_subcommand(
      "chat", "A conversation on one sequence: user messages from stdin, one a line");
  hetc::tool::addChatOptions(*chat, chatArgs);
  hetc::tool::ServeArguments serveArgs;
  CLI::App *serve = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP: completions and chat, streamed, with continuous batching");
  hetc::tool::addServeOptions(*serve, serveArgs);

  hetc::tool::BenchArguments benchArgs;
  CLI::App *bench = app.add_subcommand(
      "bench", "Decode throughput against the read bandwidth measured in the same run");
  hetc::tool::addBenchOptions(*bench, benchArgs);

  hetc::tool::BenchServeArguments benchServeArgs;
  CLI::App *benchServe = app.add_subcommand(
      "bench-serve", "Serving benchmark: streamed completions from hetc serve at each concurrency");
  hetc::tool::addBenchServeOptions(*benchServe, benchServeArgs);

  hetc::tool::KlDivergenceArguments klArgs;
  CLI::App *kl = app.add_subcommand(
      "kl-divergence", "How far a plan's next-token distributions are from a base plan's on the "
                       "same ids: KL divergence and top-1 agreement");
  hetc::tool::addKlDivergenceOptions(*kl, klArgs);

#ifdef HETC_WITH_COMPILER
  hetc::tool::PlanArguments planArgs;
  CLI::App *plan = app.add_subcommand(
      "plan", "Which device computes each sublayer of a model on a target (no weights needed)");
  hetc::tool::addPlanOptions(*plan, planArgs);
  hetc::tool::TargetsArguments targetsArgs;
  CLI::App *targets = app.add_subcommand("targets", "The target machines the cost model knows");
  hetc::tool::addTargetsOptions(*targets, targetsArgs);
  hetc::tool::CalibrateArguments calibrateArgs;
  CLI::App *calibrate = app.add_subcommand(
      "calibrate", "Measure this machine (read bandwidth, BF16 matmul throughput per thread "
                   "count) and write it as the target 'host'");
  hetc::tool::addCalibrateOptions(*calibrate, calibrateArgs);
#endif

  // CLI11 would only say that a subcommand is required.
  const std::string command = argc > 1 ? argv[1] : "";
#ifndef HETC_WITH_COMPILER
  if (command == "plan" || command == "targets" || command == "calibrate")
    fail("this build of hetc has no compiler (configure with -DHETC_BUILD_COMPILER=ON); it can "
         "run and inspect plans");
#endif
  if (!command.empty() && command[0] != '-' && command != "compile" && command != "run" &&
      command != "chat" && command != "serve" && command != "inspect" && command != "bench" &&
      command != "session" && command != "plan" && command != "targets" && command != "calibrate" &&
      command != "tokenize" && command != "bench-serve" && command != "kl-divergence")
    fail(std::string("unknown command '") + argv[1] +
         "' (expected compile, run, chat, serve, tokenize, bench, bench-serve, kl-divergence, "
         "inspect, session, plan, targets or calibrate)");

  if (command == "session" && argc == 2)
    fail("session: expected a subcommand: show FILE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &error) {
    if (error.get_exit_code() == 0)
      return app.exit(error); // --help
    fail(error.what());
  }

  if (compile->parsed()) {
    compileArgs.maxSeqGiven = compile->count("--max-seq") > 0;
    return compileCommand(compileArgs);
  }
  if (run->parsed())
    return runCommand(runArgs);
  if (tokenize->parsed()) {
    if (tokenizeArgs.ids.empty() && textOption->count() == 0)
      fail("tokenize: give --text TEXT or --ids IDS");
    return tokenizeCommand(tokenizeArgs);
  }
  if (chat->parsed())
    return hetc::tool::chatCommand(chatArgs);
  if (serve->parsed())
    return hetc::tool::serveCommand(serveArgs);
  if (bench->parsed())
    return hetc::tool::benchCommand(benchArgs);
  if (benchServe->parsed())
    return hetc::tool::benchServeCommand(benchServeArgs);
  if (kl->parsed())
    return hetc::tool::klDivergenceCommand(klArgs);
  if (sessionShow->parsed())
    return sessionShowCommand(sessionPath);
#ifdef HETC_WITH_COMPILER
  if (plan->parsed())
    return hetc::tool::planCommand(planArgs);
  if (targets->parsed())
    return hetc::tool::targetsCommand(targetsArgs);
  if (calibrate->parsed())
    return hetc::tool::calibrateCommand(calibrateArgs);
#endif
  return inspectCommand(inspectPath, inspectJson);
}

} // namespace

int main(int argc, char **argv) {
  try {
    return runTool(argc, argv);
  } catch (const std::bad_alloc &) {
    std::cerr << "hetc: error: out of memory\n";
  } catch (const std::exception &error) {
    std::cerr << "hetc: error: " << error.what() << '\n';
  }
  return 1;
}
