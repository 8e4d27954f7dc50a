#include "ChatCommand.h"

#include "CommandSupport.h"

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/kv/Session.h"
#include "runtime/platform/Devices.h"
#include "runtime/serving/ElasticBatch.h"
#include "runtime/tokenizer/ChatTemplate.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hetc::tool {

void addChatOptions(CLI::App &command, ChatArguments &args) {
  command.add_option("plan", args.planPath, "Plan file (with a packed tokenizer)")->required();
  command.add_option("--system", args.system, "The system message");
  command.add_option("--template", args.templateName,
                     "The chat template: " + ChatTemplate::names() +
                         "; default: recognised from the plan's chat_template");
  command.add_option("--session", args.session,
                     "Keep the conversation (its KV cache and ids) in this file after each turn, "
                     "and continue it when the file exists");
  command.add_option("--max-new", args.maxNew, "Ids per reply at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  addEngineOptions(command, args.threads, args.noPin, args.device);
  command.add_flag("--verbose", args.verbose, "The ids each turn feeds, and timings, on stderr");
  args.sampling.addTo(command);
}

int chatCommand(ChatArguments &args) {
  args.sampling.finish();
  const std::shared_ptr<const Plan> plan = loadPlan(args.planPath);
  const std::unique_ptr<PlanTokenizer> packed = requireTokenizer(*plan, args.planPath, "chat");
  const PlanTokenizer &tokenizer = *packed;
  Result<ChatTemplate> chosen = chatTemplateFor(tokenizer, args.templateName, args.planPath);
  if (!chosen)
    fail(chosen.message());
  const ChatTemplate &chat = *chosen;
  const ChatFamily family = chat.family();
  if (!args.system.empty() && !chat.supportsSystem())
    fail(std::string("--system: the ") + ChatTemplate::name(family) +
         " template has no system message");
  // A reply ends at the template's end of turn or at an end of sequence.
  const std::vector<int32_t> stopIds = replyStopIds(tokenizer, chat);
  const int32_t endOfTurn = tokenizer.tokenizer->tokenId(chat.endOfTurn());
  if (args.verbose)
    std::fprintf(stderr, "hetc: chat template %s, end of turn '%s'\n", ChatTemplate::name(family),
                 chat.endOfTurn().c_str());

  const std::unique_ptr<Engine> created =
      createEngine(plan, engineOptions(args.threads, args.noPin), probeGpu(), args.device);
  Engine &engine = *created;

  // The conversation so far: every id fed or generated; the KV cache holds the first `positions`
  // (the last generated id is fed with the next turn).
  std::vector<int32_t> history;
  uint64_t positions = 0;
  if (!args.session.empty() && engine.deviceSteps())
    fail("--session reads and writes the KV cache on the host; it is on the device here "
         "(--device " + args.device + "): use --device cpu");
  if (!args.session.empty()) {
    std::error_code error;
    const bool exists = std::filesystem::exists(args.session, error);
    if (error)
      fail("cannot read session file " + args.session + ": " + error.message());
    if (exists) {
      Result<SessionInfo> restored =
          restoreSession(args.session, engine.plan(), engine.kvCache(), 0);
      if (!restored)
        fail(restored.message());
      history = std::move(restored->history);
      positions = restored->positions;
      if (!args.system.empty() && !history.empty())
        std::fprintf(stderr, "hetc: --system ignored: %s continues a conversation\n",
                     args.session.c_str());
      if (args.verbose)
        std::fprintf(stderr, "hetc: session %s: %llu positions, %zu ids\n", args.session.c_str(),
                     static_cast<unsigned long long>(positions), history.size());
    }
  }

  const bool terminal = isatty(fileno(stdin));
  const uint64_t maxSeq = engine.maxSeq();
  std::string line;
  std::string piece;
  for (;;) {
    if (terminal)
      std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) {
      if (terminal)
        std::fprintf(stderr, "\n"); // after the prompt Ctrl-D leaves
      break;
    }
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line == "/exit")
      break;
    if (line.empty())
      continue;

    const bool firstTurn = history.empty();
    // A reply that ended with the end-of-turn token has it in the sequence already; one cut
    // short, or ended by another end of sequence, gets the template's whole close.
    const bool replyClosed = !firstTurn && endOfTurn >= 0 && history.back() == endOfTurn;
    const std::string delta = chat.turnDelta(firstTurn, args.system, line, replyClosed);
    Result<std::vector<int32_t>> deltaIds = tokenizer.tokenizer->encode(delta, false);
    if (!deltaIds)
      fail(deltaIds.message());

    GenerationRequest request;
    request.prompt.assign(history.begin() + static_cast<std::ptrdiff_t>(positions), history.end());
    request.prompt.insert(request.prompt.end(), deltaIds->begin(), deltaIds->end());
    const uint64_t used = positions + request.prompt.size();
    if (used >= maxSeq)
      fail("the conversation holds " + std::to_string(positions) +
           " positions and this turn adds " + std::to_string(request.prompt.size()) +
           ", leaving no room for a reply in the plan's " + "max-seq of " + std::to_string(maxSeq) +
           ": start a new conversation" +
           (args.session.empty() ? "" : " (" + args.session + " keeps it up to the last reply)"));
    request.maxNew = static_cast<uint32_t>(std::min<uint64_t>(args.maxNew, maxSeq - used));
    request.slot = 0;
    request.start = positions;
    request.stopIds = stopIds;
    // Each turn draws its own stream (the seed plus the ids cached so far: a resumed conversation
    // repeats too); the repetition penalty sees the whole conversation.
    request.sampling = args.sampling.params;
    request.sampling.seed += positions;
    request.context.assign(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(positions));
    if (args.verbose) {
      std::string ids;
      for (int32_t id : *deltaIds)
        ids += (ids.empty() ? "" : ",") + std::to_string(id);
      std::fprintf(stderr, "hetc: turn feeds %zu ids after %llu cached: %s\n",
                   request.prompt.size(), static_cast<unsigned long long>(positions), ids.c_str());
    }
    const uint32_t room = request.maxNew;

    Result<ElasticBatch> batch = ElasticBatch::create(engine, {request});
    if (!batch)
      fail(batch.message());
    DecodeStream stream(*tokenizer.tokenizer);
    batch->onToken([&](size_t, int32_t id) {
      piece.clear();
      stream.push(id, piece);
      std::cout << piece << std::flush;
    });
    if (Status status = batch->run(); !status)
      fail(status.message());
    piece.clear();
    stream.finish(piece);
    std::cout << piece << '\n' << std::flush;
    if (!std::cout)
      fail("cannot write the reply to standard output");

    const std::vector<int32_t> &reply = batch->outcomes()[0].tokens;
    history.insert(history.end(), deltaIds->begin(), deltaIds->end());
    history.insert(history.end(), reply.begin(), reply.end());
    positions = engine.cachedPositions(0);
    if (!args.session.empty())
      if (Status status = saveSession(args.session, engine.plan(), engine.kvCache(), 0, history);
          !status)
        fail(status.message());

    const bool stopped =
        !reply.empty() && std::find(stopIds.begin(), stopIds.end(), reply.back()) != stopIds.end();
    if (!stopped && room < args.maxNew && reply.size() == room) {
      std::fprintf(stderr,
                   "hetc: the conversation reached the plan's max-seq (%llu positions) and "
                   "ends here\n",
                   static_cast<unsigned long long>(maxSeq));
      break;
    }
  }
  return 0;
}

} // namespace hetc::tool
