// What the compiler decided, shown from a loaded plan (`hetc inspect`).
#pragma once

#include <ostream>

namespace hetc {

class Plan;

// Human-readable: header and CPU features against the host, model, bounds, sublayers, ops,
// buffers and activation arena, KV layout, tensors, segments and task totals.
void printPlanSummary(const Plan &plan, std::ostream &os);

// The same information as one JSON object, for scripts.
void printPlanJson(const Plan &plan, std::ostream &os);

} // namespace hetc
