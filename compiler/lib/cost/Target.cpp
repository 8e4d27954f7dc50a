// Target descriptions: JSON files, one per machine, every figure with its source.
#include "hetc/compiler/Target.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HETC_TARGETS_SOURCE_DIR
#error "HETC_TARGETS_SOURCE_DIR must name the source tree's compiler/targets"
#endif

namespace hetc::compiler {
namespace {

using Json = nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string numberText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

const char *typeName(const Json &value) {
  if (value.is_number())
    return "a number";
  if (value.is_string())
    return "a string";
  if (value.is_object())
    return "an object";
  if (value.is_array())
    return "an array";
  if (value.is_boolean())
    return "a boolean";
  return "null";
}

// Reads the figures of one file; the first problem found is the error, naming the field.
class TargetReader {
public:
  TargetReader(std::string origin, Target &target) : origin_(std::move(origin)), target_(target) {}

  bool failed() const { return !error_.empty(); }
  Status status() const { return error_.empty() ? Status() : Status::error(error_); }

  void fail(const std::string &key, const std::string &problem) {
    if (error_.empty())
      error_ = origin_ + ": " + (key.empty() ? "" : key + ": ") + problem;
  }

  // The object at `key` of `parent`, or null (an error when it is required or not an object).
  const Json *section(const Json &parent, const std::string &key, bool required) {
    auto found = parent.find(key);
    if (found == parent.end()) {
      if (required)
        fail(key, "missing");
      return nullptr;
    }
    if (!found->is_object()) {
      fail(key, std::string("expected an object, got ") + typeName(*found));
      return nullptr;
    }
    return &*found;
  }

  // Refuses fields the format does not have: a misspelt figure must not silently go unread.
  void onlyKnownKeys(const Json &object, const std::string &prefix,
                     std::initializer_list<const char *> known) {
    for (auto item = object.begin(); item != object.end(); ++item) {
      if (std::none_of(known.begin(), known.end(),
                       [&](const char *name) { return item.key() == name; }))
        fail(prefix + item.key(), "unknown field");
    }
  }

  // {"value": <number>, "source": "..."} at section.key, in [min, max]; an integer if asked.
  double number(const Json &section, const std::string &prefix, const char *key, double min,
                double max, bool integer = false) {
    const Json *value = figure(section, prefix, key);
    if (!value)
      return 0;
    const std::string name = prefix + key;
    if (!value->is_number()) {
      fail(name + ".value", std::string("expected a number, got ") + typeName(*value));
      return 0;
    }
    const double number = value->get<double>();
    if (!std::isfinite(number) || number < min || number > max) {
      fail(name + ".value", numberText(number) + " is out of range [" + numberText(min) + ", " +
                                numberText(max) + "]");
      return 0;
    }
    if (integer && std::floor(number) != number) {
      fail(name + ".value", "expected a whole number, got " + numberText(number));
      return 0;
    }
    record(name, numberText(number), section, key);
    return number;
  }

  std::string text(const Json &section, const std::string &prefix, const char *key) {
    const Json *value = figure(section, prefix, key);
    if (!value)
      return "";
    const std::string name = prefix + key;
    if (!value->is_string()) {
      fail(name + ".value", std::string("expected a string, got ") + typeName(*value));
      return "";
    }
    if (value->get<std::string>().empty()) {
      fail(name + ".value", "empty");
      return "";
    }
    record(name, value->get<std::string>(), section, key);
    return value->get<std::string>();
  }

private:
  const Json *figure(const Json &section, const std::string &prefix, const char *key) {
    const std::string name = prefix + key;
    auto found = section.find(key);
    if (found == section.end()) {
      fail(name, "missing");
      return nullptr;
    }
    if (!found->is_object()) {
      fail(name,
           std::string("expected {\"value\": ..., \"source\": \"...\"}, got ") + typeName(*found));
      return nullptr;
    }
    onlyKnownKeys(*found, name + ".", {"value", "source"});
    auto source = found->find("source");
    if (source == found->end()) {
      fail(name + ".source", "missing (every figure names where it comes from)");
      return nullptr;
    }
    if (!source->is_string() || source->get<std::string>().empty()) {
      fail(name + ".source", "expected a non-empty string");
      return nullptr;
    }
    auto value = found->find("value");
    if (value == found->end()) {
      fail(name + ".value", "missing");
      return nullptr;
    }
    return failed() ? nullptr : &*value;
  }

  void record(const std::string &name, const std::string &value, const Json &section,
              const char *key) {
    target_.figures.push_back({name, value, section.at(key).at("source").get<std::string>()});
  }

  std::string origin_;
  Target &target_;
  std::string error_;
};

constexpr double kMaxCount = 1e6;
constexpr double kMaxRate = 1e9; // GB/s or TFLOPS: far above any machine, below overflow
constexpr double kMaxGiB = 1e9;

void readCpu(TargetReader &reader, const Json &root, CpuSpec &cpu) {
  const Json *section = reader.section(root, "cpu", true);
  if (!section)
    return;
  reader.onlyKnownKeys(*section, "cpu.",
                       {"model", "cores", "base_ghz", "amx_bf16_peak_tflops", "amx_bf16_tflops",
                        "avx512_bf16_peak_tflops", "avx512_bf16_tflops"});
  cpu.model = reader.text(*section, "cpu.", "model");
  cpu.cores = static_cast<uint32_t>(reader.number(*section, "cpu.", "cores", 1, kMaxCount, true));
  cpu.baseGhz = reader.number(*section, "cpu.", "base_ghz", 0.1, 100);
  cpu.amxPeakTflops = reader.number(*section, "cpu.", "amx_bf16_peak_tflops", 1e-6, kMaxRate);
  cpu.amxTflops = reader.number(*section, "cpu.", "amx_bf16_tflops", 1e-6, kMaxRate);
  cpu.avx512PeakTflops = reader.number(*section, "cpu.", "avx512_bf16_peak_tflops", 1e-6, kMaxRate);
  cpu.avx512Tflops = reader.number(*section, "cpu.", "avx512_bf16_tflops", 1e-6, kMaxRate);
  if (!reader.failed() && cpu.amxTflops > cpu.amxPeakTflops)
    reader.fail("cpu.amx_bf16_tflops", "achieved throughput above the peak");
}

void readDdr(TargetReader &reader, const Json &root, DdrSpec &ddr) {
  const Json *section = reader.section(root, "ddr", true);
  if (!section)
    return;
  reader.onlyKnownKeys(*section, "ddr.",
                       {"channels", "mts", "capacity_gib", "peak_gbs", "read_gbs"});
  // The memory's organisation is described, not used by the cost model; a measured host (hetc
  // calibrate) cannot read it without root and leaves it out.
  if (section->contains("channels"))
    ddr.channels =
        static_cast<uint32_t>(reader.number(*section, "ddr.", "channels", 1, 1024, true));
  if (section->contains("mts"))
    ddr.mts = static_cast<uint32_t>(reader.number(*section, "ddr.", "mts", 1, 1e6, true));
  ddr.capacityBytes = reader.number(*section, "ddr.", "capacity_gib", 1e-3, kMaxGiB) * kGiB;
  ddr.peakGbs = reader.number(*section, "ddr.", "peak_gbs", 1e-3, kMaxRate);
  ddr.readGbs = reader.number(*section, "ddr.", "read_gbs", 1e-3, kMaxRate);
  if (!reader.failed() && ddr.readGbs > ddr.peakGbs)
    reader.fail("ddr.read_gbs", "achieved bandwidth above the peak");
}

void readCxl(TargetReader &reader, const Json &root, std::optional<CxlSpec> &cxl) {
  const Json *section = reader.section(root, "cxl", false);
  if (!section)
    return;
  reader.onlyKnownKeys(*section, "cxl.", {"expanders", "capacity_gib_each", "read_gbs_each"});
  CxlSpec spec;
  spec.expanders =
      static_cast<uint32_t>(reader.number(*section, "cxl.", "expanders", 1, 1024, true));
  spec.capacityBytesEach =
      reader.number(*section, "cxl.", "capacity_gib_each", 1e-3, kMaxGiB) * kGiB;
  spec.readGbsEach = reader.number(*section, "cxl.", "read_gbs_each", 1e-3, kMaxRate);
  cxl = spec;
}

void readGpu(TargetReader &reader, const Json &root, std::optional<GpuSpec> &gpu,
             std::optional<PcieSpec> &pcie) {
  const Json *gpuSection = reader.section(root, "gpu", false);
  const Json *pcieSection = reader.section(root, "pcie", false);
  if (reader.failed())
    return;
  if (!gpuSection && pcieSection)
    reader.fail("pcie", "present without a gpu (a CPU-only target has neither)");
  if (gpuSection && !pcieSection)
    reader.fail("pcie", "missing (a gpu needs the link to it)");
  if (reader.failed() || !gpuSection)
    return;

  reader.onlyKnownKeys(*gpuSection, "gpu.",
                       {"model", "memory_gib", "reserved_gib", "peak_bandwidth_gbs",
                        "bandwidth_gbs", "bf16_peak_tflops", "bf16_tflops"});
  GpuSpec spec;
  spec.model = reader.text(*gpuSection, "gpu.", "model");
  spec.memoryBytes = reader.number(*gpuSection, "gpu.", "memory_gib", 1e-3, kMaxGiB) * kGiB;
  spec.reservedBytes = reader.number(*gpuSection, "gpu.", "reserved_gib", 0, kMaxGiB) * kGiB;
  spec.peakBandwidthGbs = reader.number(*gpuSection, "gpu.", "peak_bandwidth_gbs", 1e-3, kMaxRate);
  spec.bandwidthGbs = reader.number(*gpuSection, "gpu.", "bandwidth_gbs", 1e-3, kMaxRate);
  spec.peakTflops = reader.number(*gpuSection, "gpu.", "bf16_peak_tflops", 1e-6, kMaxRate);
  spec.tflops = reader.number(*gpuSection, "gpu.", "bf16_tflops", 1e-6, kMaxRate);
  if (!reader.failed() && spec.reservedBytes >= spec.memoryBytes)
    reader.fail("gpu.reserved_gib", "not below gpu.memory_gib");
  if (!reader.failed() && spec.bandwidthGbs > spec.peakBandwidthGbs)
    reader.fail("gpu.bandwidth_gbs", "achieved bandwidth above the peak");
  if (!reader.failed() && spec.tflops > spec.peakTflops)
    reader.fail("gpu.bf16_tflops", "achieved throughput above the peak");

  reader.onlyKnownKeys(*pcieSection, "pcie.", {"generation", "lanes", "peak_gbs", "gbs"});
  PcieSpec link;
  link.generation =
      static_cast<uint32_t>(reader.number(*pcieSection, "pcie.", "generation", 1, 64, true));
  link.lanes = static_cast<uint32_t>(reader.number(*pcieSection, "pcie.", "lanes", 1, 64, true));
  link.peakGbs = reader.number(*pcieSection, "pcie.", "peak_gbs", 1e-3, kMaxRate);
  link.gbs = reader.number(*pcieSection, "pcie.", "gbs", 1e-3, kMaxRate);
  if (!reader.failed() && link.gbs > link.peakGbs)
    reader.fail("pcie.gbs", "achieved bandwidth above the peak");
  if (!reader.failed()) {
    gpu = spec;
    pcie = link;
  }
}

std::string fileStem(const std::string &path) {
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = name.rfind(".json");
  return dot == std::string::npos ? name : name.substr(0, dot);
}

bool isDirectory(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool isFile(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// Names of the *.json files in a directory, sorted.
std::vector<std::string> jsonFilesIn(const std::string &directory) {
  std::vector<std::string> names;
  if (DIR *dir = ::opendir(directory.c_str())) {
    while (const dirent *entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
        names.push_back(name);
    }
    ::closedir(dir);
  }
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

Result<Target> parseTarget(const std::string &jsonText, const std::string &origin) {
  const Json root = Json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded())
    return Status::error(origin + ": not valid JSON");
  if (!root.is_object())
    return Status::error(origin + ": expected a JSON object at the top level");

  Target target;
  TargetReader reader(origin, target);
  reader.onlyKnownKeys(root, "", {"name", "description", "cpu", "ddr", "cxl", "gpu", "pcie"});
  for (const char *key : {"name", "description"}) {
    auto found = root.find(key);
    if (found == root.end())
      reader.fail(key, "missing");
    else if (!found->is_string() || found->get<std::string>().empty())
      reader.fail(key, "expected a non-empty string");
  }
  if (reader.failed())
    return reader.status();
  target.name = root.at("name").get<std::string>();
  target.description = root.at("description").get<std::string>();
  readCpu(reader, root, target.cpu);
  readDdr(reader, root, target.ddr);
  readCxl(reader, root, target.cxl);
  readGpu(reader, root, target.gpu, target.pcie);
  if (reader.failed())
    return reader.status();
  return target;
}

Result<Target> loadTarget(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file || !isFile(path))
    return Status::error("cannot read target file " + path);
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad())
    return Status::error("cannot read target file " + path);
  Result<Target> target = parseTarget(text.str(), path);
  if (!target)
    return target;
  // One name for one file: `--target spr-a100` must mean the file spr-a100.json.
  if (target->name != fileStem(path))
    return Status::error(path + ": name '" + target->name + "' differs from the file name '" +
                         fileStem(path) + "'");
  target->path = path;
  return target;
}

std::string calibratedHostTargetPath() {
  if (const char *cache = std::getenv("XDG_CACHE_HOME"); cache && *cache == '/')
    return std::string(cache) + "/hetc/host.json";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/hetc/host.json";
  return "";
}

std::vector<std::string> targetDirectories() {
  std::vector<std::string> directories;
  char exe[4096];
  const ssize_t length = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length > 0) {
    std::string dir(exe, static_cast<size_t>(length));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string installed = dir + "/../share/hetc/targets";
    if (isDirectory(installed))
      directories.push_back(installed);
  }
  if (isDirectory(HETC_TARGETS_SOURCE_DIR))
    directories.push_back(HETC_TARGETS_SOURCE_DIR);
  return directories;
}

Result<Target> findTarget(const std::string &nameOrPath) {
  if (nameOrPath.size() > 5 && nameOrPath.compare(nameOrPath.size() - 5, 5, ".json") == 0)
    return loadTarget(nameOrPath);
  if (nameOrPath == kHostTarget) {
    const std::string path = calibratedHostTargetPath();
    if (path.empty() || !isFile(path))
      return Status::error("target 'host' has not been measured: run hetc calibrate first (it "
                           "writes " +
                           (path.empty() ? std::string("$HOME/.cache/hetc/host.json") : path) +
                           ")");
    return loadTarget(path);
  }
  const std::vector<std::string> directories = targetDirectories();
  for (const std::string &dir : directories) {
    const std::string path = dir + "/" + nameOrPath + ".json";
    if (isFile(path))
      return loadTarget(path);
  }
  if (directories.empty())
    return Status::error("unknown target '" + nameOrPath +
                         "': no target directory found (looked for share/hetc/targets next to "
                         "the program and " HETC_TARGETS_SOURCE_DIR ")");
  std::set<std::string> known;
  for (const std::string &dir : directories)
    for (const std::string &file : jsonFilesIn(dir))
      known.insert(fileStem(file));
  std::string list;
  for (const std::string &name : known)
    list += (list.empty() ? "" : ", ") + name;
  return Status::error("unknown target '" + nameOrPath + "' (known targets: " + list +
                       "; or a path to a .json target file)");
}

Result<std::vector<Target>> listTargets() {
  std::vector<Target> targets;
  std::set<std::string> seen;
  for (const std::string &dir : targetDirectories()) {
    for (const std::string &file : jsonFilesIn(dir)) {
      if (!seen.insert(fileStem(file)).second)
        continue; // the first directory wins, as in findTarget
      Result<Target> target = loadTarget(dir + "/" + file);
      if (!target)
        return target.status();
      targets.push_back(std::move(*target));
    }
  }
  // This machine, once hetc calibrate has measured it.
  if (const std::string path = calibratedHostTargetPath(); !path.empty() && isFile(path)) {
    Result<Target> host = loadTarget(path);
    if (!host)
      return host.status();
    if (seen.insert(host->name).second)
      targets.push_back(std::move(*host));
  }
  std::sort(targets.begin(), targets.end(),
            [](const Target &a, const Target &b) { return a.name < b.name; });
  return targets;
}

} // namespace hetc::compiler
