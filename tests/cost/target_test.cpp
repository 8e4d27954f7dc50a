// Target files: the shipped ones load with their published figures, and every kind of malformed
// field is refused with one message naming it.
#include "hetc/compiler/Target.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

namespace hetc::compiler {
namespace {

using Json = nlohmann::json;

const std::string kTargetsDir = HETC_TARGETS_DIR;

Json figure(Json value) { return Json{{"value", value}, {"source", "test"}}; }

// A complete, valid target with a GPU and CXL.
Json validTarget() {
  return Json{
      {"name", "test-box"},
      {"description", "a target for tests"},
      {"cpu",
       {{"model", figure("cpu")},
        {"cores", figure(8)},
        {"base_ghz", figure(2.0)},
        {"amx_bf16_peak_tflops", figure(16.0)},
        {"amx_bf16_tflops", figure(4.0)},
        {"avx512_bf16_peak_tflops", figure(2.0)},
        {"avx512_bf16_tflops", figure(1.0)}}},
      {"ddr",
       {{"channels", figure(2)},
        {"mts", figure(4800)},
        {"capacity_gib", figure(64)},
        {"peak_gbs", figure(76.8)},
        {"read_gbs", figure(60)}}},
      {"cxl",
       {{"expanders", figure(2)},
        {"capacity_gib_each", figure(64)},
        {"read_gbs_each", figure(10)}}},
      {"gpu",
       {{"model", figure("gpu")},
        {"memory_gib", figure(16)},
        {"reserved_gib", figure(1)},
        {"peak_bandwidth_gbs", figure(400)},
        {"bandwidth_gbs", figure(300)},
        {"bf16_peak_tflops", figure(100)},
        {"bf16_tflops", figure(50)}}},
      {"pcie",
       {{"generation", figure(4)},
        {"lanes", figure(16)},
        {"peak_gbs", figure(32)},
        {"gbs", figure(25)}}},
  };
}

std::string parseError(const Json &target) {
  Result<Target> parsed = parseTarget(target.dump(), "t.json");
  return parsed ? std::string("(parsed)") : parsed.message();
}

TEST(Target, ValidDescriptionParses) {
  Result<Target> parsed = parseTarget(validTarget().dump(), "t.json");
  ASSERT_TRUE(parsed) << parsed.message();
  const Target &t = *parsed;
  EXPECT_EQ(t.name, "test-box");
  EXPECT_EQ(t.cpu.cores, 8u);
  EXPECT_DOUBLE_EQ(t.cpu.amxTflops, 4.0);
  EXPECT_DOUBLE_EQ(t.ddr.capacityBytes, 64.0 * (1ull << 30));
  ASSERT_TRUE(t.cxl);
  EXPECT_DOUBLE_EQ(t.cxl->readGbs(), 20.0); // interleaved across both expanders
  ASSERT_TRUE(t.hasGpu());
  EXPECT_DOUBLE_EQ(t.gpu->tflops, 50.0);
  EXPECT_DOUBLE_EQ(t.pcie->gbs, 25.0);
  EXPECT_EQ(t.figures.size(), 7u + 5u + 3u + 7u + 4u);
}

TEST(Target, CpuOnlyHasNeitherGpuNorPcie) {
  Json target = validTarget();
  target.erase("gpu");
  target.erase("pcie");
  target.erase("cxl");
  Result<Target> parsed = parseTarget(target.dump(), "t.json");
  ASSERT_TRUE(parsed) << parsed.message();
  EXPECT_FALSE(parsed->hasGpu());
  EXPECT_FALSE(parsed->cxl);
}

TEST(Target, EachMalformedFieldIsNamed) {
  struct Case {
    const char *what;
    void (*mutate)(Json &);
    const char *message;
  };
  const Case cases[] = {
      {"missing figure", [](Json &t) { t["cpu"].erase("cores"); }, "t.json: cpu.cores: missing"},
      {"missing section", [](Json &t) { t.erase("ddr"); }, "t.json: ddr: missing"},
      {"section not an object", [](Json &t) { t["ddr"] = 3; },
       "t.json: ddr: expected an object, got a number"},
      {"bare number", [](Json &t) { t["cpu"]["cores"] = 40; },
       "t.json: cpu.cores: expected {\"value\": ..., \"source\": \"...\"}, got a number"},
      {"string for a number", [](Json &t) { t["cpu"]["cores"]["value"] = "forty"; },
       "t.json: cpu.cores.value: expected a number, got a string"},
      {"negative", [](Json &t) { t["ddr"]["read_gbs"]["value"] = -5; },
       "t.json: ddr.read_gbs.value: -5 is out of range [0.001, 1e+09]"},
      {"fraction of a count", [](Json &t) { t["cpu"]["cores"]["value"] = 2.5; },
       "t.json: cpu.cores.value: expected a whole number, got 2.5"},
      {"missing source", [](Json &t) { t["gpu"]["bf16_tflops"].erase("source"); },
       "t.json: gpu.bf16_tflops.source: missing (every figure names where it comes from)"},
      {"empty source", [](Json &t) { t["pcie"]["gbs"]["source"] = ""; },
       "t.json: pcie.gbs.source: expected a non-empty string"},
      {"missing value", [](Json &t) { t["pcie"]["gbs"].erase("value"); },
       "t.json: pcie.gbs.value: missing"},
      {"unknown figure", [](Json &t) { t["cpu"]["coress"] = figure(8); },
       "t.json: cpu.coress: unknown field"},
      {"unknown key in a figure", [](Json &t) { t["cpu"]["cores"]["unit"] = "cores"; },
       "t.json: cpu.cores.unit: unknown field"},
      {"unknown section", [](Json &t) { t["tpu"] = Json::object(); }, "t.json: tpu: unknown field"},
      {"gpu without pcie", [](Json &t) { t.erase("pcie"); },
       "t.json: pcie: missing (a gpu needs the link to it)"},
      {"pcie without gpu", [](Json &t) { t.erase("gpu"); },
       "t.json: pcie: present without a gpu (a CPU-only target has neither)"},
      {"reserved all memory", [](Json &t) { t["gpu"]["reserved_gib"]["value"] = 16; },
       "t.json: gpu.reserved_gib: not below gpu.memory_gib"},
      {"achieved above peak", [](Json &t) { t["gpu"]["bf16_tflops"]["value"] = 200; },
       "t.json: gpu.bf16_tflops: achieved throughput above the peak"},
      {"empty model", [](Json &t) { t["cpu"]["model"]["value"] = ""; },
       "t.json: cpu.model.value: empty"},
      {"no name", [](Json &t) { t.erase("name"); }, "t.json: name: missing"},
  };
  for (const Case &c : cases) {
    Json target = validTarget();
    c.mutate(target);
    EXPECT_EQ(parseError(target), c.message) << c.what;
  }
}

TEST(Target, NotJsonOrNotAnObject) {
  EXPECT_EQ(parseTarget("{\"name\": ", "t.json").message(), "t.json: not valid JSON");
  EXPECT_EQ(parseTarget("[1, 2]", "t.json").message(),
            "t.json: expected a JSON object at the top level");
}

TEST(Target, FileErrors) {
  EXPECT_EQ(loadTarget("/nonexistent/x.json").message(),
            "cannot read target file /nonexistent/x.json");
  // The name inside must be the file's: `--target spr-a100` means spr-a100.json.
  const std::string path = ::testing::TempDir() + "other-name.json";
  {
    std::ofstream file(path);
    file << validTarget().dump();
  }
  EXPECT_EQ(loadTarget(path).message(),
            path + ": name 'test-box' differs from the file name 'other-name'");
  std::remove(path.c_str());
}

TEST(Target, UnknownNameListsTheKnownOnes) {
  Result<Target> found = findTarget("no-such-box");
  ASSERT_FALSE(found);
  EXPECT_NE(found.message().find("unknown target 'no-such-box' (known targets: gnr-a100, "
                                 "gnr-cpu, gnr-h100, spr-a100, spr-cpu, spr-h100"),
            std::string::npos)
      << found.message();
}

// Points XDG_CACHE_HOME (where hetc calibrate writes the target 'host') at a directory of the
// test's own for the test's duration.
class CacheHome {
public:
  explicit CacheHome(const std::string &name) : path_(::testing::TempDir() + name) {
    if (const char *old = std::getenv("XDG_CACHE_HOME"))
      old_ = old;
    std::filesystem::remove_all(path_);
    ::setenv("XDG_CACHE_HOME", path_.c_str(), 1);
  }
  ~CacheHome() {
    std::filesystem::remove_all(path_);
    if (old_)
      ::setenv("XDG_CACHE_HOME", old_->c_str(), 1);
    else
      ::unsetenv("XDG_CACHE_HOME");
  }
  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::optional<std::string> old_;
};

TEST(Target, DdrOrganisationIsOptionalButCheckedWhenGiven) {
  Json target = validTarget();
  target["ddr"].erase("channels");
  target["ddr"].erase("mts");
  Result<Target> parsed = parseTarget(target.dump(), "t.json");
  ASSERT_TRUE(parsed) << parsed.message();
  EXPECT_EQ(parsed->ddr.channels, 0u);
  EXPECT_EQ(parsed->ddr.mts, 0u);
  EXPECT_DOUBLE_EQ(parsed->ddr.readGbs, 60.0);
  target["ddr"]["channels"] = figure(0);
  EXPECT_EQ(parseTarget(target.dump(), "t.json").message(),
            "t.json: ddr.channels.value: 0 is out of range [1, 1024]");
}

// "host" is this machine as hetc calibrate measured it, read from the user's cache.
TEST(Target, HostIsTheCalibratedFile) {
  CacheHome cache("hetc-cache-host");
  const std::string path = cache.path() + "/hetc/host.json";
  EXPECT_EQ(calibratedHostTargetPath(), path);
  EXPECT_EQ(findTarget("host").message(),
            "target 'host' has not been measured: run hetc calibrate first (it writes " + path +
                ")");
  Json host = validTarget();
  host["name"] = "host";
  host.erase("gpu");
  host.erase("pcie");
  std::filesystem::create_directories(cache.path() + "/hetc");
  std::ofstream(path) << host.dump();
  Result<Target> found = findTarget("host");
  ASSERT_TRUE(found) << found.message();
  EXPECT_EQ(found->path, path);
  EXPECT_FALSE(found->hasGpu());
  Result<std::vector<Target>> targets = listTargets();
  ASSERT_TRUE(targets) << targets.message();
  EXPECT_EQ(std::count_if(targets->begin(), targets->end(),
                          [](const Target &t) { return t.name == "host"; }),
            1);
}

// The shipped targets load, and their headline figures are the papers'.
TEST(Target, ShippedTargetsCarryThePublishedFigures) {
  CacheHome cache("hetc-cache-empty"); // no calibrated host among them
  Result<std::vector<Target>> targets = listTargets();
  ASSERT_TRUE(targets) << targets.message();
  std::set<std::string> names;
  for (const Target &target : *targets) {
    names.insert(target.name);
    for (const TargetFigure &figure : target.figures)
      EXPECT_FALSE(figure.source.empty()) << target.name << " " << figure.key;
  }
  EXPECT_EQ(names, (std::set<std::string>{"gnr-a100", "gnr-cpu", "gnr-h100", "spr-a100", "spr-cpu",
                                          "spr-h100"}));

  Result<Target> spr = loadTarget(kTargetsDir + "/spr-a100.json");
  ASSERT_TRUE(spr) << spr.message();
  EXPECT_EQ(spr->cpu.cores, 40u);                 // LIA Table 2
  EXPECT_DOUBLE_EQ(spr->cpu.amxPeakTflops, 90.1); // LIA 4.1
  EXPECT_DOUBLE_EQ(spr->cpu.amxTflops, 20.0);     // LIA abstract
  EXPECT_EQ(spr->ddr.channels, 8u);
  EXPECT_DOUBLE_EQ(spr->ddr.readGbs, 260.0); // LIA 4.2
  ASSERT_TRUE(spr->cxl);
  EXPECT_DOUBLE_EQ(spr->cxl->readGbs(), 34.0); // LIA Fig. 8(a): 2 x 17 GB/s
  EXPECT_EQ(spr->pcie->generation, 4u);

  Result<Target> h100 = loadTarget(kTargetsDir + "/spr-h100.json");
  ASSERT_TRUE(h100) << h100.message();
  EXPECT_DOUBLE_EQ(h100->pcie->peakGbs, 64.0); // LIA 1
  EXPECT_DOUBLE_EQ(h100->gpu->memoryBytes, 80.0 * (1ull << 30));

  Result<Target> gnr = loadTarget(kTargetsDir + "/gnr-cpu.json");
  ASSERT_TRUE(gnr) << gnr.message();
  EXPECT_EQ(gnr->cpu.cores, 128u);
  EXPECT_EQ(gnr->ddr.channels, 12u);
  EXPECT_FALSE(gnr->hasGpu());
}

} // namespace
} // namespace hetc::compiler
