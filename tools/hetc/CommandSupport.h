// What the commands share: the one-line failure, and opening a plan, its tokenizer and an engine.
#pragma once

#include "runtime/executor/Engine.h"
#include "runtime/format/Plan.h"
#include "runtime/platform/Devices.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetc::tool {

// Ends the command: main prints "hetc: error: " and the message, and exits 1.
[[noreturn]] void fail(const std::string &message);

std::shared_ptr<const Plan> loadPlan(const std::string &path);

// "5,17,42" -> {5, 17, 42}: non-negative decimal ids that fit in int32 (whether they are inside
// the vocabulary is the plan's to check); anything else fails naming `option`.
std::vector<int32_t> parsePromptIds(const std::string &text,
                                    const std::string &option = "--prompt-ids");

// The plan's tokenizer, which `why` (a command or flag) needs: refused when the plan packs none.
std::unique_ptr<PlanTokenizer> requireTokenizer(const Plan &plan, const std::string &planPath,
                                                const std::string &why);

// The --threads and --no-pin options of the commands that run an engine.
void addEngineOptions(CLI::App &command, unsigned &threads, bool &noPin);

// Engine options of the commands' --threads and --no-pin.
EngineOptions engineOptions(unsigned threads, bool noPin);

// The engine for `plan`. A plan for a GPU target runs on the CPU here, which is said once on
// stderr.
std::unique_ptr<Engine> createEngine(std::shared_ptr<const Plan> plan, const EngineOptions &options,
                                     const GpuProbe &gpu);

} // namespace hetc::tool
