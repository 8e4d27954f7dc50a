// Sessions: a slot's KV cache saved to a file and restored into any slot of another engine
// continues the sequence exactly as one uninterrupted run would, without recomputing it; every
// kind of bad file is refused with its own message.
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include "runtime/executor/Engine.h"
#include "runtime/kv/Session.h"
#include "runtime/serving/ElasticBatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace hetc {
namespace {

Status save(const Engine &engine, const std::string &path, uint32_t slot,
            const std::vector<int32_t> &history) {
  return saveSession(path, engine.plan(), engine.kvCache(), slot, history);
}

Result<SessionInfo> restore(Engine &engine, const std::string &path, uint32_t slot) {
  return restoreSession(path, engine.plan(), engine.kvCache(), slot);
}

using test::largerShape;
using test::LoadedTinyPlan;
using test::promptOf;
using test::TinyPlanShape;

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::string hexFingerprint(const Plan &plan) {
  char text[20];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(sessionFingerprint(plan)));
  return text;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs one request on `engine` (a named slot continuing `start` cached positions, or any slot).
struct Continued {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  uint64_t prefillTokens = 0;
  uint32_t slot = 0;
};
Continued runRequest(Engine &engine, std::vector<int32_t> prompt, uint32_t maxNew, uint32_t slot,
                     uint64_t start) {
  Continued out;
  out.logits.assign(static_cast<size_t>(maxNew) * engine.vocab(), std::nanf(""));
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.maxNew = maxNew;
  request.slot = slot;
  request.start = start;
  request.logits = out.logits.data();
  Result<ElasticBatch> batch = ElasticBatch::create(engine, {request});
  EXPECT_TRUE(batch.ok()) << (batch.ok() ? "" : batch.message());
  if (!batch.ok())
    return out;
  Status ran = batch->run();
  EXPECT_TRUE(ran.ok()) << ran.message();
  out.tokens = batch->outcomes()[0].tokens;
  out.prefillTokens = batch->stats().prefillTokens;
  out.slot = batch->outcomes()[0].slot;
  return out;
}

// The plan of `shape` with each KV position row padded to `posStride` elements.
std::shared_ptr<const Plan> planWithPaddedKvRows(const TinyPlanShape &shape, uint64_t posStride,
                                                 test::ScratchDir &dir) {
  test::TinyPlan tiny = test::buildTinyPlan(shape);
  test::layOutKvCache(*tiny.def.kv_cache, posStride);
  const std::string path = dir.file("padded-kv.hplan");
  Status written = test::writeTinyPlan(path, tiny);
  EXPECT_TRUE(written.ok()) << written.message();
  Result<std::unique_ptr<Plan>> loaded = Plan::load(path);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.message());
  return loaded.ok() ? std::shared_ptr<const Plan>(std::move(loaded.value())) : nullptr;
}

void checkRestoredDialogue(plan::DTypeDef kvDtype);

// Three rounds of a dialogue, each in a fresh engine restored from the file the last one saved,
// in a different slot (and the last on a plan with other bounds and padded KV rows), equal one
// uninterrupted greedy run on the whole history bit for bit, and prefill only the new ids; with
// each KV cache dtype (an INT8 cache's rows are only right with their scales).
TEST(SessionTest, RestoredDialogueEqualsOneRunOverTheWholeHistory) {
  for (plan::DTypeDef kvDtype : {plan::DTypeDef::F32, plan::DTypeDef::BF16, plan::DTypeDef::INT8}) {
    SCOPED_TRACE(std::string(plan::EnumNameDTypeDef(kvDtype)) + " KV");
    checkRestoredDialogue(kvDtype);
  }
}

void checkRestoredDialogue(plan::DTypeDef kvDtype) {
  TinyPlanShape shape = largerShape(); // max_batch 3, max_seq 96
  shape.kv_dtype = kvDtype;
  LoadedTinyPlan loaded(shape);
  ASSERT_TRUE(loaded.plan);
  TinyPlanShape otherBounds = shape;
  otherBounds.max_batch = 2;
  otherBounds.max_seq = 80;
  otherBounds.max_step_tokens = 5;
  test::ScratchDir dir;
  // A BF16 or INT8 cache's blocks have no padding between rows: its plan differs in bounds only.
  const uint64_t posStride = shape.head_dim + (kvInBlocks(kvDtype) ? 0 : 8);
  std::shared_ptr<const Plan> padded = planWithPaddedKvRows(otherBounds, posStride, dir);
  ASSERT_TRUE(padded);
  ASSERT_EQ(sessionFingerprint(*padded), sessionFingerprint(*loaded.plan));

  const int32_t vocab = static_cast<int32_t>(shape.vocab);
  const std::vector<std::vector<int32_t>> prompts = {promptOf(9, 4, vocab), promptOf(5, 20, vocab),
                                                     promptOf(17, 33, vocab)};
  const uint32_t maxNew[] = {6, 4, 7};
  const uint32_t slots[] = {2, 0, 1};
  const std::string path = dir.file("dialogue.session");
  std::vector<int32_t> history;
  for (size_t round = 0; round < prompts.size(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::unique_ptr<Engine> engine =
        round == 2 ? test::createEngine(padded, EngineOptions{2, false}) : loaded.engine(2);
    ASSERT_TRUE(engine);
    uint64_t positions = 0;
    if (round > 0) {
      Result<SessionInfo> restored = restore(*engine, path, slots[round]);
      ASSERT_TRUE(restored.ok()) << restored.message();
      EXPECT_EQ(restored->history, history);
      positions = restored->positions;
      EXPECT_EQ(positions, history.size() - 1) << "the last generated id is not in the cache yet";
      EXPECT_EQ(engine->cachedPositions(slots[round]), positions);
    }
    // The ids past the cached positions, then the new prompt.
    const std::vector<int32_t> feed =
        concat(std::vector<int32_t>(history.begin() + positions, history.end()), prompts[round]);
    const Continued got = runRequest(*engine, feed, maxNew[round], slots[round], positions);
    EXPECT_EQ(got.slot, slots[round]);
    EXPECT_EQ(got.prefillTokens, feed.size()) << "the history was recomputed";

    // The same history from scratch in one run.
    std::unique_ptr<Engine> fresh = loaded.engine(1);
    ASSERT_TRUE(fresh);
    const Continued want = runRequest(*fresh, concat(history, prompts[round]), maxNew[round],
                                      GenerationRequest::kAnySlot, 0);
    EXPECT_EQ(got.tokens, want.tokens);
    ASSERT_EQ(got.logits.size(), want.logits.size());
    EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), got.logits.size() * sizeof(float)),
              0);

    history = concat(concat(history, prompts[round]), got.tokens);
    Status saved = save(*engine, path, slots[round], history);
    ASSERT_TRUE(saved.ok()) << saved.message();
  }
  Result<SessionInfo> info = readSessionInfo(path);
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_EQ(info->history, history);
  EXPECT_EQ(info->positions, history.size() - 1);
  EXPECT_EQ(info->kvDtype, kvDtype);
  EXPECT_EQ(info->kvBytes, info->positions * 2 * shape.layers * shape.kv_heads *
                               kvRowBytes(kvDtype, shape.head_dim));
  EXPECT_EQ(info->fileBytes, kSessionHeaderBytes + history.size() * 4 + info->kvBytes);
  // Only the session file is left: the temporary files were renamed over it.
  size_t files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path()))
    files += entry.path().filename().string().rfind("dialogue.session", 0) == 0;
  EXPECT_EQ(files, 1u);
}

class SessionFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(loaded.plan);
    engine = loaded.engine(1);
    ASSERT_TRUE(engine);
    const std::vector<int32_t> prompt = promptOf(12, 5, static_cast<int32_t>(largerShape().vocab));
    const Continued run = runRequest(*engine, prompt, 5, 1, 0);
    history = concat(prompt, run.tokens);
    path = dir.file("good.session");
    Status saved = save(*engine, path, 1, history);
    ASSERT_TRUE(saved.ok()) << saved.message();
    bytes = readBytes(path);
    ASSERT_EQ(bytes.size(),
              kSessionHeaderBytes + history.size() * 4 + 16 * 2 * 2 * 2 * 24 * sizeof(float));
  }

  // The message restoring `fileBytes` into slot 0 of `into` fails with.
  std::string restoreError(const std::vector<uint8_t> &fileBytes, Engine *into = nullptr) {
    const std::string bad = dir.file("bad.session");
    writeBytes(bad, fileBytes);
    Result<SessionInfo> restored = restore(into ? *into : *engine, bad, 0);
    EXPECT_FALSE(restored.ok());
    return restored.ok() ? std::string() : restored.message();
  }

  LoadedTinyPlan loaded{largerShape()};
  std::unique_ptr<Engine> engine;
  test::ScratchDir dir;
  std::vector<int32_t> history;
  std::string path;
  std::vector<uint8_t> bytes;
};

TEST_F(SessionFileTest, EachBadFileGetsItsOwnMessage) {
  const std::string bad = dir.file("bad.session");
  const std::string name = "session file " + bad;
  const size_t kvBytes = 16 * 2 * 2 * 2 * 24 * sizeof(float);

  EXPECT_EQ(restoreError(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 40)),
            name + " is truncated: 40 bytes, shorter than the 80-byte header");
  EXPECT_EQ(restoreError(std::vector<uint8_t>(bytes.begin(), bytes.end() - 100)),
            name + " is truncated: " + std::to_string(bytes.size() - 100) +
                " bytes, its header needs " + std::to_string(bytes.size()) + " for " +
                std::to_string(history.size()) +
                " history tokens and 16 positions of 2 layers x 2 KV heads x head_dim 24, F32");
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_EQ(restoreError(longer), name + " has " + std::to_string(bytes.size() + 1) + " bytes, " +
                                      std::to_string(bytes.size()) + " expected for " +
                                      std::to_string(history.size()) +
                                      " history tokens and 16 positions of 2 layers x 2 KV heads "
                                      "x head_dim 24, F32");
  std::vector<uint8_t> magic = bytes;
  magic[0] ^= 0x20;
  EXPECT_EQ(restoreError(magic), bad + " is not a hetc session file (no HETCSESS magic)");
  std::vector<uint8_t> version = bytes;
  version[8] = 2;
  EXPECT_EQ(restoreError(version), name + " has format version 2; this runtime reads version 1");
  std::vector<uint8_t> dtype = bytes;
  dtype[40] = 7;
  EXPECT_EQ(restoreError(dtype), name + " has a corrupt header (KV dtype 7 with 4-byte elements)");
  std::vector<uint8_t> positions = bytes;
  positions[24] = static_cast<uint8_t>(history.size() + 1); // more positions than history ids
  EXPECT_EQ(restoreError(positions), name + " has a corrupt header (" +
                                         std::to_string(history.size()) + " history tokens for " +
                                         std::to_string(history.size() + 1) + " positions)");
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() - kvBytes / 2] ^= 1; // one bit of a V row
  EXPECT_EQ(restoreError(flipped), name + " is corrupted (checksum mismatch)");
  EXPECT_EQ(engine->cachedPositions(0), 0u) << "a slot whose rows failed holds nothing";
  EXPECT_EQ(restore(*engine, dir.file("missing.session"), 0).message(),
            "cannot open session file " + dir.file("missing.session") +
                ": No such file or directory");
  EXPECT_EQ(restore(*engine, path, 3).message(),
            "cannot restore into slot 3: the plan's --max-batch is 3 (slots 0..2)");
  Result<SessionInfo> notAFile = readSessionInfo(dir.path());
  ASSERT_FALSE(notAFile.ok());
  EXPECT_EQ(notAFile.message(), "session file " + dir.path() + " is not a regular file");
}

TEST_F(SessionFileTest, RefusesAnotherModelAndTooManyPositions) {
  const std::string name = "session file " + dir.file("bad.session");
  // The same shape with other weights.
  TinyPlanShape otherWeights = largerShape();
  otherWeights.seed = 8;
  LoadedTinyPlan reseeded(otherWeights);
  ASSERT_TRUE(reseeded.plan);
  std::unique_ptr<Engine> reseededEngine = reseeded.engine(1);
  ASSERT_TRUE(reseededEngine);
  const std::string fingerprint = hexFingerprint(*loaded.plan);
  EXPECT_EQ(restoreError(bytes, reseededEngine.get()),
            name + " was saved with another model or other weights (model fingerprint " +
                fingerprint + ", this plan's " + hexFingerprint(*reseeded.plan) +
                ", both with a KV cache of 2 layers x 2 KV heads x head_dim 24, F32)");
  // Another shape.
  TinyPlanShape otherShape = largerShape();
  otherShape.kv_heads = 3;
  LoadedTinyPlan reshaped(otherShape);
  ASSERT_TRUE(reshaped.plan);
  std::unique_ptr<Engine> reshapedEngine = reshaped.engine(1);
  ASSERT_TRUE(reshapedEngine);
  EXPECT_EQ(restoreError(bytes, reshapedEngine.get()),
            name +
                " was saved with another model: its KV cache is 2 layers x 2 KV heads x "
                "head_dim 24, F32, this plan's 2 layers x 3 KV heads x head_dim 24, F32 (model "
                "fingerprint " +
                fingerprint + ", this plan's " + hexFingerprint(*reshaped.plan) + ")");
  // The same model compiled for fewer positions than the file holds.
  TinyPlanShape shorter = largerShape();
  shorter.max_seq = 12;
  LoadedTinyPlan short12(shorter);
  ASSERT_TRUE(short12.plan);
  std::unique_ptr<Engine> shortEngine = short12.engine(1);
  ASSERT_TRUE(shortEngine);
  EXPECT_EQ(restoreError(bytes, shortEngine.get()),
            "session file " + dir.file("bad.session") +
                " holds 16 positions but the plan's --max-seq is 12");
}

TEST_F(SessionFileTest, SaveRefusesWhatItCannotWriteAndKeepsTheOldFile) {
  EXPECT_EQ(save(*engine, path, 3, history).message(),
            "cannot save slot 3: the plan's --max-batch is 3 (slots 0..2)");
  EXPECT_EQ(
      save(*engine, path, 1, std::vector<int32_t>(history.begin(), history.end() - 2)).message(),
      "cannot save slot 1: it holds 16 positions but the history has only " +
          std::to_string(history.size() - 2) + " tokens");
  std::vector<int32_t> badIds = history;
  badIds[3] = 97;
  EXPECT_EQ(save(*engine, path, 1, badIds).message(),
            "cannot save slot 1: history token 3 is id 97 but the vocabulary has 97 ids");
  const std::string missingDir = dir.file("no-such-dir") + "/x.session";
  EXPECT_EQ(save(*engine, missingDir, 1, history).message(),
            "cannot write session file " + missingDir + ": No such file or directory");
  EXPECT_EQ(readBytes(path), bytes) << "a refused save touched the existing file";

  // An empty slot saves a session with no positions, which restores to an empty slot.
  const std::string empty = dir.file("empty.session");
  ASSERT_TRUE(save(*engine, empty, 2, {}).ok());
  Result<SessionInfo> restored = restore(*engine, empty, 1);
  ASSERT_TRUE(restored.ok()) << restored.message();
  EXPECT_EQ(restored->positions, 0u);
  EXPECT_EQ(engine->cachedPositions(1), 0u);
}

} // namespace
} // namespace hetc
