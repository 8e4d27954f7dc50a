// The PyTorch reference of `hetc bench --compare-torch`: models/bench_torch.py, kept running
// beside the benchmark so that each of its points is timed right after hetc's own.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>

namespace hetc::tool {

struct TorchReferenceOptions {
  std::string python;   // the interpreter (a path, or a name looked up in PATH)
  std::string script;   // models/bench_torch.py
  std::string modelDir; // the directory models/export.py wrote
  unsigned threads = 0;
  std::string dtype;  // "bf16" or "f32"
  std::string expect; // "layers=16,kv_heads=8,...": what the plan says the model is
};

class TorchReference {
public:
  // Starts the script and reads its first line. Throws std::runtime_error with one line when the
  // interpreter or the script cannot run, torch is missing, or the model does not match.
  static std::unique_ptr<TorchReference> start(const TorchReferenceOptions &options);
  ~TorchReference(); // closes the script's input and waits for it
  TorchReference(const TorchReference &) = delete;
  TorchReference &operator=(const TorchReference &) = delete;

  // The script's first line: {"ready": true, "torch": ..., "dtype": ..., "threads": ...}.
  const nlohmann::json &setup() const { return setup_; }
  // Times `gen` decode steps at `context` with `batch` sequences; the script's answer, holding
  // "ms_per_token", or "skipped" or "error" with the reason. Throws when the script is gone.
  nlohmann::json measure(uint64_t context, uint32_t batch, uint32_t gen);

private:
  TorchReference() = default;
  nlohmann::json readAnswer(const char *waitingFor);

  pid_t pid_ = -1;
  int toScript_ = -1;
  std::FILE *fromScript_ = nullptr;
  std::string script_;
  nlohmann::json setup_;
};

} // namespace hetc::tool
