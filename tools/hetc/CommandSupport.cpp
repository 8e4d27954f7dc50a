#include "CommandSupport.h"

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

void addEngineOptions(CLI::App &command, unsigned &threads, bool &noPin) {
  command.add_option("--threads", threads, "Threads (0 = every core)")->capture_default_str();
  command.add_flag("--no-pin", noPin, "Do not bind threads to cores");
}

EngineOptions engineOptions(unsigned threads, bool noPin) {
  EngineOptions options;
  options.threads = threads;
  options.pin = !noPin;
  options.pinCaller = !noPin;
  return options;
}

std::unique_ptr<Engine> createEngine(std::shared_ptr<const Plan> plan, const EngineOptions &options,
                                     const GpuProbe &gpu) {
  Result<std::unique_ptr<Engine>> created = Engine::create(plan, options);
  if (!created)
    fail(created.message());
  if (const std::string notice = gpuFallbackNotice(*plan, gpu); !notice.empty())
    std::fprintf(stderr, "%s\n", notice.c_str());
  return std::move(created.value());
}

} // namespace hetc::tool
