// A tokenizer packed in a plan (schema 1.11): it loads and encodes; a plan without one loads as
// before; the loader refuses an empty one, bad ids and one in a plan claiming an older schema; a
// tokenizer.json that does not parse is one message naming the plan.
#include "TestPlans.h"

#include "runtime/format/Plan.h"
#include "runtime/tokenizer/PlanTokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hetc {
namespace {

using ::testing::HasSubstr;

const char *kTokenizerJson = R"({
  "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 3, "b": 4, "ab": 5}, "merges": ["a b"]}
})";

class PlanTokenizerTest : public ::testing::Test {
protected:
  // Writes the tiny plan with `tokenizer` (none when null) after `mutate`; returns its path.
  std::string write(std::unique_ptr<plan::TokenizerDefT> tokenizer,
                    const std::function<void(plan::PlanDefT &)> &mutate = {}) {
    test::TinyPlan tiny = test::buildTinyPlan();
    tiny.def.tokenizer = std::move(tokenizer);
    if (mutate)
      mutate(tiny.def);
    const std::string path = dir_.path() + "/plan.hplan";
    EXPECT_TRUE(test::writeTinyPlan(path, tiny).ok());
    return path;
  }

  static std::unique_ptr<plan::TokenizerDefT> packed(const std::string &json) {
    auto def = std::make_unique<plan::TokenizerDefT>();
    def->tokenizer_json = json;
    def->source = "tokenizer.json";
    def->bos_token_id = 1;
    def->eos_token_ids = {2};
    def->chat_template = "{{ messages }}";
    return def;
  }

  test::ScratchDir dir_;
};

TEST_F(PlanTokenizerTest, APackedTokenizerLoadsAndEncodes) {
  const std::string path = write(packed(kTokenizerJson));
  Result<std::unique_ptr<Plan>> plan = Plan::load(path);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ((*plan)->def().tokenizer()->chat_template()->str(), "{{ messages }}");
  Result<std::unique_ptr<PlanTokenizer>> tokenizer = loadPlanTokenizer(**plan, path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  ASSERT_TRUE(*tokenizer);
  EXPECT_EQ((*tokenizer)->bosId, 1);
  EXPECT_EQ((*tokenizer)->eosIds, std::vector<int32_t>{2});
  EXPECT_EQ((*tokenizer)->tokenizer->encode("ab</s>").value(), (std::vector<int32_t>{5, 2}));
}

TEST_F(PlanTokenizerTest, APlanWithoutATokenizerHasNone) {
  const std::string path = write(nullptr);
  Result<std::unique_ptr<Plan>> plan = Plan::load(path);
  ASSERT_TRUE(plan.ok()) << plan.message();
  Result<std::unique_ptr<PlanTokenizer>> tokenizer = loadPlanTokenizer(**plan, path);
  ASSERT_TRUE(tokenizer.ok());
  EXPECT_FALSE(*tokenizer);
}

TEST_F(PlanTokenizerTest, TheLoaderRefusesWhatIsNotATokenizer) {
  auto loadError = [&](std::unique_ptr<plan::TokenizerDefT> tokenizer,
                       const std::function<void(plan::PlanDefT &)> &mutate = {}) {
    Result<std::unique_ptr<Plan>> plan = Plan::load(write(std::move(tokenizer), mutate));
    return plan.ok() ? std::string() : plan.message();
  };
  EXPECT_THAT(loadError(packed("")), HasSubstr("the tokenizer has no tokenizer.json text"));
  auto badEos = packed(kTokenizerJson);
  badEos->eos_token_ids = {-5};
  EXPECT_THAT(loadError(std::move(badEos)),
              HasSubstr("tokenizer eos_token_ids holds -5, which is not an id"));
  auto badBos = packed(kTokenizerJson);
  badBos->bos_token_id = -7;
  EXPECT_THAT(loadError(std::move(badBos)), HasSubstr("tokenizer bos_token_id -7 is not an id"));
  EXPECT_THAT(loadError(packed(kTokenizerJson),
                        [](plan::PlanDefT &def) { def.schema_version = kPlanSchemaMajor << 16 | 10; }),
              HasSubstr("the plan packs a tokenizer, which schema 1.10 does not have (added in 1.11)"));
}

TEST_F(PlanTokenizerTest, ATokenizerThatDoesNotParseIsOneMessageNamingThePlan) {
  const std::string path = write(packed("{\"model\": "));
  Result<std::unique_ptr<Plan>> plan = Plan::load(path);
  ASSERT_TRUE(plan.ok()) << plan.message();
  Result<std::unique_ptr<PlanTokenizer>> tokenizer = loadPlanTokenizer(**plan, path);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.message(), path + ": the packed tokenizer.json: not valid JSON");
}

} // namespace
} // namespace hetc
