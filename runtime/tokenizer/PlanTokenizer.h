// The tokenizer a plan packs (hplan.fbs TokenizerDef, schema 1.11), parsed once when a command
// that turns text into ids or ids into text loads the plan.
#pragma once

#include "runtime/format/Plan.h"
#include "runtime/tokenizer/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace hetc {

struct PlanTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  int32_t bosId = -1;           // -1: none named
  std::vector<int32_t> eosIds;  // generation stops after any of these; empty: none named
  std::string source;           // the tokenizer.json the compiler read
  std::string chatTemplate;     // tokenizer_config.json's chat_template (Jinja); empty: none
};

// Null when the plan packs no tokenizer. A tokenizer.json that does not parse is one message
// naming the plan.
Result<std::unique_ptr<PlanTokenizer>> loadPlanTokenizer(const Plan &plan,
                                                         const std::string &planPath);

} // namespace hetc
