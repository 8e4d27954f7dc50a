#include "CommandSupport.h"

#include "runtime/device/DeviceLoader.h"
#include "runtime/device/SimDevice.h"
#include "runtime/executor/DeviceSteps.h"

#include <cstdio>
#include <stdexcept>

namespace hetc::tool {

void fail(const std::string &message) { throw std::runtime_error(message); }

std::shared_ptr<const Plan> loadPlan(const std::string &path) {
  Result<std::unique_ptr<Plan>> plan = Plan::load(path);
  if (!plan)
    fail(plan.message());
  return std::shared_ptr<const Plan>(std::move(plan.value()));
}

std::unique_ptr<PlanTokenizer> requireTokenizer(const Plan &plan, const std::string &planPath,
                                                const std::string &why) {
  Result<std::unique_ptr<PlanTokenizer>> tokenizer = loadPlanTokenizer(plan, planPath);
  if (!tokenizer)
    fail(tokenizer.message());
  if (!*tokenizer)
    fail(planPath + " packs no tokenizer, which " + why +
         " needs (compile with --tokenizer, or put tokenizer.json or tokenizer.model "
         "beside the model)");
  return std::move(tokenizer.value());
}

void addEngineOptions(CLI::App &command, unsigned &threads, bool &noPin, std::string &device) {
  command.add_option("--threads", threads, "Threads (0 = every core)")->capture_default_str();
  command.add_flag("--no-pin", noPin, "Do not bind threads to cores");
  command
      .add_option("--device", device,
                  "Where the steps run: auto (the plan's GPU where this host can run it, else "
                  "the CPU), cpu, cuda, or sim (the software device, for testing GPU plans)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "sim"}))
      ->capture_default_str();
}

EngineOptions engineOptions(unsigned threads, bool noPin) {
  EngineOptions options;
  options.threads = threads;
  options.pin = !noPin;
  options.pinCaller = !noPin;
  return options;
}

std::unique_ptr<Engine> createEngine(std::shared_ptr<const Plan> plan, EngineOptions options,
                                     const GpuProbe &gpu, const std::string &device) {
  if (device == "sim" || device == "cuda") {
    if (device == "sim") {
      options.device = std::make_shared<device::SimDevice>();
    } else {
      Result<std::unique_ptr<device::Device>> cuda = device::openCudaDevice();
      if (!cuda)
        fail("--device cuda: " + cuda.message());
      options.device = std::move(cuda.value());
    }
    Result<std::unique_ptr<Engine>> created = Engine::create(plan, options);
    if (!created)
      fail("--device " + device + ": " + created.message());
    return std::move(created.value());
  }
  // auto: the GPU only where it runs every op of the plan; else the CPU, and why.
  std::string why;
  if (device == "auto" && countPlanDevices(*plan).anyGpu()) {
    Result<std::unique_ptr<device::Device>> cuda = device::openCudaDevice();
    if (cuda) {
      EngineOptions onGpu = options;
      onGpu.device = std::move(cuda.value());
      Result<std::unique_ptr<Engine>> created = Engine::create(plan, onGpu);
      if (created)
        return std::move(created.value());
      why = created.message();
    }
  }
  Result<std::unique_ptr<Engine>> created = Engine::create(plan, options);
  if (!created)
    fail(created.message());
  if (const std::string notice = gpuFallbackNotice(*plan, gpu); !notice.empty())
    std::fprintf(stderr, "%s%s\n", notice.c_str(), why.empty() ? "" : ("; " + why).c_str());
  return std::move(created.value());
}

std::string ranOn(const Engine &engine) {
  return engine.deviceSteps() ? engine.deviceSteps()->device().name() : "cpu";
}

std::string describeEngineDevices(const Engine &engine, const GpuProbe &gpu) {
  if (!engine.deviceSteps())
    return describePlanDevices(engine.plan(), gpu);
  return "every op on " + engine.deviceSteps()->describe();
}

std::string policyRanOn(const Engine &engine) {
  return engine.deviceSteps() ? "; every op on " + engine.deviceSteps()->device().name()
                              : "; run on the CPU here (no split execution)";
}

// "5,17,42" -> {5, 17, 42}. Ids are non-negative decimal integers that fit in int32; whether they
// are inside the vocabulary is checked against the plan later.
std::vector<int32_t> parsePromptIds(const std::string &text, const std::string &option) {
  const std::string quoted = option + " '" + text + "'";
  if (text.empty())
    fail(quoted + " is empty");
  std::vector<int32_t> ids;
  size_t itemStart = 0;
  for (size_t item = 1;; ++item) {
    size_t comma = text.find(',', itemStart);
    std::string piece =
        text.substr(itemStart, comma == std::string::npos ? std::string::npos : comma - itemStart);
    const size_t first = piece.find_first_not_of(' ');
    const size_t last = piece.find_last_not_of(' ');
    piece = first == std::string::npos ? "" : piece.substr(first, last - first + 1);
    if (piece.empty())
      fail(quoted + ": id " + std::to_string(item) + " is empty");
    uint64_t value = 0;
    for (char c : piece) {
      if (c < '0' || c > '9')
        fail(quoted + ": '" + piece + "' is not a token id (a non-negative integer)");
      value = value * 10 + static_cast<uint64_t>(c - '0');
      if (value > INT32_MAX)
        fail(quoted + ": '" + piece + "' is too large for a token id");
    }
    ids.push_back(static_cast<int32_t>(value));
    if (comma == std::string::npos)
      break;
    itemStart = comma + 1;
  }
  return ids;
}

} // namespace hetc::tool
