#include "runtime/tokenizer/PlanTokenizer.h"

namespace hetc {

Result<std::unique_ptr<PlanTokenizer>> loadPlanTokenizer(const Plan &plan,
                                                         const std::string &planPath) {
  const plan::TokenizerDef *def = plan.def().tokenizer();
  if (!def)
    return std::unique_ptr<PlanTokenizer>();
  // The loader has checked that the text is there.
  Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::fromJson(def->tokenizer_json()->str());
  if (!tokenizer)
    return Status::error(planPath + ": the packed " + tokenizer.message());
  auto packed = std::make_unique<PlanTokenizer>();
  packed->tokenizer = std::move(tokenizer.value());
  packed->bosId = def->bos_token_id();
  if (def->eos_token_ids())
    packed->eosIds.assign(def->eos_token_ids()->begin(), def->eos_token_ids()->end());
  packed->source = def->source() ? def->source()->str() : "";
  packed->chatTemplate = def->chat_template() ? def->chat_template()->str() : "";
  return packed;
}

} // namespace hetc
