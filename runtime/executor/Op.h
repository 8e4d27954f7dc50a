// One op of a plan as the executor runs it: an implementation chosen once at create() and the
// argument block it was resolved to. A step runs each op as one indirect call per thread,
//
//   op.run(*op.args, step, thread, threads)
//
// and the label a report shows is the one the chosen implementation carries, so it cannot drift
// from what runs. The op kinds and their implementations live in executor/ops/ (one file per
// family of ops, each kind one entry), the kernels they call in codegen/cpu/ by op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace hetc {

// What a step gives every op: its rows and which sequences ask for logits. Filled by
// Engine::step before the phases run; the arrays are sized by the plan's bounds at create().
struct StepRows {
  size_t count = 0;                           // T: rows of the step
  const int32_t *tokens = nullptr;            // [T]
  const uint32_t *positions = nullptr;        // [T]
  const uint32_t *slots = nullptr;            // [T]
  size_t logitsCount = 0;                     // sequences asking for logits
  const uint32_t *logitsSourceRows = nullptr; // [logitsCount] the last row of each
  const uint32_t *logitsOutputRows = nullptr; // [logitsCount] its index within the step
  bool argmax = false;                        // StepOutput::Argmax: no logits rows are written
};

// An activation buffer: row t at data + t * stride (elements), `cols` elements used.
struct Rows {
  float *data = nullptr;
  size_t stride = 0;
  size_t cols = 0;
};

// The kinds a step runs (runtime/format/Ops.def): the plan's kinds, then the executor's own.
enum class OpKind : uint8_t {
#define HETC_PLAN_OP(Kind, ...) Kind,
#define HETC_STEP_OP(Kind) Kind,
#include "runtime/format/Ops.def"
};

// "Linear", "KvAppend", ...: a kind as reports name it.
const char *opKindName(OpKind kind);

// The argument blocks of the implementations derive from this; the engine owns them.
struct OpArgs {
  virtual ~OpArgs() = default;
};

using OpRunFn = void (*)(const OpArgs &args, const StepRows &step, unsigned thread,
                         unsigned threads);

struct ResolvedOp {
  OpKind kind = OpKind::Embedding;
  uint32_t planOp = 0; // index of the op in the plan, for messages and reports
  OpRunFn run = nullptr;
  const OpArgs *args = nullptr;
  const char *kernel = ""; // the chosen implementation's label
  // For grouping ops into phases (Engine::groupPhases): the plan buffers the op reads (up to
  // three, -1 for none) and writes, and, for a linear, its column split.
  int64_t reads[3] = {-1, -1, -1};
  int64_t writes = -1;
  size_t columnTasks = 0; // Linear: task count and grain of its columns; 0 for other kinds
  size_t columnGrain = 0;
  bool fusedSwiGlu = false; // Linear: reads[1] is its swiglu operand, read column by column
};

} // namespace hetc
