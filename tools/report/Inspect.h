// What the compiler decided, shown from a loaded plan (`hetc inspect`).
#pragma once

#include <ostream>

namespace hetc {

class Plan;

// Human-readable: header and CPU features against the host, model, bounds, sublayers, ops (with
// their devices per stage), buffers and activation arena, KV layout, tensors (with their tiers),
// the device plan (groups, policies, devices per sublayer and stage, reasons, policy tables, what
// this host runs), segments and task totals.
void printPlanSummary(const Plan &plan, std::ostream &os);

// The same information as one JSON object, for scripts.
void printPlanJson(const Plan &plan, std::ostream &os);

} // namespace hetc
