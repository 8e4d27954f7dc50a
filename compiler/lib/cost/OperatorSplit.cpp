// Park & Egger's split-point search over per-operator CPU, GPU and transfer times.
#include "hetc/compiler/OperatorSplit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace hetc::compiler {
namespace {

std::string trim(const std::string &text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos)
    return "";
  const size_t last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::vector<std::string> splitFields(const std::string &line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  std::string field;
  while (std::getline(stream, field, ','))
    fields.push_back(trim(field));
  if (!line.empty() && line.back() == ',')
    fields.push_back("");
  return fields;
}

bool parseMs(const std::string &text, double &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(value) && value >= 0;
}

// The CPU's and the GPU's shares of operator `k` over positions [begin, end).
double overlap(double begin, double end, size_t k) {
  return std::max(0.0, std::min(end, double(k + 1)) - std::max(begin, double(k)));
}

Split evaluateSplit(const std::vector<OperatorTime> &ops, unsigned batches, double begin,
                    double end) {
  Split split;
  split.gpuBegin = begin;
  split.gpuEnd = end;
  double cpu = 0, h2d = 0, gpu = 0, kv = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    const double onGpu = overlap(begin, end, k);
    cpu += (1 - onGpu) * ops[k].cpuMs;
    h2d += onGpu * ops[k].h2dMs;
    gpu += onGpu * ops[k].gpuMs;
    if (ops[k].cacheData)
      kv += onGpu * ops[k].h2dMs;
  }
  const double n = ops.size();
  split.cpuMs = batches * cpu;
  split.h2dMs = h2d + (batches - 1.0) * (gpu + kv);
  split.latencyMs = std::max(split.cpuMs, split.h2dMs);
  split.splitPoints = (begin > 0 && begin < n) + (end > 0 && end < n && end != begin);
  split.cutsOperator = begin != std::floor(begin) || end != std::floor(end);
  return split;
}

// Latency first; then fewer split points, no cut, and balance (Park & Egger pick the
// configuration that "minimizes both overall latency and inter-stage imbalance").
bool better(const Split &a, const Split &b) {
  const double tolerance = 1e-9 * std::max(1.0, std::max(a.latencyMs, b.latencyMs));
  if (std::fabs(a.latencyMs - b.latencyMs) > tolerance)
    return a.latencyMs < b.latencyMs;
  if (a.splitPoints != b.splitPoints)
    return a.splitPoints < b.splitPoints;
  if (a.cutsOperator != b.cutsOperator)
    return !a.cutsOperator;
  return std::fabs(a.cpuMs - a.h2dMs) < std::fabs(b.cpuMs - b.h2dMs);
}

std::string operatorRange(const std::vector<OperatorTime> &ops, double begin, double end) {
  std::string text;
  const size_t first = static_cast<size_t>(std::floor(begin));
  for (size_t k = first; k < ops.size() && double(k) < end; ++k) {
    const double share = overlap(begin, end, k);
    if (share <= 0)
      continue;
    std::string item = ops[k].name;
    if (share < 1) {
      char fraction[32];
      std::snprintf(fraction, sizeof(fraction), "%.3g of ", share);
      item = fraction + item;
    }
    text += (text.empty() ? "" : ", ") + item;
  }
  return text;
}

} // namespace

Result<std::vector<OperatorTime>> parseOperatorTimes(const std::string &csvText,
                                                     const std::string &origin) {
  static const std::vector<std::string> kHeader = {"op",     "h2d_ms", "cpu_ms",
                                                   "gpu_ms", "cache",  "splittable"};
  std::vector<OperatorTime> ops;
  std::stringstream stream(csvText);
  std::string line;
  size_t lineNumber = 0;
  bool headerSeen = false;
  while (std::getline(stream, line)) {
    ++lineNumber;
    const std::string content = trim(line);
    if (content.empty() || content[0] == '#')
      continue;
    const std::string where = origin + ":" + std::to_string(lineNumber) + ": ";
    const std::vector<std::string> fields = splitFields(content);
    if (!headerSeen) {
      if (fields != kHeader)
        return Status::error(where + "expected the header op,h2d_ms,cpu_ms,gpu_ms,cache,"
                                     "splittable");
      headerSeen = true;
      continue;
    }
    if (fields.size() != kHeader.size())
      return Status::error(where + "expected 6 fields, got " + std::to_string(fields.size()));
    OperatorTime op;
    op.name = fields[0];
    if (op.name.empty())
      return Status::error(where + "op: empty name");
    const char *columns[] = {"h2d_ms", "cpu_ms", "gpu_ms"};
    double *values[] = {&op.h2dMs, &op.cpuMs, &op.gpuMs};
    for (int c = 0; c < 3; ++c)
      if (!parseMs(fields[1 + c], *values[c]))
        return Status::error(where + columns[c] + ": '" + fields[1 + c] +
                             "' is not a non-negative number of milliseconds");
    for (int c = 4; c < 6; ++c)
      if (fields[c] != "0" && fields[c] != "1")
        return Status::error(where + kHeader[c] + ": expected 0 or 1, got '" + fields[c] + "'");
    op.cacheData = fields[4] == "1";
    op.splittable = fields[5] == "1";
    ops.push_back(op);
  }
  if (!headerSeen)
    return Status::error(origin + ": empty (expected the header op,h2d_ms,cpu_ms,gpu_ms,cache,"
                                  "splittable and one line per operator)");
  if (ops.empty())
    return Status::error(origin + ": no operators");
  return ops;
}

Result<std::vector<OperatorTime>> loadOperatorTimes(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status::error("cannot read operator times " + path);
  std::stringstream text;
  text << file.rdbuf();
  return parseOperatorTimes(text.str(), path);
}

std::vector<OperatorTime> predictOperatorTimes(const ModelShape &model, const Machine &machine,
                                               uint64_t batch, uint64_t len,
                                               const LayerPlacement &placement) {
  const LayerSize size = layerSize(model, Stage::Decode, batch, len);
  // Eq. 8 on each device, and the second operand over the link, for one sublayer's share.
  auto piece = [&](const char *name, unsigned sublayer, double share, bool cache) {
    const SublayerSize &s = size.sublayers[sublayer];
    const Tier yTier = cache ? placement.kvTier : placement.weightHostTier;
    OperatorTime op;
    op.name = name;
    op.cpuMs = 1e3 * share *
               (s.xBytes / machine.ddrBytesPerS + s.yBytes / machine.cpuReadBytesPerS(yTier) +
                s.flops / machine.cpuFlops);
    op.gpuMs =
        1e3 * share * ((s.xBytes + s.yBytes) / machine.gpuBytesPerS + s.flops / machine.gpuFlops);
    const bool resident = cache ? placement.kvTier == Tier::Gpu : placement.weightsOnGpu[sublayer];
    op.h2dMs = resident ? 0 : 1e3 * share * s.yBytes / machine.pcieFromBytesPerS(yTier);
    op.cacheData = cache;
    op.splittable = sublayer == 1;
    return op;
  };
  const double q = double(model.queryDim()), kv = double(model.kvDim());
  std::vector<OperatorTime> ops = {piece("q", 0, q / (q + 2 * kv), false),
                                   piece("k", 0, kv / (q + 2 * kv), false),
                                   piece("v", 0, kv / (q + 2 * kv), false),
                                   piece("scores", 1, 1, true),
                                   piece("wv", 2, 1, true),
                                   piece("out", 3, 1, false)};
  if (model.gatedFfn) {
    ops.push_back(piece("gate", 4, 0.5, false));
    ops.push_back(piece("up", 4, 0.5, false));
    ops.push_back(piece("down", 5, 1, false));
  } else {
    ops.push_back(piece("fc1", 4, 1, false));
    ops.push_back(piece("fc2", 5, 1, false));
  }
  return ops;
}

SplitSearch searchSplits(const std::vector<OperatorTime> &ops, unsigned batches, unsigned chunks) {
  SplitSearch search;
  search.batches = std::max(1u, batches);
  chunks = std::max(1u, chunks);
  const size_t n = ops.size();

  std::vector<double> positions;
  for (size_t k = 0; k <= n; ++k) {
    positions.push_back(double(k));
    if (k < n && ops[k].splittable)
      for (unsigned c = 1; c < chunks; ++c)
        positions.push_back(double(k) + double(c) / chunks);
  }

  search.gpuOnly = evaluateSplit(ops, search.batches, 0, double(n));
  search.prefixOnly = search.prefixCut = search.single = search.twoPoints = search.best =
      search.gpuOnly;
  for (double begin : positions) {
    for (double end : positions) {
      if (end < begin)
        continue;
      const Split split = evaluateSplit(ops, search.batches, begin, end);
      if (better(split, search.best))
        search.best = split;
      if (end == double(n) && better(split, search.prefixCut))
        search.prefixCut = split;
      if (split.cutsOperator)
        continue;
      if (better(split, search.twoPoints))
        search.twoPoints = split;
      if (split.splitPoints <= 1 && better(split, search.single))
        search.single = split;
      if (end == double(n) && better(split, search.prefixOnly))
        search.prefixOnly = split;
    }
  }
  return search;
}

std::string describeSplit(const std::vector<OperatorTime> &ops, const Split &split) {
  const double n = double(ops.size());
  std::string text;
  auto part = [&](const char *device, double begin, double end) {
    const std::string range = operatorRange(ops, begin, end);
    if (!range.empty())
      text += std::string(text.empty() ? "" : " | ") + device + ": " + range;
  };
  part("cpu", 0, split.gpuBegin);
  part("gpu", split.gpuBegin, split.gpuEnd);
  part("cpu", split.gpuEnd, n);
  return text;
}

} // namespace hetc::compiler
