// The plan format: writer, loader checks (structure, version, CPU features, meaning) and inspect.
#include "TestPlans.h"

#include "runtime/executor/Engine.h"

#include "runtime/format/Plan.h"
#include "runtime/format/PlanWriter.h"
#include "runtime/platform/CpuFeatures.h"
#include "tools/report/Inspect.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <sstream>
#include <sys/stat.h>
#include <type_traits>

namespace hetc {
namespace {

using test::buildTinyPlan;
using test::readFileBytes;
using test::ScratchDir;
using test::TinyPlan;
using test::TinyPlanShape;
using test::writeFileBytes;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;

// Size-prefixed FlatBuffer: the prefix counts the bytes after it.
uint64_t flatbufferEnd(const std::vector<uint8_t> &file) {
  return 4 + flatbuffers::ReadScalar<uint32_t>(file.data());
}

// Rewrites the FlatBuffer of a written plan after `mutate`, keeping the weights where they are.
// Forced defaults keep its size unchanged as long as `mutate` changes only scalars.
void rewriteFlatBuffer(std::vector<uint8_t> &file,
                       const std::function<void(plan::PlanDefT &)> &mutate) {
  std::unique_ptr<plan::PlanDefT> def = plan::UnPackSizePrefixedPlanDef(file.data());
  mutate(*def);
  flatbuffers::FlatBufferBuilder builder;
  builder.ForceDefaults(true);
  plan::FinishSizePrefixedPlanDefBuffer(builder, plan::PlanDef::Pack(builder, def.get()));
  ASSERT_EQ(builder.GetSize(), flatbufferEnd(file));
  std::memcpy(file.data(), builder.GetBufferPointer(), builder.GetSize());
}

// What a trusting executor relies on after load(): every index in range, every buffer and KV
// element inside its arena, every weight inside the file. Reads the weights' first and last
// bytes so that a sanitizer build notices a lie.
void expectTrustworthy(const Plan &plan) {
  std::ostringstream sink;
  printPlanSummary(plan, sink);
  printPlanJson(plan, sink);
  const plan::PlanDef &def = plan.def();
  using Wide = unsigned __int128; // no overflow in the test's own arithmetic
  auto elementSize = [](plan::DTypeDef dtype) {
    return dtype == plan::DTypeDef::BF16 ? 2u : dtype == plan::DTypeDef::INT8 ? 1u : 4u;
  };

  uint64_t sum = 0;
  for (uint32_t t = 0; t < def.tensors()->size(); ++t) {
    const auto *data = static_cast<const uint8_t *>(plan.tensorData(t));
    const uint64_t size = def.segments()->Get(def.tensors()->Get(t)->segment())->size();
    ASSERT_NE(data, nullptr);
    EXPECT_LE(Wide(data - static_cast<const uint8_t *>(plan.tensorData(0))) + size,
              Wide(plan.fileSize()));
    sum += data[0] + data[size - 1];
  }
  for (uint32_t b = 0; b < def.buffers()->size(); ++b) {
    const plan::BufferDef &buf = *def.buffers()->Get(b);
    const Wide last = Wide(buf.offset()) + Wide(buf.rows() - 1) * buf.row_stride() +
                      Wide(buf.cols()) * elementSize(buf.dtype());
    EXPECT_LE(last, Wide(def.activation_arena_size())) << "buffer " << b;
  }
  const plan::KvCacheDef &kv = *def.kv_cache();
  const Wide kvSpan =
      (Wide(kv.layers() - 1) * kv.layer_stride() + Wide(kv.slots() - 1) * kv.slot_stride() +
       Wide(kv.kv_heads() - 1) * kv.head_stride() + Wide(kv.max_seq() - 1) * kv.pos_stride() +
       kv.head_dim()) *
      elementSize(kv.dtype());
  EXPECT_LE(Wide(kv.k_offset()) + kvSpan, Wide(kv.arena_size()));
  EXPECT_LE(Wide(kv.v_offset()) + kvSpan, Wide(kv.arena_size()));
  if (kv.dtype() == plan::DTypeDef::INT8) {
    const Wide scaleSpan = (Wide(kv.layers() - 1) * kv.scale_layer_stride() +
                            Wide(kv.slots() - 1) * kv.scale_slot_stride() +
                            Wide(kv.kv_heads() - 1) * kv.scale_head_stride() + Wide(kv.max_seq())) *
                           sizeof(float);
    EXPECT_LE(Wide(kv.k_scale_offset()) + scaleSpan, Wide(kv.arena_size()));
    EXPECT_LE(Wide(kv.v_scale_offset()) + scaleSpan, Wide(kv.arena_size()));
    EXPECT_GE(kv.scale_head_stride(), kv.max_seq());
  }
  for (uint32_t i = 0; i < def.ops()->size(); ++i) {
    const plan::OpDef &op = *def.ops()->Get(i);
    for (const auto *indices : {op.inputs(), op.outputs()})
      for (uint32_t k = 0; indices && k < indices->size(); ++k)
        EXPECT_LT(indices->Get(k), def.buffers()->size()) << "op " << i;
    for (uint32_t k = 0; op.weights() && k < op.weights()->size(); ++k)
      EXPECT_LT(op.weights()->Get(k), def.tensors()->size()) << "op " << i;
    EXPECT_EQ(op.task_count() == 0, op.kind() == plan::OpKindDef::Attention) << "op " << i;
    if (op.kind() == plan::OpKindDef::Attention)
      EXPECT_LT(op.params_as_AttentionParamsDef()->layer(), kv.layers());
  }
  EXPECT_LT(def.logits_buffer(), def.buffers()->size());
  EXPECT_GE(sum, 0u);
}

class PlanLoaderTest : public ::testing::Test {
protected:
  // Writes `tiny` and returns the file's bytes.
  std::vector<uint8_t> writeAndRead(TinyPlan &tiny) {
    const Status status = test::writeTinyPlan(path_, tiny);
    EXPECT_TRUE(status.ok()) << status.message();
    return readFileBytes(path_);
  }

  // Writes a tiny plan changed by `mutate` and returns the load error ("" when it loads).
  std::string loadErrorAfter(const std::function<void(TinyPlan &)> &mutate,
                             const TinyPlanShape &shape = {}) {
    TinyPlan tiny = buildTinyPlan(shape);
    mutate(tiny);
    const Status status = test::writeTinyPlan(path_, tiny);
    EXPECT_TRUE(status.ok()) << status.message();
    auto loaded = Plan::load(path_);
    return loaded.ok() ? std::string() : loaded.message();
  }

  void checkRandomFieldValues(plan::DTypeDef kvDtype);

  std::string bytesError(const std::vector<uint8_t> &file) {
    // An exact-size copy, so reading one byte too far is a sanitizer error.
    std::vector<uint8_t> copy(file);
    auto loaded = Plan::fromBytes(copy.data(), copy.size());
    if (loaded.ok())
      expectTrustworthy(**loaded);
    return loaded.ok() ? std::string() : loaded.message();
  }

  ScratchDir dir_;
  std::string path_ = dir_.file("tiny.hplan");
};

TEST_F(PlanLoaderTest, ValidPlanLoadsAndRoundTrips) {
  TinyPlanShape shape;
  shape.layers = 2;
  TinyPlan tiny = buildTinyPlan(shape);
  const std::vector<uint8_t> file = writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  const Plan &plan = **loaded;
  const plan::PlanDef &def = plan.def();

  EXPECT_EQ(plan.fileSize(), file.size());
  EXPECT_EQ(def.schema_version(), kPlanSchemaVersion);
  EXPECT_EQ(tiny.def.schema_version, kPlanSchemaVersion);
  EXPECT_EQ(def.producer()->str(), "hetc unit tests");
  EXPECT_EQ(def.model()->hidden(), shape.hidden);
  EXPECT_EQ(def.model()->layers(), 2u);
  EXPECT_EQ(def.bounds()->max_seq(), shape.max_seq);
  EXPECT_EQ(def.kv_cache()->slots(), shape.max_batch);
  EXPECT_EQ(def.ops()->size(), tiny.def.ops.size());
  EXPECT_EQ(def.ops()->size(), 1u + 2 * 15 + 2);
  EXPECT_EQ(def.sublayers()->size(), 4u);
  EXPECT_EQ(def.ops()->Get(0)->kind(), plan::OpKindDef::Embedding);
  EXPECT_EQ(def.ops()->Get(def.ops()->size() - 1)->kind(), plan::OpKindDef::LmHead);

  // Segments: filled by the writer, aligned, past the FlatBuffer, bytes intact.
  ASSERT_EQ(def.segments()->size(), tiny.segments.size());
  uint64_t previousEnd = flatbufferEnd(file);
  for (uint32_t i = 0; i < def.segments()->size(); ++i) {
    const plan::SegmentDef *segment = def.segments()->Get(i);
    EXPECT_EQ(segment->offset() % kSegmentAlignment, 0u);
    EXPECT_GE(segment->offset(), previousEnd);
    EXPECT_EQ(segment->size(), tiny.segments[i].size());
    EXPECT_EQ(segment->offset(), tiny.def.segments[i]->offset);
    previousEnd = segment->offset() + segment->size();
  }
  EXPECT_EQ(previousEnd, file.size());
  for (uint32_t t = 0; t < def.tensors()->size(); ++t) {
    const auto &bytes = tiny.segments[tiny.def.tensors[t]->segment];
    EXPECT_EQ(std::memcmp(plan.tensorData(t), bytes.data(), bytes.size()), 0) << "tensor " << t;
  }
  EXPECT_EQ(plan.tensorData(def.tensors()->size()), nullptr);

  // Everything else: what was written is what is read.
  std::unique_ptr<plan::PlanDefT> readBack(def.UnPack());
  flatbuffers::FlatBufferBuilder written, read;
  written.ForceDefaults(true);
  read.ForceDefaults(true);
  written.Finish(plan::PlanDef::Pack(written, &tiny.def));
  read.Finish(plan::PlanDef::Pack(read, readBack.get()));
  ASSERT_EQ(written.GetSize(), read.GetSize());
  EXPECT_EQ(std::memcmp(written.GetBufferPointer(), read.GetBufferPointer(), read.GetSize()), 0);

  // The same bytes in memory verify too.
  std::vector<uint8_t> copy(file);
  auto fromMemory = Plan::fromBytes(copy.data(), copy.size());
  ASSERT_TRUE(fromMemory.ok()) << fromMemory.message();
  EXPECT_EQ(fromMemory.value()->def().ops()->size(), def.ops()->size());
}

TEST_F(PlanLoaderTest, ShapeVariantsLoad) {
  const TinyPlanShape base;
  std::vector<TinyPlanShape> shapes(5, base);
  shapes[0].tied_embeddings = true;
  shapes[4].kv_dtype = plan::DTypeDef::INT8;
  shapes[4].layers = 2;
  shapes[1].weight_dtype = plan::DTypeDef::BF16;
  shapes[1].kv_dtype = plan::DTypeDef::BF16;
  shapes[2].heads = 4;
  shapes[2].kv_heads = 4;
  shapes[2].max_batch = 3;
  shapes[2].max_step_tokens = 5;
  shapes[3].layers = 3;
  shapes[3].linear_task_grain = 7;
  for (size_t i = 0; i < shapes.size(); ++i)
    EXPECT_EQ(loadErrorAfter([](TinyPlan &) {}, shapes[i]), "") << "shape " << i;
}

// A device plan as hetc-assign-devices writes one, for every layer count and policy mix.
TEST_F(PlanLoaderTest, DevicePlansLoad) {
  for (uint32_t layers : {1u, 3u})
    for (const auto &[decode, prefill] : {std::make_pair(0x06, 0x00), std::make_pair(0x3f, 0x3f),
                                          std::make_pair(0x00, 0x3f), std::make_pair(0x02, 0x04)}) {
      TinyPlanShape shape;
      shape.layers = layers;
      const std::string error = loadErrorAfter(
          [&, decode = decode, prefill = prefill](TinyPlan &t) {
            test::addDevicePlan(t, static_cast<uint8_t>(decode), static_cast<uint8_t>(prefill));
          },
          shape);
      EXPECT_EQ(error, "") << layers << " layers, policies " << decode << ", " << prefill;
    }
}

TEST_F(PlanLoaderTest, TiedEmbeddingsShareOneSegment) {
  TinyPlanShape shape;
  shape.tied_embeddings = true;
  TinyPlan tiny = buildTinyPlan(shape);
  writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  const int embed = tiny.tensorIndex("model.embed_tokens.weight");
  const int head = tiny.tensorIndex("lm_head.weight");
  ASSERT_GE(embed, 0);
  ASSERT_GE(head, 0);
  EXPECT_EQ((*loaded)->tensorData(embed), (*loaded)->tensorData(head));
}

TEST_F(PlanLoaderTest, WriterReplacesAtomicallyAndNamesThePath) {
  TinyPlan tiny = buildTinyPlan();
  writeAndRead(tiny);
  struct stat info;
  EXPECT_NE(::stat((path_ + ".tmp").c_str(), &info), 0) << "temporary file left behind";

  const std::string missingDir = dir_.file("no-such-dir/tiny.hplan");
  const Status status = test::writeTinyPlan(missingDir, tiny);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(missingDir));
  EXPECT_NE(::stat(missingDir.c_str(), &info), 0);
}

TEST_F(PlanLoaderTest, WriterKeepsACallersSchemaVersion) {
  TinyPlan tiny = buildTinyPlan();
  tiny.def.schema_version = kPlanSchemaMajor << 16 | 7;
  writeAndRead(tiny);
  EXPECT_EQ(tiny.def.schema_version, kPlanSchemaMajor << 16 | 7);
}

TEST_F(PlanLoaderTest, BadIdentifierIsNotAPlan) {
  TinyPlan tiny = buildTinyPlan();
  std::vector<uint8_t> file = writeAndRead(tiny);
  std::memcpy(file.data() + 8, "ABCD", 4);
  EXPECT_THAT(bytesError(file),
              AllOf(HasSubstr("not a hetc plan"), HasSubstr("'ABCD'"), HasSubstr("HPLN")));
  file[8] = 0x01;
  EXPECT_THAT(bytesError(file), HasSubstr("\\x01BCD"));
}

TEST_F(PlanLoaderTest, TruncatedPlansFailCleanly) {
  TinyPlan tiny = buildTinyPlan();
  const std::vector<uint8_t> file = writeAndRead(tiny);
  std::vector<size_t> cuts = {1, 4, 11, 12, flatbufferEnd(file) - 1, file.size() - 1};
  for (size_t k = 1; k < 16; ++k)
    cuts.push_back(file.size() * k / 16);
  for (size_t cut : cuts) {
    const std::vector<uint8_t> prefix(file.begin(), file.begin() + cut);
    EXPECT_THAT(bytesError(prefix), AnyOf(HasSubstr("truncated"), HasSubstr("outside")))
        << "cut at " << cut << " of " << file.size();
  }
  // Through the file path too, with the sizes in the message.
  const std::vector<uint8_t> head(file.begin(), file.begin() + 100);
  writeFileBytes(path_, head.data(), head.size());
  auto loaded = Plan::load(path_);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.message(), AllOf(HasSubstr(path_), HasSubstr("truncated: 100 bytes"),
                                      HasSubstr(std::to_string(flatbufferEnd(file)))));
}

TEST_F(PlanLoaderTest, CorruptedWeightFailsChecksum) {
  TinyPlan tiny = buildTinyPlan();
  std::vector<uint8_t> file = writeAndRead(tiny);
  const auto &segment = *tiny.def.segments[3];
  file[segment.offset + segment.size / 2] ^= 0x10;
  EXPECT_THAT(bytesError(file), AllOf(HasSubstr("segment 3"), HasSubstr("checksum")));
}

// Flipped bytes in the FlatBuffer: an error, or (a flipped name character, a changed float) a
// plan that is still consistent. Never a crash or an out-of-bounds read.
TEST_F(PlanLoaderTest, FlippedFlatBufferBytesNeverCrash) {
  TinyPlan tiny = buildTinyPlan();
  const std::vector<uint8_t> file = writeAndRead(tiny);
  const uint64_t end = flatbufferEnd(file);
  int refused = 0, accepted = 0;
  for (uint8_t flip : {uint8_t{0xff}, uint8_t{0x01}, uint8_t{0x80}}) {
    for (uint64_t position = 0; position < end; position += 97) {
      std::vector<uint8_t> corrupted(file);
      corrupted[position] ^= flip;
      (bytesError(corrupted).empty() ? accepted : refused) += 1;
    }
  }
  EXPECT_GT(refused, 0);
  RecordProperty("refused", refused);
  RecordProperty("accepted", accepted);
}

// FlatBuffers aligns a vector's 4-byte length, not its elements: a shape vector whose 8-byte
// elements start 4 bytes off is refused by name, not read.
TEST_F(PlanLoaderTest, MisalignedDataIsRefused) {
  TinyPlan tiny = buildTinyPlan();
  const std::vector<uint8_t> file = writeAndRead(tiny);

  // The whole plan 4 bytes off an 8-byte boundary.
  std::vector<uint64_t> storage(file.size() / 8 + 2);
  uint8_t *shifted = reinterpret_cast<uint8_t *>(storage.data()) + 4;
  std::memcpy(shifted, file.data(), file.size());
  auto loaded = Plan::fromBytes(shifted, file.size());
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.message(), ::testing::HasSubstr("8-byte aligned"));

  // One [N, K] shape moved 4 bytes on: its length rewritten as N' = 1 at the old first element,
  // and the tensor's offset to it raised by 4. The structure still verifies.
  auto valid = Plan::fromBytes(file.data(), file.size());
  ASSERT_TRUE(valid.ok()) << valid.message();
  const plan::PlanDef &def = (*valid)->def();
  uint32_t index = 0;
  while (index < def.tensors()->size() && def.tensors()->Get(index)->shape()->size() < 2)
    ++index;
  ASSERT_LT(index, def.tensors()->size());
  const auto *table = reinterpret_cast<const flatbuffers::Table *>(def.tensors()->Get(index));
  const size_t field = table->GetAddressOf(plan::TensorDef::VT_SHAPE) - file.data();
  const size_t length =
      reinterpret_cast<const uint8_t *>(def.tensors()->Get(index)->shape()) - file.data();
  std::vector<uint8_t> moved(file);
  const uint32_t one = 1;
  std::memcpy(&moved[length + 4], &one, 4);
  uint32_t offset;
  std::memcpy(&offset, &moved[field], 4);
  offset += 4;
  std::memcpy(&moved[field], &offset, 4);
  EXPECT_THAT(bytesError(moved), ::testing::HasSubstr("tensor " + std::to_string(index)));
  EXPECT_THAT(bytesError(moved), ::testing::HasSubstr("shape is not 8-byte aligned"));
}

TEST_F(PlanLoaderTest, SchemaVersions) {
  auto withVersion = [](uint32_t version) {
    return [version](TinyPlan &tiny) { tiny.def.schema_version = version; };
  };
  EXPECT_THAT(loadErrorAfter(withVersion((kPlanSchemaMajor + 1) << 16)),
              AllOf(HasSubstr("newer"), HasSubstr(std::to_string(kPlanSchemaMajor + 1) + ".0")));
  EXPECT_EQ(loadErrorAfter(withVersion(kPlanSchemaMajor << 16 | (kPlanSchemaMinor + 3))), "");
  EXPECT_THAT(loadErrorAfter(withVersion((kPlanSchemaMajor - 1) << 16 | 9)), HasSubstr("older"));
}

// The loader reads a plan for any machine (inspect works anywhere); the engine refuses one whose
// CPU features this host lacks, naming them.
TEST_F(PlanLoaderTest, MissingCpuFeatureIsNamedByTheEngine) {
  auto engineError = [&](uint64_t extraFeatures) {
    TinyPlan tiny = buildTinyPlan();
    tiny.def.required_cpu_features |= extraFeatures;
    EXPECT_TRUE(test::writeTinyPlan(path_, tiny).ok());
    auto loaded = Plan::load(path_);
    EXPECT_TRUE(loaded.ok()) << loaded.message();
    if (!loaded.ok())
      return std::string("not loaded");
    auto engine = Engine::create(std::shared_ptr<const Plan>(std::move(loaded.value())));
    return engine.ok() ? std::string() : engine.message();
  };
  EXPECT_EQ(engineError(0), "");
  EXPECT_THAT(engineError(uint64_t{1} << 40), AllOf(HasSubstr("bit40"), HasSubstr("lacks")));
  const uint64_t amx = static_cast<uint64_t>(plan::CpuFeatureBits::AMX_BF16);
  if (hostCpuFeatures() & amx)
    EXPECT_EQ(engineError(amx), "");
  else
    EXPECT_THAT(engineError(amx), AllOf(HasSubstr("amx-bf16"), HasSubstr("lacks")));
}

TEST_F(PlanLoaderTest, SegmentBoundsAreChecked) {
  TinyPlan tiny = buildTinyPlan();
  const std::vector<uint8_t> file = writeAndRead(tiny);
  const uint32_t last = static_cast<uint32_t>(tiny.def.segments.size() - 1);
  auto errorAfter = [&](const std::function<void(plan::PlanDefT &)> &mutate) {
    std::vector<uint8_t> copy(file);
    rewriteFlatBuffer(copy, mutate);
    return bytesError(copy);
  };
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[last]->offset += 4096; }),
              AllOf(HasSubstr("segment " + std::to_string(last)), HasSubstr("outside"),
                    HasSubstr(std::to_string(file.size()) + "-byte file")));
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[2]->offset += 64; }),
              HasSubstr("not a multiple of 4096"));
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[0]->offset = 0; }),
              HasSubstr("overlaps the FlatBuffer"));
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[2]->offset = d.segments[1]->offset; }),
              HasSubstr("overlap"));
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[0]->offset = ~uint64_t{0} - 4095; }),
              HasSubstr("overflows"));
  EXPECT_THAT(errorAfter([&](plan::PlanDefT &d) { d.segments[1]->xxh64 ^= 1; }),
              AllOf(HasSubstr("segment 1"), HasSubstr("checksum")));
}

TEST_F(PlanLoaderTest, EmptyMissingAndDirectoryPaths) {
  writeFileBytes(path_, nullptr, 0);
  auto empty = Plan::load(path_);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.message(), AllOf(HasSubstr(path_), HasSubstr("empty")));

  const std::string missing = dir_.file("missing.hplan");
  auto absent = Plan::load(missing);
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(absent.message(), AllOf(HasSubstr(missing), HasSubstr("No such file")));

  auto directory = Plan::load(dir_.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.message(), AllOf(HasSubstr(dir_.path()), HasSubstr("directory")));

  alignas(8) const uint8_t fourBytes[4] = {'H', 'P', 'L', 'N'};
  auto tiny = Plan::fromBytes(fourBytes, 4);
  ASSERT_FALSE(tiny.ok());
  EXPECT_THAT(tiny.message(), HasSubstr("4 bytes"));
}

// One semantic mistake each, and the key words of its message.
struct Mistake {
  const char *name;
  std::function<void(TinyPlan &)> mutate;
  std::vector<std::string> expected;
};

plan::OpDefT &opNamed(TinyPlan &tiny, const std::string &name) {
  const int index = tiny.opIndex(name);
  EXPECT_GE(index, 0) << name;
  return *tiny.def.ops.at(index);
}
plan::BufferDefT &bufferNamed(TinyPlan &tiny, const std::string &name) {
  return *tiny.def.buffers.at(tiny.bufferIndex(name));
}

const std::string kQProj = "model.layers.0.self_attn.q_proj";

std::vector<Mistake> mistakes() {
  using namespace plan;
  return {
      {"BufferIndexOutOfRange",
       [](TinyPlan &t) { opNamed(t, kQProj).inputs[0] = 99; },
       {"(Linear '" + kQProj + "')", "reads buffer 99", "12 buffers"}},
      {"OutputIndexOutOfRange",
       [](TinyPlan &t) { opNamed(t, kQProj).outputs[0] = 40; },
       {"writes buffer 40"}},
      {"TensorIndexOutOfRange",
       [](TinyPlan &t) { opNamed(t, kQProj).weights[0] = 500; },
       {"uses tensor 500"}},
      {"TensorSizeMismatch",
       [](TinyPlan &t) {
         t.def.tensors[t.tensorIndex("model.layers.0.self_attn.q_proj.weight")]->shape[0] += 1;
       },
       {"needs", "bytes but segment", "holds"}},
      {"TensorSegmentOutOfRange",
       [](TinyPlan &t) { t.def.tensors[0]->segment = 77; },
       {"tensor 0", "uses segment 77"}},
      {"TensorShapeOverflow",
       [](TinyPlan &t) {
         t.def.tensors[0]->shape = {1ull << 40, 1ull << 40};
       },
       {"overflows"}},
      {"ParamsTypeMismatch",
       [](TinyPlan &t) { opNamed(t, kQProj).params.Set(RopeParamsDefT()); },
       {"RopeParamsDef", "needs LinearParamsDef"}},
      {"ParamsMissing", [](TinyPlan &t) { opNamed(t, kQProj).params.Reset(); }, {"NONE", "params"}},
      {"LinearArity",
       [](TinyPlan &t) { opNamed(t, kQProj).inputs.push_back(0); },
       {"2 inputs", "takes 1"}},
      {"LinearBiasMissing",
       [](TinyPlan &t) { opNamed(t, kQProj).params.AsLinearParamsDef()->bias = true; },
       {"has 1 weights; a Linear op with a bias takes 2"}},
      {"LinearBiasLength",
       [](TinyPlan &t) {
         OpDefT &k = opNamed(t, "model.layers.0.self_attn.k_proj"); // 16 output columns
         k.params.AsLinearParamsDef()->bias = true;
         k.weights.push_back(t.tensorIndex("model.layers.0.input_layernorm.weight")); // [32]
       },
       {"has shape [32] but the bias needs [16]"}},
      {"LinearBiasNotF32",
       [](TinyPlan &t) {
         OpDefT &q = opNamed(t, kQProj);
         q.params.AsLinearParamsDef()->bias = true;
         q.weights.push_back(t.tensorIndex("model.layers.0.self_attn.k_proj.weight"));
       },
       {"is F32 LinearNK; a bias is F32 RowMajor"}},
      {"RopeRotaryDimOdd",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn.rotary_emb.q").params.AsRopeParamsDef()->rotary_dim = 3;
       },
       {"rotates 3 columns of heads of 8; rotary_dim must be even and at most head_dim"}},
      {"RopePartialInvFreqLength",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn.rotary_emb.q").params.AsRopeParamsDef()->rotary_dim = 4;
       },
       {"has shape [4] but inv_freq [rotary_dim / 2] needs [2]"}},
      {"LinearKMismatch",
       [](TinyPlan &t) { opNamed(t, kQProj).inputs[0] = t.bufferIndex("gate"); },
       {"has K 32", "48 columns"}},
      {"LinearNMismatch",
       [](TinyPlan &t) { opNamed(t, kQProj).outputs[0] = t.bufferIndex("k"); },
       {"has N 32"}},
      {"LinearWeightLayout",
       [](TinyPlan &t) {
         t.def.tensors[t.tensorIndex(kQProj + ".weight")]->layout = WeightLayoutDef::RowMajor;
       },
       {"LinearNK"}},
      {"AttentionLayerOutOfRange",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn").params.AsAttentionParamsDef()->layer = 3;
       },
       {"KV cache layer 3", "1 layers"}},
      {"AttentionHeadsMismatch",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn").params.AsAttentionParamsDef()->heads = 2;
       },
       {"q", "heads * head_dim = 16"}},
      {"RopeNotInPlace",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn.rotary_emb.q").outputs[0] = t.bufferIndex("attn");
       },
       {"in place"}},
      {"RopeInvFreqLength",
       [](TinyPlan &t) {
         t.def.tensors[t.tensorIndex("model.rotary_emb.inv_freq")]->shape = {2, 2};
       },
       {"inv_freq"}},
      {"LmHeadNotLogits",
       [](TinyPlan &t) { opNamed(t, "lm_head").outputs[0] = t.bufferIndex("normed"); },
       {"logits_buffer"}},
      {"LogitsBufferOutOfRange",
       [](TinyPlan &t) { t.def.logits_buffer = 12; },
       {"logits_buffer 12", "out of range"}},
      {"LogitsRowsBelowBatch",
       [](TinyPlan &t) { bufferNamed(t, "logits").rows = 1; },
       {"max_batch"}},
      {"BufferOutsideArena",
       [](TinyPlan &t) { t.def.activation_arena_size -= 64; },
       {"outside the", "activation arena"}},
      {"BufferMisaligned",
       [](TinyPlan &t) { bufferNamed(t, "q").offset += 4; },
       {"64-byte aligned"}},
      {"BufferRowStrideTooSmall",
       [](TinyPlan &t) { bufferNamed(t, "q").row_stride = 4; },
       {"row stride 4", "less than"}},
      {"BufferRowsOverflow",
       [](TinyPlan &t) { bufferNamed(t, "q").rows = ~uint64_t{0} / 2; },
       {"outside"}},
      {"BufferBelowStepTokens",
       [](TinyPlan &t) { bufferNamed(t, "q").rows = 2; },
       {"max_step_tokens"}},
      {"UnknownDtype",
       [](TinyPlan &t) { bufferNamed(t, "q").dtype = static_cast<DTypeDef>(9); },
       {"unknown dtype 9"}},
      {"KvSlotsDifferFromBatch",
       [](TinyPlan &t) { t.def.kv_cache->slots = 3; },
       {"slots 3", "max_batch 2"}},
      {"KvMaxSeqDiffers",
       [](TinyPlan &t) { t.def.kv_cache->max_seq = 16; },
       {"kv_cache max_seq 16"}},
      {"KvStrideTooSmall",
       [](TinyPlan &t) { t.def.kv_cache->head_stride -= 1; },
       {"head_stride", "max_seq * pos_stride"}},
      {"KvOutsideArena",
       [](TinyPlan &t) { t.def.kv_cache->arena_size -= 4; },
       {"V region", "KV arena"}},
      {"KvStrideOverflow",
       [](TinyPlan &t) {
         t.def.kv_cache->slot_stride = uint64_t{1} << 62;
         t.def.kv_cache->layer_stride = uint64_t{1} << 63;
       },
       {"kv_cache extent overflows"}},
      {"MissingKvCache", [](TinyPlan &t) { t.def.kv_cache.reset(); }, {"kv_cache", "missing"}},
      {"MissingModel", [](TinyPlan &t) { t.def.model.reset(); }, {"model", "missing"}},
      {"HiddenBufferWidth",
       [](TinyPlan &t) { t.def.model->hidden = 31; },
       {"Hidden buffer of 32 columns", "hidden size is 31"}},
      {"ZeroModelField", [](TinyPlan &t) { t.def.model->intermediate = 0; }, {"intermediate is 0"}},
      {"ZeroBound",
       [](TinyPlan &t) { t.def.bounds->max_step_tokens = 0; },
       {"max_step_tokens is 0"}},
      {"NoOps",
       [](TinyPlan &t) {
         t.def.ops.clear();
         t.def.sublayers.clear();
       },
       {"no ops"}},
      {"ZeroTasks", [](TinyPlan &t) { opNamed(t, kQProj).task_count = 0; }, {"task_count 0"}},
      {"AttentionWithTasks",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn").task_count = 4;
         opNamed(t, "model.layers.0.self_attn").task_grain = 1;
       },
       {"carries tasks 4 x 1", "split by positions"}},
      {"BufferNotF32",
       [](TinyPlan &t) { t.def.buffers[0]->dtype = plan::DTypeDef::BF16; },
       {"is BF16", "activation buffers are F32"}},
      {"ForeignArchitecture",
       [](TinyPlan &t) { t.def.model->architecture = "mamba"; },
       {"architecture 'mamba'", "llama"}},
      {"EmptyArchitecture",
       [](TinyPlan &t) { t.def.model->architecture = ""; },
       {"architecture ''", "llama"}},
      {"OpLayerOutOfRange", [](TinyPlan &t) { opNamed(t, kQProj).layer = 5; }, {"layer 5"}},
      {"SublayerRangeOutside",
       [](TinyPlan &t) { t.def.sublayers[1]->op_count = 1000; },
       {"sublayer 1", "lie outside"}},
      {"OpNamesWrongSublayer", [](TinyPlan &t) { opNamed(t, kQProj).sublayer = 1; }, {"sublayer"}},
      {"UnknownOpKind",
       [](TinyPlan &t) { opNamed(t, kQProj).kind = static_cast<OpKindDef>(42); },
       {"unknown kind 42"}},
      {"SwiGluWithoutItsOperand",
       [](TinyPlan &t) {
         LinearParamsDefT params;
         params.swiglu = SwiGluRoleDef::Up;
         opNamed(t, kQProj).params.Set(std::move(params));
       },
       {"(Linear '" + kQProj + "')", "has 1 inputs", "with a fused swiglu takes 2"}},
      {"SwiGluAndResidual",
       [](TinyPlan &t) {
         LinearParamsDefT params;
         params.swiglu = SwiGluRoleDef::Gate;
         params.residual = true;
         opNamed(t, kQProj).params.Set(std::move(params));
         opNamed(t, kQProj).inputs.push_back(opNamed(t, kQProj).outputs[0]);
       },
       {"fuses both a residual add and a swiglu"}},
      {"UnknownSwiGluRole",
       [](TinyPlan &t) {
         LinearParamsDefT params;
         params.swiglu = static_cast<SwiGluRoleDef>(9);
         opNamed(t, kQProj).params.Set(std::move(params));
         opNamed(t, kQProj).inputs.push_back(opNamed(t, kQProj).outputs[0]);
       },
       {"unknown swiglu role 9"}},
      {"RopeAttentionWithoutFrequencies",
       [](TinyPlan &t) {
         opNamed(t, "model.layers.0.self_attn").params.AsAttentionParamsDef()->rope = true;
       },
       {"(Attention 'model.layers.0.self_attn')", "has 0 weights", "with rope takes 1"}},
      {"RopeAttentionWrongFrequencies",
       [](TinyPlan &t) {
         plan::OpDefT &attention = opNamed(t, "model.layers.0.self_attn");
         attention.params.AsAttentionParamsDef()->rope = true;
         attention.weights.push_back(opNamed(t, kQProj).weights[0]);
       },
       {"(Attention 'model.layers.0.self_attn')", "inv_freq"}},
      {"NoLmHead",
       [](TinyPlan &t) {
         opNamed(t, "lm_head").kind = OpKindDef::Linear;
         opNamed(t, "lm_head").params.Set(LinearParamsDefT());
       },
       {"no LmHead"}},
      // The device plan (1.5). A host plan has no GPU to put anything on.
      {"UnknownTensorTier",
       [](TinyPlan &t) { t.def.tensors[0]->tier = static_cast<TierDef>(7); },
       {"tensor 0", "unknown tier 7"}},
      {"TensorOnGpuOfAHostPlan",
       [](TinyPlan &t) { t.def.tensors[2]->tier = TierDef::GPU; },
       {"tensor 2", "kept in GPU memory", "target 'host' has no GPU"}},
      {"KvCacheOnGpuOfAHostPlan",
       [](TinyPlan &t) { t.def.kv_cache->tier = TierDef::GPU; },
       {"kv_cache is kept in GPU memory", "no GPU"}},
      {"UnknownActivationTier",
       [](TinyPlan &t) { t.def.activation_tier = static_cast<TierDef>(3); },
       {"activation arena has unknown tier 3"}},
      {"OpOnGpuOfAHostPlan",
       [](TinyPlan &t) { opNamed(t, kQProj).device = DeviceDef::GPU; },
       {"(Linear '" + kQProj + "')", "runs on the GPU in decode", "target 'host' has no GPU"}},
      {"UnknownPrefillDevice",
       [](TinyPlan &t) { opNamed(t, kQProj).prefill_device = static_cast<DeviceDef>(5); },
       {"unknown prefill device 5"}},
      {"CostSublayersOutsideTheLayers",
       [](TinyPlan &t) { opNamed(t, "lm_head").cost_sublayers = CostSublayerBits::FC2; },
       {"(LmHead 'lm_head')", "outside the decoder layers", "cost sublayers fc2"}},
      {"UnknownCostSublayerBits",
       [](TinyPlan &t) { opNamed(t, kQProj).cost_sublayers = static_cast<CostSublayerBits>(64); },
       {"cost sublayer bits 0x40"}},
      {"SublayerOnCpuWithAnOpOnGpu",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.sublayers[0]->device = DeviceDef::CPU;
       },
       {"sublayer 0 is on the CPU", "runs on the GPU in decode"}},
      {"SublayerOnGpuWithoutOne",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x3f, 0);
         t.def.sublayers[1]->device = DeviceDef::GPU;
       },
       {"sublayer 1 is on the GPU but none of its ops runs there in decode"}},
      {"OpAgainstItsGroupsPolicy",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         opNamed(t, kQProj).device = DeviceDef::CPU;
       },
       {"(Linear '" + kQProj + "') runs on the CPU in Decode",
        "layer group 0 ('gpu-resident') runs qkv on the GPU (policy (0,1,1,0,0,0))"}},
      {"AttentionAgainstItsPrefillPolicy",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         opNamed(t, "model.layers.0.self_attn").prefill_device = DeviceDef::CPU;
       },
       {"runs on the CPU in Prefill", "runs qk on the GPU (policy (0,0,0,0,0,0))"}},
      {"OpInALayerWithoutCostSublayer",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         opNamed(t, kQProj).cost_sublayers = CostSublayerBits::NONE;
       },
       {"in layer 0 names no cost sublayer"}},
      {"GpuPlanOfATargetWithoutGpu",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x3f, 0x3f);
         t.def.target_gpu.clear();
         for (auto &tensor : t.def.tensors)
           tensor->tier = TierDef::DDR;
         t.def.stages[1]->groups[0]->policy = CostSublayerBits::NONE;
       },
       {"stage Decode group 0 ('gpu-resident') runs sublayers on the GPU", "has no GPU"}},
      {"GroupsMissALayer",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->groups[0]->layer_count = 2;
       },
       {"stage Decode groups hold layers [0, 2) but the model has 1"}},
      {"GroupsOutOfOrder",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[0]->groups[0]->first_layer = 1;
       },
       {"stage Prefill group 0 ('gpu-resident') holds layers [1, 2)", "end at layer 0"}},
      {"PolicyBeyondSixSublayers",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->groups[0]->policy = static_cast<CostSublayerBits>(0x86);
       },
       {"policy bits 0x86 beyond the 6 sublayers"}},
      {"PolicyTableBatchGap",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->policy_table[0]->ranges[0]->last_batch = 1;
       },
       {"stage Decode policy table row 0 (len 1) covers batches up to 1", "bounds max_batch is 2"}},
      {"PolicyTableRangeStartsLate",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->policy_table[0]->ranges[0]->first_batch = 2;
       },
       {"range 0 covers batches 2-2 where batch 1 comes next"}},
      {"PolicyTableLengthsRepeat",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         auto &rows = t.def.stages[1]->policy_table;
         auto copy = std::make_unique<PolicyRowDefT>(*rows[0]);
         rows.push_back(std::move(copy));
       },
       {"row 1 (len 1) does not follow len 1"}},
      {"PolicyTableWithoutAGroupsPolicy",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->policy_table[0]->ranges[0]->policies.clear();
       },
       {"has 0 policies for 1 layer groups"}},
      {"EmptyPolicyTable",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[0]->policy_table.clear();
       },
       {"stage Prefill has an empty policy table"}},
      {"StageTwice",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->stage = StageDef::Prefill;
       },
       {"two stage Prefill plans"}},
      {"UnknownStage",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[0]->stage = static_cast<StageDef>(9);
       },
       {"unknown stage 9"}},
      {"StagePointBeyondTheBounds",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->batch = 3;
       },
       {"stage Decode point B=3, L=32 lies beyond bounds max_batch 2, max_seq 32"}},
      {"PredictionNotANumber",
       [](TinyPlan &t) {
         test::addDevicePlan(t, 0x06, 0);
         t.def.stages[1]->predicted_seconds = std::nan("");
       },
       {"stage Decode predicted_seconds", "not a finite non-negative number"}},
  };
}

// An INT8 KV cache's scale regions are held to what K and V are: strides that step over the
// dimensions inside them, aligned offsets, and room in the arena; other caches carry none.
TEST_F(PlanLoaderTest, KvScaleMistakesAreNamed) {
  TinyPlanShape int8;
  int8.kv_dtype = plan::DTypeDef::INT8;
  int8.layers = 2;
  const std::vector<std::pair<Mistake, TinyPlanShape>> mistakes = {
      {{"ScaleOutsideArena",
        [](TinyPlan &t) { t.def.kv_cache->arena_size -= 4; },
        {"V scale region", "outside the", "KV arena"}},
       int8},
      {{"ScaleMisaligned",
        [](TinyPlan &t) { t.def.kv_cache->k_scale_offset += 4; },
        {"K scale offset", "64-byte aligned"}},
       int8},
      {{"ScaleHeadStrideBelowMaxSeq",
        [](TinyPlan &t) { t.def.kv_cache->scale_head_stride = t.def.kv_cache->max_seq - 1; },
        {"scale_head_stride 31", "less than max_seq = 32"}},
       int8},
      {{"ScaleSlotStrideTooSmall",
        [](TinyPlan &t) { t.def.kv_cache->scale_slot_stride -= 1; },
        {"scale_slot_stride", "kv_heads * scale_head_stride"}},
       int8},
      {{"ScaleLayerStrideTooSmall",
        [](TinyPlan &t) { t.def.kv_cache->scale_layer_stride = 1; },
        {"scale_layer_stride 1", "slots * scale_slot_stride"}},
       int8},
      {{"NoScales",
        [](TinyPlan &t) {
          plan::KvCacheDefT &kv = *t.def.kv_cache;
          kv.k_scale_offset = kv.v_scale_offset = 0;
          kv.scale_head_stride = kv.scale_slot_stride = kv.scale_layer_stride = 0;
        },
        {"scale_head_stride 0"}},
       int8},
      {{"ScaleOverflow",
        [](TinyPlan &t) {
          t.def.kv_cache->scale_slot_stride = uint64_t{1} << 62;
          t.def.kv_cache->scale_layer_stride = uint64_t{1} << 63;
        },
        {"kv_cache extent overflows"}},
       int8},
      {{"ScalesOnF32Cache",
        [](TinyPlan &t) { t.def.kv_cache->scale_head_stride = t.def.kv_cache->max_seq; },
        {"kv_cache of dtype F32 has scale offsets or strides", "only an INT8 cache"}},
       TinyPlanShape{}},
  };
  for (const auto &[mistake, shape] : mistakes) {
    SCOPED_TRACE(mistake.name);
    const std::string error = loadErrorAfter(mistake.mutate, shape);
    ASSERT_FALSE(error.empty()) << "accepted";
    for (const std::string &word : mistake.expected)
      EXPECT_THAT(error, HasSubstr(word));
  }
  EXPECT_EQ(loadErrorAfter([](TinyPlan &) {}, int8), "");
}

// A BF16 or INT8 cache's streams are blocks of 16 positions of pairs of dims: rows exactly
// head_dim apart, an even head_dim, and room for max_seq rounded up to a whole block. A plan of
// the schema before its blocks (1.6 for BF16, 1.7 for INT8) runs when its strides hold them and
// is otherwise told to be recompiled.
TEST_F(PlanLoaderTest, KvBlockMistakesAreNamed) {
  for (const plan::DTypeDef dtype : {plan::DTypeDef::BF16, plan::DTypeDef::INT8}) {
    SCOPED_TRACE(plan::EnumNameDTypeDef(dtype));
    TinyPlanShape shape;
    shape.kv_dtype = dtype;
    shape.max_seq = 40; // two and a half blocks: the stream holds 48 positions
    const uint32_t olderSchema = kPlanSchemaMajor << 16 | (dtype == plan::DTypeDef::BF16 ? 5u : 6u);
    const std::string before = dtype == plan::DTypeDef::BF16 ? "before 1.6" : "before 1.7";
    const std::vector<Mistake> mistakes = {
        {"PaddedRows",
         [](TinyPlan &t) { test::layOutKvCache(*t.def.kv_cache, t.def.kv_cache->head_dim + 2); },
         {plan::EnumNameDTypeDef(dtype), "pos_stride = head_dim"}},
        {"StreamOfMaxSeqOnly",
         [](TinyPlan &t) {
           plan::KvCacheDefT &kv = *t.def.kv_cache;
           kv.head_stride = kv.max_seq * kv.pos_stride;
         },
         {"head_stride", "max_seq rounded up to 16"}},
        {"RowsOfAnOlderSchema",
         [olderSchema](TinyPlan &t) {
           plan::KvCacheDefT &kv = *t.def.kv_cache;
           kv.head_stride = kv.max_seq * kv.pos_stride;
           t.def.schema_version = olderSchema;
         },
         {before, "recompile the plan"}},
    };
    for (const Mistake &mistake : mistakes) {
      SCOPED_TRACE(mistake.name);
      const std::string error = loadErrorAfter(mistake.mutate, shape);
      ASSERT_FALSE(error.empty()) << "accepted";
      for (const std::string &word : mistake.expected)
        EXPECT_THAT(error, HasSubstr(word));
    }
    EXPECT_EQ(loadErrorAfter([](TinyPlan &) {}, shape), "");
    EXPECT_EQ(
        loadErrorAfter([olderSchema](TinyPlan &t) { t.def.schema_version = olderSchema; }, shape),
        "")
        << "an older plan whose strides hold the blocks";
  }
}

// The engine cuts a step's attention once for all layers: one window per plan.
// Before 1.16 the attention ops of a plan shared one window; from 1.16 each layer has its own
// (Gemma 2 slides on alternate layers).
TEST_F(PlanLoaderTest, SlidingWindowPerLayerFrom1_16) {
  TinyPlanShape shape;
  shape.layers = 2;
  auto window = [](TinyPlan &t, int layer) -> uint32_t & {
    const std::string name = "model.layers." + std::to_string(layer) + ".self_attn";
    return t.def.ops[t.opIndex(name)]->params.AsAttentionParamsDef()->sliding_window;
  };
  EXPECT_EQ(loadErrorAfter([&](TinyPlan &t) { window(t, 0) = window(t, 1) = 8; }, shape), "");
  EXPECT_EQ(loadErrorAfter([&](TinyPlan &t) { window(t, 0) = 8; }, shape), "");
  const std::string error = loadErrorAfter(
      [&](TinyPlan &t) {
        window(t, 0) = 8;
        t.def.schema_version = kPlanSchemaMajor << 16 | 15;
      },
      shape);
  EXPECT_THAT(error, HasSubstr("has sliding window 0 but an earlier attention op has 8"));
}

// Gemma's parameters (1.16): each checked, and refused in an older plan.
TEST_F(PlanLoaderTest, GemmaParamsAreCheckedAndNewIn1_16) {
  using namespace plan;
  const std::string attention = "model.layers.0.self_attn", swiglu = "model.layers.0.mlp.act";
  auto older = [](TinyPlan &t) { t.def.schema_version = kPlanSchemaMajor << 16 | 15; };
  auto scale = [](float s) {
    return [s](TinyPlan &t) { opNamed(t, "model.embed_tokens").params.AsEmbeddingParamsDef()->scale = s; };
  };
  auto attentionCap = [&](float c) {
    return [&, c](TinyPlan &t) { opNamed(t, attention).params.AsAttentionParamsDef()->softcap = c; };
  };
  auto logitCap = [](float c) {
    return [c](TinyPlan &t) { opNamed(t, "lm_head").params.AsLmHeadParamsDef()->softcap = c; };
  };
  auto gate = [&](ActivationFunctionDef f) {
    return [&, f](TinyPlan &t) { opNamed(t, swiglu).params.AsSwiGluParamsDef()->function = f; };
  };
  auto both = [](std::function<void(TinyPlan &)> a, std::function<void(TinyPlan &)> b) {
    return [a, b](TinyPlan &t) {
      a(t);
      b(t);
    };
  };
  for (auto accepted : std::vector<std::function<void(TinyPlan &)>>{
           scale(48.0f), attentionCap(50.0f), logitCap(30.0f),
           gate(ActivationFunctionDef::GeluTanh), gate(ActivationFunctionDef::Gelu)})
    EXPECT_EQ(loadErrorAfter(accepted), "");
  const std::vector<std::pair<std::function<void(TinyPlan &)>, std::string>> refused = {
      {scale(0.0f), "scale 0 is not a finite non-zero number"},
      {scale(INFINITY), "scale inf is not a finite non-zero number"},
      {attentionCap(-1.0f), "softcap -1 is not a finite number >= 0"},
      {logitCap(NAN), "softcap nan is not a finite number >= 0"},
      {gate(static_cast<ActivationFunctionDef>(9)), "unknown activation function 9"},
      {both(scale(48.0f), older), "has an embedding scale, which schema 1.15 does not have"},
      {both(attentionCap(50.0f), older), "has a softcap, which schema 1.15 does not have"},
      {both(logitCap(30.0f), older), "has a softcap, which schema 1.15 does not have"},
      {[](TinyPlan &t) { opNamed(t, "lm_head").params.AsLmHeadParamsDef()->bias = true; },
       "has 1 weights; a LmHead op with a bias takes 2"},
      {both(gate(ActivationFunctionDef::GeluTanh), older),
       "has a gate function other than silu, which schema 1.15 does not have"},
  };
  for (const auto &[mutate, want] : refused)
    EXPECT_THAT(loadErrorAfter(mutate), HasSubstr(want));
}

// ALiBi's slopes (1.18): one finite slope per head, and refused in an older plan.
TEST_F(PlanLoaderTest, AlibiSlopesAreCheckedAndNewIn1_18) {
  using namespace plan;
  TinyPlanShape shape;
  shape.alibi = true;
  ASSERT_EQ(loadErrorAfter([](TinyPlan &) {}, shape), "");
  const std::string attention = "model.layers.0.self_attn";
  auto slopes = [&](std::function<void(std::vector<float> &)> change) {
    return [&, change](TinyPlan &t) {
      change(opNamed(t, attention).params.AsAttentionParamsDef()->alibi_slopes);
    };
  };
  const std::vector<std::pair<std::function<void(TinyPlan &)>, std::string>> refused = {
      {slopes([](std::vector<float> &s) { s.pop_back(); }), "ALiBi slopes for 4 heads"},
      {slopes([](std::vector<float> &s) { s[1] = NAN; }), "an ALiBi slope nan that is not finite"},
      {[](TinyPlan &t) { t.def.schema_version = kPlanSchemaMajor << 16 | 17; },
       "has ALiBi slopes, which schema 1.17 does not have"},
  };
  for (const auto &[mutate, want] : refused)
    EXPECT_THAT(loadErrorAfter(mutate, shape), HasSubstr(want));
}

// The checks of the OPT-style ops (schema 1.10) on the tiny OPT plan (hidden 32, intermediate
// 48, max_seq 32, positions 34 rows at offset 2), which loads as built.
TEST_F(PlanLoaderTest, OptMistakesAreNamed) {
  using namespace plan;
  TinyPlanShape shape;
  shape.opt = true;
  ASSERT_EQ(loadErrorAfter([](TinyPlan &) {}, shape), "");
  const std::string norm = "model.layers.0.input_layernorm", act = "model.layers.0.mlp.act";
  const std::string embedding = "model.embed_tokens";
  const std::vector<Mistake> optMistakes = {
      {"LayerNormBetaMissing",
       [&](TinyPlan &t) { opNamed(t, norm).weights.pop_back(); },
       {"(LayerNorm '" + norm + "')", "has 1 weights; a LayerNorm op with a bias takes 2"}},
      {"LayerNormBetaWithoutBias",
       [&](TinyPlan &t) { opNamed(t, norm).params.AsLayerNormParamsDef()->bias = false; },
       {"has 2 weights; a LayerNorm op takes 1"}},
      {"LayerNormGammaLength",
       [&](TinyPlan &t) {
         opNamed(t, norm).weights[0] = t.tensorIndex("model.layers.0.mlp.fc1.bias"); // [48]
       },
       {"has shape [48] but the gamma needs [32]"}},
      {"LayerNormBetaNotF32RowMajor",
       [&](TinyPlan &t) {
         opNamed(t, norm).weights[1] = t.tensorIndex("model.layers.0.self_attn.q_proj.weight");
       },
       {"beta", "is F32 LinearNK; a beta is F32 RowMajor"}},
      {"LayerNormEpsZero",
       [&](TinyPlan &t) { opNamed(t, norm).params.AsLayerNormParamsDef()->eps = 0.0f; },
       {"eps 0 is not a finite positive number"}},
      {"LayerNormColumns",
       [&](TinyPlan &t) { opNamed(t, norm).outputs[0] = t.bufferIndex("gate"); },
       {"input and output differ"}},
      {"ActivationUnknownFunction",
       [&](TinyPlan &t) {
         opNamed(t, act).params.AsActivationParamsDef()->function =
             static_cast<ActivationFunctionDef>(7);
       },
       {"(Activation '" + act + "')", "has unknown activation function 7"}},
      {"ActivationReluSquaredInOlderSchema",
       [&](TinyPlan &t) {
         opNamed(t, act).params.AsActivationParamsDef()->function =
             ActivationFunctionDef::ReluSquared;
         t.def.schema_version = kPlanSchemaMajor << 16 | 16;
       },
       {"(Activation '" + act + "')",
        "has the ReluSquared activation, which schema 1.16 does not have (added in 1.17)"}},
      {"ActivationWithWeight",
       [&](TinyPlan &t) { opNamed(t, act).weights.push_back(0); },
       {"has 1 weights; a Activation op takes 0"}},
      {"ActivationColumns",
       [&](TinyPlan &t) { opNamed(t, act).outputs[0] = t.bufferIndex("normed"); },
       {"input and output differ", "has 48 columns", "has 32"}},
      {"PositionsPastMaxSeq",
       [&](TinyPlan &t) {
         opNamed(t, embedding).params.AsEmbeddingParamsDef()->position_offset = 3;
       },
       {"positions table", "has 34 rows but bounds max_seq 32 + position_offset 3 needs 35"}},
      {"PositionsPastLongerMaxSeq",
       [&](TinyPlan &t) {
         t.def.bounds->max_seq = 33;
         t.def.kv_cache->max_seq = 33;
         test::layOutKvCache(*t.def.kv_cache, t.def.kv_cache->head_dim);
       },
       {"has 34 rows but bounds max_seq 33 + position_offset 2 needs 35"}},
      {"PositionsNotRowMajor",
       [&](TinyPlan &t) {
         opNamed(t, embedding).weights[1] = t.tensorIndex("model.layers.0.mlp.fc1.weight");
       },
       {"positions table", "is F32 LinearNK; a positions table is F32 RowMajor"}},
      {"PositionsWidth",
       [&](TinyPlan &t) {
         opNamed(t, embedding).weights[1] = t.tensorIndex("model.layers.0.mlp.fc1.bias");
       },
       {"has shape [48] but needs [max_positions, 32]"}},
      {"EmbeddingThreeWeights",
       [&](TinyPlan &t) { opNamed(t, embedding).weights.push_back(0); },
       {"has 3 weights; a Embedding op takes 1"}},
      {"OptOpsInOlderSchema",
       [&](TinyPlan &t) {
         t.def.schema_version = kPlanSchemaMajor << 16 | 9;
         t.def.model->architecture = "llama";
       },
       {"(Embedding '" + embedding +
        "') adds learned positions, which schema 1.9 does not have "
        "(added in 1.10)"}},
      {"OptInOlderSchema",
       [&](TinyPlan &t) { t.def.schema_version = kPlanSchemaMajor << 16 | 9; },
       {"model architecture 'opt' is not one this runtime runs (llama, opt)"}},
  };
  for (const Mistake &mistake : optMistakes) {
    SCOPED_TRACE(mistake.name);
    const std::string error = loadErrorAfter(mistake.mutate, shape);
    ASSERT_FALSE(error.empty()) << "accepted";
    for (const std::string &word : mistake.expected)
      EXPECT_THAT(error, HasSubstr(word));
  }
}

// From 1.15 an RmsNorm's gamma may cover a group of its row's columns (a head, for Qwen3's q and
// k norms): a divisor of the row's length loads; in an older plan it is refused naming the
// shapes.
TEST_F(PlanLoaderTest, GroupedRmsNormGamma) {
  const std::string norm = "model.layers.0.input_layernorm";
  auto gammaOf = [&](const std::string &tensor) {
    return [&, tensor](TinyPlan &t) { opNamed(t, norm).weights[0] = t.tensorIndex(tensor); };
  };
  // inv_freq is F32 RowMajor [head_dim / 2] = [4], which divides the hidden 32.
  EXPECT_EQ(loadErrorAfter(gammaOf("model.rotary_emb.inv_freq")), "");
  const std::string older = loadErrorAfter([&](TinyPlan &t) {
    gammaOf("model.rotary_emb.inv_freq")(t);
    t.def.schema_version = kPlanSchemaMajor << 16 | 14;
  });
  EXPECT_THAT(older, HasSubstr("has shape [4] but the norm needs [32]"));
}

TEST_F(PlanLoaderTest, SemanticMistakesAreNamed) {
  for (const Mistake &mistake : mistakes()) {
    SCOPED_TRACE(mistake.name);
    const std::string error = loadErrorAfter(mistake.mutate);
    ASSERT_FALSE(error.empty()) << "accepted";
    EXPECT_THAT(error, HasSubstr(path_));
    for (const std::string &word : mistake.expected)
      EXPECT_THAT(error, HasSubstr(word));
  }
}

// Seeded random corruption of the FlatBuffer bytes (and random cuts): each plan is refused
// with a message or, when the change is harmless, still trustworthy.
TEST_F(PlanLoaderTest, RandomByteCorruptionIsRefusedOrHarmless) {
  TinyPlanShape shape;
  shape.layers = 2;
  TinyPlan tiny = buildTinyPlan(shape);
  const std::vector<uint8_t> file = writeAndRead(tiny);
  const uint64_t end = flatbufferEnd(file);
  uint64_t rng = 2024;
  int refused = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    std::vector<uint8_t> corrupted(file);
    const int changes = 1 + static_cast<int>(test::detail::nextRandom(rng) % 4);
    for (int c = 0; c < changes; ++c)
      corrupted[test::detail::nextRandom(rng) % end] =
          static_cast<uint8_t>(test::detail::nextRandom(rng));
    if (iteration % 5 == 0)
      corrupted.resize(test::detail::nextRandom(rng) % file.size());
    refused += !bytesError(corrupted).empty();
  }
  EXPECT_GT(refused, 0);
}

// Seeded random values in the plan's scalar fields: the FlatBuffer stays well formed, so only
// the semantic checks stand between these plans and the executor.
// On a plan with a float32 KV cache and on one with an INT8 cache and its scales.
TEST_F(PlanLoaderTest, RandomFieldValuesAreRefusedOrTrustworthy) {
  for (const plan::DTypeDef kvDtype : {plan::DTypeDef::F32, plan::DTypeDef::INT8})
    checkRandomFieldValues(kvDtype);
}

void PlanLoaderTest::checkRandomFieldValues(plan::DTypeDef kvDtype) {
  SCOPED_TRACE(plan::EnumNameDTypeDef(kvDtype));
  TinyPlanShape shape;
  shape.layers = 2;
  shape.kv_dtype = kvDtype;
  TinyPlan tiny = buildTinyPlan(shape);
  const std::vector<uint8_t> file = writeAndRead(tiny);
  uint64_t rng = 7;
  auto random = [&rng]() { return test::detail::nextRandom(rng); };
  // Values near the interesting edges: zero, one, off by one, doubled, huge.
  auto nudge = [&random](auto &field) {
    using T = std::remove_reference_t<decltype(field)>;
    using U = std::conditional_t<std::is_enum_v<T>, std::underlying_type<T>, std::common_type<T>>;
    using V = typename U::type;
    const V original = static_cast<V>(field);
    const V candidates[] = {V(0),
                            V(1),
                            V(original + 1),
                            V(original - 1),
                            V(original * 2),
                            V(random() % (uint64_t(original) * 2 + 4)),
                            V(uint64_t{1} << (random() % 64)),
                            V(~uint64_t{0})};
    field = static_cast<T>(candidates[random() % 8]);
  };
  auto pick = [&random](auto &items) -> auto & { return *items[random() % items.size()]; };
  using Def = plan::PlanDefT;
  const std::vector<std::function<void(Def &)>> mutators = {
      [&](Def &d) { nudge(pick(d.ops).task_count); },
      [&](Def &d) { nudge(pick(d.ops).layer); },
      [&](Def &d) { nudge(pick(d.ops).sublayer); },
      [&](Def &d) { nudge(pick(d.ops).kind); },
      [&](Def &d) { nudge(pick(d.ops).device); },
      [&](Def &d) { nudge(pick(d.ops).prefill_device); },
      [&](Def &d) { nudge(pick(d.ops).cost_sublayers); },
      [&](Def &d) { nudge(pick(d.tensors).tier); },
      [&](Def &d) { nudge(d.kv_cache->tier); },
      [&](Def &d) {
        auto &op = pick(d.ops);
        if (!op.inputs.empty())
          nudge(op.inputs[random() % op.inputs.size()]);
      },
      [&](Def &d) { nudge(pick(d.ops).outputs[0]); },
      [&](Def &d) {
        auto &op = pick(d.ops);
        if (!op.weights.empty())
          nudge(op.weights[0]);
      },
      [&](Def &d) {
        for (auto &op : d.ops)
          if (auto *p = op->params.AsAttentionParamsDef()) {
            switch (random() % 4) {
            case 0:
              nudge(p->layer);
              break;
            case 1:
              nudge(p->heads);
              break;
            case 2:
              nudge(p->kv_heads);
              break;
            default:
              nudge(p->head_dim);
              break;
            }
            return;
          }
      },
      [&](Def &d) {
        for (auto &op : d.ops)
          if (auto *p = op->params.AsRopeParamsDef()) {
            random() % 2 ? nudge(p->heads) : nudge(p->head_dim);
            return;
          }
      },
      [&](Def &d) { nudge(pick(d.tensors).segment); },
      [&](Def &d) { nudge(pick(d.tensors).dtype); },
      [&](Def &d) { nudge(pick(d.tensors).layout); },
      [&](Def &d) {
        auto &t = pick(d.tensors);
        nudge(t.shape[random() % t.shape.size()]);
      },
      [&](Def &d) { nudge(pick(d.buffers).offset); },
      [&](Def &d) { nudge(pick(d.buffers).rows); },
      [&](Def &d) { nudge(pick(d.buffers).cols); },
      [&](Def &d) { nudge(pick(d.buffers).row_stride); },
      [&](Def &d) { nudge(pick(d.buffers).dtype); },
      [&](Def &d) { nudge(pick(d.buffers).role); },
      [&](Def &d) { nudge(d.activation_arena_size); },
      [&](Def &d) { nudge(d.logits_buffer); },
      [&](Def &d) { nudge(pick(d.segments).offset); },
      [&](Def &d) { nudge(pick(d.segments).size); },
      [&](Def &d) { nudge(pick(d.sublayers).first_op); },
      [&](Def &d) { nudge(pick(d.sublayers).op_count); },
      [&](Def &d) { nudge(pick(d.sublayers).layer); },
      [&](Def &d) {
        plan::KvCacheDefT &kv = *d.kv_cache;
        switch (random() % 17) {
        case 0:
          nudge(kv.layers);
          break;
        case 1:
          nudge(kv.slots);
          break;
        case 2:
          nudge(kv.kv_heads);
          break;
        case 3:
          nudge(kv.max_seq);
          break;
        case 4:
          nudge(kv.head_dim);
          break;
        case 5:
          nudge(kv.pos_stride);
          break;
        case 6:
          nudge(kv.head_stride);
          break;
        case 7:
          nudge(kv.slot_stride);
          break;
        case 8:
          nudge(kv.layer_stride);
          break;
        case 9:
          nudge(kv.k_offset);
          break;
        case 10:
          nudge(kv.v_offset);
          break;
        case 11:
          nudge(kv.k_scale_offset);
          break;
        case 12:
          nudge(kv.v_scale_offset);
          break;
        case 13:
          nudge(kv.scale_head_stride);
          break;
        case 14:
          nudge(kv.scale_slot_stride);
          break;
        case 15:
          nudge(kv.scale_layer_stride);
          break;
        default:
          nudge(kv.arena_size);
          break;
        }
      },
      [&](Def &d) {
        switch (random() % 6) {
        case 0:
          nudge(d.model->vocab);
          break;
        case 1:
          nudge(d.model->hidden);
          break;
        case 2:
          nudge(d.model->layers);
          break;
        case 3:
          nudge(d.model->kv_heads);
          break;
        case 4:
          nudge(d.bounds->max_batch);
          break;
        default:
          nudge(d.bounds->max_step_tokens);
          break;
        }
      },
  };
  int refused = 0, accepted = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::vector<uint8_t> changed(file);
    const int changes = 1 + static_cast<int>(random() % 3);
    rewriteFlatBuffer(changed, [&](Def &d) {
      for (int c = 0; c < changes; ++c)
        mutators[random() % mutators.size()](d);
    });
    const std::string error = bytesError(changed);
    (error.empty() ? accepted : refused) += 1;
    if (!error.empty())
      EXPECT_EQ(error.find('\n'), std::string::npos) << "one message, one line: " << error;
  }
  EXPECT_GT(refused, 2000);
  RecordProperty("refused", refused);
  RecordProperty("accepted", accepted);
}

TEST(CpuFeatures, HostAndNames) {
  EXPECT_EQ(describeCpuFeatures(0), "none");
  const uint64_t x86 = static_cast<uint64_t>(plan::CpuFeatureBits::X86_64);
  const uint64_t avx2 = static_cast<uint64_t>(plan::CpuFeatureBits::AVX2);
  const uint64_t amx = static_cast<uint64_t>(plan::CpuFeatureBits::AMX_BF16);
  EXPECT_EQ(describeCpuFeatures(x86 | avx2 | amx | uint64_t{1} << 63),
            "x86-64 avx2 amx-bf16 bit63");
#if defined(__x86_64__)
  EXPECT_TRUE(hostCpuFeatures() & x86);
#endif
  // Detection is done once; the answer never changes.
  EXPECT_EQ(hostCpuFeatures(), hostCpuFeatures());
}

TEST_F(PlanLoaderTest, InspectShowsWhatWasDecided) {
  TinyPlan tiny = buildTinyPlan();
  tiny.def.ops[1]->name = "quote\" back\\ newline\n tab\t bell\x07";
  writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();

  std::ostringstream text;
  printPlanSummary(**loaded, text);
  const std::string schema =
      "schema " + std::to_string(kPlanSchemaMajor) + "." + std::to_string(kPlanSchemaMinor);
  for (const std::string &expected :
       {schema, std::string("target 'host'"), std::string("required x86-64"),
        std::string("max_batch 2"), std::string("Attention"), std::string("FeedForward"),
        std::string("model.layers.0.self_attn.q_proj"), std::string("LmHead"),
        std::string("Logits"), std::string("dimension-first [layer][slot][kv_head][pos][dim]"),
        std::string("activation arena"), std::string("tasks in total"),
        std::string("weight segments"), std::string("kernels on this host"),
        std::string("Linear: LinearF32Portable, 7 ops")})
    EXPECT_THAT(text.str(), HasSubstr(expected));

  std::ostringstream json;
  printPlanJson(**loaded, json);
  const std::string out = json.str();
  EXPECT_EQ(out.front(), '{');
  EXPECT_EQ(out.substr(out.size() - 2), "}\n");
  EXPECT_THAT(out, HasSubstr(R"("name":"quote\" back\\ newline\n tab\t bell\u0007")"));
  EXPECT_THAT(out, HasSubstr(R"("required_cpu_features":["x86-64"])"));
  EXPECT_THAT(out, HasSubstr(R"("kind":"Attention")"));
  EXPECT_THAT(out, HasSubstr(R"("inputs":[],"outputs":[0])"));
  EXPECT_THAT(out, HasSubstr(R"({"op":"Linear","kernel":"LinearF32Portable","count":7})"));
  // Brackets balance outside strings, and no raw control character escapes a string.
  int depth = 0;
  bool inString = false, escaped = false;
  for (char c : out.substr(0, out.size() - 1)) {
    if (inString) {
      EXPECT_GE(static_cast<unsigned char>(c), 0x20);
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      EXPECT_GE(depth, 0);
    }
  }
  EXPECT_EQ(depth, 0);
  EXPECT_FALSE(inString);
}

// The OPT-style kinds and their params: a LayerNorm's bias, an Activation's function, the
// learned positions an Embedding adds and their offset.
TEST_F(PlanLoaderTest, InspectShowsTheOptOps) {
  TinyPlanShape shape;
  shape.opt = true;
  shape.activation = plan::ActivationFunctionDef::GeluTanh;
  TinyPlan tiny = buildTinyPlan(shape);
  writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::ostringstream text;
  printPlanSummary(**loaded, text);
  for (const char *expected : {"model: opt", "Embedding  positions+2", "LayerNorm  bias",
                               "Activation gelu_tanh", "LayerNorm: ", "Activation: "})
    EXPECT_THAT(text.str(), HasSubstr(expected));
  std::ostringstream json;
  printPlanJson(**loaded, json);
  EXPECT_THAT(json.str(), HasSubstr(R"("kind":"Activation","fuses":"gelu_tanh")"));
  EXPECT_THAT(json.str(), HasSubstr(R"("kind":"LayerNorm","fuses":"bias")"));
  EXPECT_THAT(json.str(), HasSubstr(R"("kind":"Embedding","fuses":"positions+2")"));
  EXPECT_THAT(json.str(), HasSubstr(R"("architecture":"opt")"));
}

// Gemma 2's forms, each shown on its op: the embedding's scale, the windows and caps of the
// attention ops (the window on the even layers only), the GELU gate, the lm_head's bias and cap.
TEST_F(PlanLoaderTest, InspectShowsTheGemmaForms) {
  TinyPlanShape shape = test::gemmaShape();
  shape.lm_head_bias = true;
  TinyPlan tiny = buildTinyPlan(shape);
  writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  std::ostringstream json;
  printPlanJson(**loaded, json);
  for (const char *expected :
       {R"("kind":"Embedding","fuses":"scale 5.65685")",
        R"("kind":"Attention","fuses":"window 5,cap 2")", R"("kind":"Attention","fuses":"cap 2")",
        R"("kind":"SwiGlu","fuses":"gelu_tanh")", R"("kind":"LmHead","fuses":"bias,cap 1.5")"})
    EXPECT_THAT(json.str(), HasSubstr(expected));
}

TEST_F(PlanLoaderTest, InspectShowsTheDevicePlan) {
  TinyPlan tiny = buildTinyPlan();
  test::addDevicePlan(tiny, 0x06, 0x00);
  writeAndRead(tiny);
  auto loaded = Plan::load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.message();

  std::ostringstream text;
  printPlanSummary(**loaded, text);
  for (const std::string &expected :
       {std::string("devices: target 'spr-h100' (GPU NVIDIA H100 80GB PCIe)"),
        std::string("Prefill  0       gpu-resident  (0,0,0,0,0,0)  GPU  GPU  GPU  GPU  GPU  GPU"),
        std::string("Decode   0       gpu-resident  (0,1,1,0,0,0)  GPU  CPU  CPU  GPU  GPU  GPU"),
        std::string("Decode: Decode on spr-h100"),
        std::string("memory tiers: weights 9 in GPU, 4 in DDR; KV cache DDR; activations DDR"),
        std::string("why: weights, KV cache and activations in DDR; all layers resident"),
        std::string("policy table, Decode"), std::string("len        1: B 1-2 (0,1,1,0,0,0)"),
        std::string("outside the layers (prefill/decode): Embedding CPU/CPU, RmsNorm CPU/CPU, "
                    "LmHead CPU/CPU"),
        std::string("GPU/CPU qk+sv"), std::string("GPU/GPU qkv"), std::string("on this host: ")})
    EXPECT_THAT(text.str(), HasSubstr(expected));

  std::ostringstream json;
  printPlanJson(**loaded, json);
  for (const std::string &expected :
       {std::string(R"("target":"spr-h100","target_gpu":"NVIDIA H100 80GB PCIe")"),
        std::string(R"("device":"CPU","prefill_device":"GPU","cost_sublayers":"qk+sv")"),
        std::string(R"("tier":"GPU")"), std::string(R"("stages":[{"stage":"Prefill")"),
        std::string(R"("policy":[0,1,1,0,0,0],"devices":{"qkv":"GPU","qk":"CPU","sv":"CPU")"),
        std::string(R"("policy_table":[{"len":1,"ranges":[{"first_batch":1,"last_batch":2,)"
                    R"("policies":[[0,1,1,0,0,0]]}]}])"),
        std::string(R"("host_gpu":{"present":)"), std::string(R"("notice":")")})
    EXPECT_THAT(json.str(), HasSubstr(expected));
}

} // namespace
} // namespace hetc
