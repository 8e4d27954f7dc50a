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

// The --threads, --no-pin and --device options of the commands that run an engine.
void addEngineOptions(CLI::App &command, unsigned &threads, bool &noPin, std::string &device);

// Engine options of the commands' --threads and --no-pin.
EngineOptions engineOptions(unsigned threads, bool noPin);

// The engine for `plan` on `device` (--device): cpu; sim, the software device
// (runtime/device/SimDevice.h); cuda, the GPU (fails when there is none or it lacks a kernel the
// plan needs); auto, the GPU when the plan gives it work and this host's can run every op, else
// the CPU, which is said once on stderr with the reason.
std::unique_ptr<Engine> createEngine(std::shared_ptr<const Plan> plan, EngineOptions options,
                                     const GpuProbe &gpu, const std::string &device = "cpu");

// Where the engine's steps run: "cpu", or the device's name (--device).
std::string ranOn(const Engine &engine);
// describePlanDevices, or with a device "every op on <DeviceSteps::describe()>".
std::string describeEngineDevices(const Engine &engine, const GpuProbe &gpu);
// "; run on the CPU here (no split execution)" or "; every op on <device>", after a policy lookup.
std::string policyRanOn(const Engine &engine);

} // namespace hetc::tool
