// libFuzzer target for the plan loader: every input is refused with a message or loads as a
// plan whose indices and sizes hold, never a crash or an out-of-bounds read.
//
// The input is either a whole plan file (first byte even) or, much more effective, a list of
// byte edits to a valid tiny plan built at start-up (first byte odd): each 4-byte group is a
// 24-bit position and a value; a trailing 1-3 bytes cut the file to a length they encode.
//
// Built by the sanitizer build (tests/fuzz/CMakeLists.txt); tools/fuzz.sh plan_loader SECONDS
// runs it (docs/fuzzing.md).
#include "TestPlans.h"

#include "runtime/format/Plan.h"
#include "tools/report/Inspect.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unistd.h>

namespace {

std::vector<uint8_t> &tinyPlanFile() {
  static std::vector<uint8_t> file;
  return file;
}

void checkLoadedPlan(const hetc::Plan &plan) {
  const auto &def = plan.def();
  std::ostringstream sink;
  // Inspect creates an engine, which zeroes the activation arena: a valid plan may ask for more
  // than the fuzzer's memory limit, so only plans with small arenas are inspected.
  constexpr uint64_t kInspectArenaLimit = uint64_t{256} << 20;
  if (def.activation_arena_size() < kInspectArenaLimit &&
      def.kv_cache()->arena_size() < kInspectArenaLimit) {
    hetc::printPlanSummary(plan, sink);
    hetc::printPlanJson(plan, sink);
  }
  volatile uint8_t sum = 0;
  for (uint32_t t = 0; t < def.tensors()->size(); ++t) {
    const auto *data = static_cast<const uint8_t *>(plan.tensorData(t));
    const uint64_t size = def.segments()->Get(def.tensors()->Get(t)->segment())->size();
    sum = sum + data[0] + data[size - 1];
  }
  for (uint32_t i = 0; i < def.ops()->size(); ++i) {
    const auto *op = def.ops()->Get(i);
    for (const auto *indices : {op->inputs(), op->outputs()})
      for (uint32_t k = 0; indices && k < indices->size(); ++k)
        if (indices->Get(k) >= def.buffers()->size())
          std::abort();
    for (uint32_t k = 0; op->weights() && k < op->weights()->size(); ++k)
      if (op->weights()->Get(k) >= def.tensors()->size())
        std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  hetc::test::TinyPlanShape shape;
  shape.layers = 2;
  hetc::test::TinyPlan tiny = hetc::test::buildTinyPlan(shape);
  char path[] = "/tmp/hetc-fuzz-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0)
    std::abort();
  ::close(fd);
  if (!hetc::test::writeTinyPlan(path, tiny).ok())
    std::abort();
  tinyPlanFile() = hetc::test::readFileBytes(path);
  ::unlink(path);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> file;
  if (size > 0 && (data[0] & 1)) {
    file = tinyPlanFile();
    size_t i = 1;
    for (; i + 4 <= size; i += 4) {
      const size_t position = (data[i] | data[i + 1] << 8 | data[i + 2] << 16) % file.size();
      file[position] = data[i + 3];
    }
    if (i < size) {
      size_t cut = 0;
      for (; i < size; ++i)
        cut = cut << 8 | data[i];
      file.resize(cut % file.size());
    }
  } else {
    file.assign(data, data + size);
  }
  // An exact-size heap copy: reading past the end is an AddressSanitizer error.
  auto loaded = hetc::Plan::fromBytes(file.data(), file.size());
  if (loaded.ok())
    checkLoadedPlan(**loaded);
  else if (loaded.message().empty())
    std::abort();
  return 0;
}
