// Session files: one slot's KV cache and token history, written atomically and read back with
// every field checked. KV rows go to the file as the cache stores their elements, in row order
// whatever the cache's layout, and an INT8 cache's row scales with them.
#include "runtime/kv/Session.h"

#include "runtime/kv/KvCache.h"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace hetc {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "session files are little endian");

constexpr char kMagic[8] = {'H', 'E', 'T', 'C', 'S', 'E', 'S', 'S'};

std::string str(uint64_t value) { return std::to_string(value); }

std::string hex(uint64_t value) {
  char text[20];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

template <typename T> void put(uint8_t *header, size_t offset, T value) {
  std::memcpy(header + offset, &value, sizeof(T));
}

template <typename T> T get(const uint8_t *header, size_t offset) {
  T value;
  std::memcpy(&value, header + offset, sizeof(T));
  return value;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE *)>;

// Up to 1 MiB of one head's KV rows in row order, the form a session file holds them in
// whatever the cache's layout.
struct KvRowBuffer {
  KvRowBuffer(const plan::KvCacheDef &kv, uint64_t positionsWanted)
      : rowBytes(kv.head_dim() * dtypeBytes(kv.dtype())),
        positions(
            std::max<uint64_t>(1, std::min<uint64_t>(positionsWanted, (1u << 20) / rowBytes))),
        bytes(positions * rowBytes) {}
  uint64_t rowBytes;
  uint64_t positions;
  std::vector<uint8_t> bytes;
};

struct HashState {
  HashState() : state(XXH64_createState()) { XXH64_reset(state, 0); }
  ~HashState() { XXH64_freeState(state); }
  HashState(const HashState &) = delete;
  HashState &operator=(const HashState &) = delete;
  XXH64_state_t *state;
};

// Reads exactly `bytes` into `data`, adding them to the checksum.
bool readHashed(std::FILE *file, void *data, size_t bytes, HashState &hash) {
  if (std::fread(data, 1, bytes, file) != bytes)
    return false;
  XXH64_update(hash.state, data, bytes);
  return true;
}

bool writeHashed(std::FILE *file, const void *data, size_t bytes, HashState &hash) {
  XXH64_update(hash.state, data, bytes);
  return std::fwrite(data, 1, bytes, file) == bytes;
}

std::string kvShapeText(plan::DTypeDef dtype, uint64_t layers, uint64_t kvHeads, uint64_t headDim) {
  return str(layers) + " layers x " + str(kvHeads) + " KV heads x head_dim " + str(headDim) + ", " +
         plan::EnumNameDTypeDef(dtype);
}

// Opens a session file and reads its header and history, checking everything but the checksum;
// the file is left at the first KV byte and `hash` holds the history's bytes.
Result<File> openSession(const std::string &path, SessionInfo &info, uint64_t &checksum,
                         HashState &hash) {
  const std::string name = "session file " + path;
  File file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    return Status::error("cannot open " + name + ": " + std::strerror(errno));
  struct stat status;
  if (fstat(fileno(file.get()), &status) != 0 || !S_ISREG(status.st_mode))
    return Status::error(name + " is not a regular file");
  info.fileBytes = static_cast<uint64_t>(status.st_size);

  uint8_t header[kSessionHeaderBytes];
  if (info.fileBytes < sizeof(header) ||
      std::fread(header, 1, sizeof(header), file.get()) != sizeof(header))
    return Status::error(name + " is truncated: " + str(info.fileBytes) +
                         " bytes, shorter than the " + str(kSessionHeaderBytes) + "-byte header");
  if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0)
    return Status::error(path + " is not a hetc session file (no HETCSESS magic)");
  info.formatVersion = get<uint32_t>(header, 8);
  if (info.formatVersion != kSessionFormatVersion)
    return Status::error(name + " has format version " + str(info.formatVersion) +
                         "; this runtime reads version " + str(kSessionFormatVersion));
  if (get<uint32_t>(header, 12) != kSessionHeaderBytes)
    return Status::error(name + " has a corrupt header (header size " +
                         str(get<uint32_t>(header, 12)) + ", expected " + str(kSessionHeaderBytes) +
                         ")");
  info.fingerprint = get<uint64_t>(header, 16);
  info.positions = get<uint64_t>(header, 24);
  const uint64_t historyLength = get<uint64_t>(header, 32);
  const uint8_t dtype = header[40];
  info.elementBytes = get<uint32_t>(header, 44);
  info.layers = get<uint32_t>(header, 48);
  info.kvHeads = get<uint32_t>(header, 52);
  info.headDim = get<uint32_t>(header, 56);
  checksum = get<uint64_t>(header, 64);
  // INT4 is a weight format; no KV cache holds it.
  if (dtype > static_cast<uint8_t>(plan::DTypeDef::MAX) ||
      dtype == static_cast<uint8_t>(plan::DTypeDef::INT4) ||
      dtypeBytes(static_cast<plan::DTypeDef>(dtype)) != info.elementBytes)
    return Status::error(name + " has a corrupt header (KV dtype " + str(dtype) + " with " +
                         str(info.elementBytes) + "-byte elements)");
  info.kvDtype = static_cast<plan::DTypeDef>(dtype);
  if (historyLength < info.positions)
    return Status::error(name + " has a corrupt header (" + str(historyLength) +
                         " history tokens for " + str(info.positions) + " positions)");

  // Every count comes from the file: the size check, overflow-free, comes before any allocation.
  using Wide = unsigned __int128;
  const Wide kvBytes = Wide(info.layers) * 2 * info.kvHeads * info.positions *
                       kvRowBytes(info.kvDtype, info.headDim);
  const Wide expected = Wide(kSessionHeaderBytes) + Wide(historyLength) * sizeof(int32_t) + kvBytes;
  if (expected != info.fileBytes) {
    const std::string counts = " for " + str(historyLength) + " history tokens and " +
                               str(info.positions) + " positions of " +
                               kvShapeText(info.kvDtype, info.layers, info.kvHeads, info.headDim);
    if (expected > info.fileBytes)
      return Status::error(name + " is truncated: " + str(info.fileBytes) +
                           " bytes, its header needs " +
                           (expected > UINT64_MAX ? std::string("more than 2^64")
                                                  : str(static_cast<uint64_t>(expected))) +
                           counts);
    return Status::error(name + " has " + str(info.fileBytes) + " bytes, " +
                         str(static_cast<uint64_t>(expected)) + " expected" + counts);
  }
  info.kvBytes = static_cast<uint64_t>(kvBytes);
  info.history.resize(historyLength);
  if (!readHashed(file.get(), info.history.data(), historyLength * sizeof(int32_t), hash))
    return Status::error("cannot read " + name + ": " + std::strerror(errno));
  for (size_t i = 0; i < info.history.size(); ++i)
    if (info.history[i] < 0)
      return Status::error(name + " is corrupted: history token " + str(i) + " is id " +
                           std::to_string(info.history[i]));
  return file;
}

Status checksumMismatch(const std::string &path) {
  return Status::error("session file " + path + " is corrupted (checksum mismatch)");
}

} // namespace

uint64_t sessionFingerprint(const Plan &plan) {
  const plan::PlanDef &def = plan.def();
  HashState hash;
  auto add = [&](const auto &value) { XXH64_update(hash.state, &value, sizeof(value)); };
  auto addText = [&](const flatbuffers::String *text) {
    const uint64_t length = text ? text->size() : 0;
    add(length);
    if (length)
      XXH64_update(hash.state, text->data(), length);
  };
  add(kSessionFormatVersion);
  if (const plan::ModelDef *model = def.model()) {
    addText(model->architecture());
    for (uint32_t value : {model->vocab(), model->hidden(), model->layers(), model->heads(),
                           model->kv_heads(), model->head_dim(), model->intermediate()})
      add(value);
    add(model->rms_eps());
    add(static_cast<uint8_t>(model->tied_embeddings()));
  }
  if (def.ops())
    for (const plan::OpDef *op : *def.ops())
      if (const auto *attention = op->params_as_AttentionParamsDef())
        add(attention->scale());
  if (def.tensors() && def.segments())
    for (const plan::TensorDef *tensor : *def.tensors()) {
      add(static_cast<uint8_t>(tensor->dtype()));
      add(static_cast<uint8_t>(tensor->layout()));
      const uint64_t dims = tensor->shape() ? tensor->shape()->size() : 0;
      add(dims);
      for (uint64_t i = 0; i < dims; ++i)
        add(tensor->shape()->Get(static_cast<uint32_t>(i)));
      if (tensor->segment() < def.segments()->size())
        add(def.segments()->Get(tensor->segment())->xxh64());
    }
  if (const plan::KvCacheDef *kv = def.kv_cache()) {
    add(static_cast<uint8_t>(kv->dtype()));
    for (uint32_t value : {kv->layers(), kv->kv_heads(), kv->head_dim()})
      add(value);
  }
  return XXH64_digest(hash.state);
}

Result<SessionInfo> readSessionInfo(const std::string &path) {
  SessionInfo info;
  uint64_t checksum = 0;
  HashState hash;
  Result<File> file = openSession(path, info, checksum, hash);
  if (!file)
    return file.status();
  std::vector<uint8_t> buffer(std::min<uint64_t>(info.kvBytes, uint64_t{1} << 20));
  for (uint64_t left = info.kvBytes; left > 0;) {
    const size_t bytes = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
    if (!readHashed(file->get(), buffer.data(), bytes, hash))
      return Status::error("cannot read session file " + path + ": " + std::strerror(errno));
    left -= bytes;
  }
  if (XXH64_digest(hash.state) != checksum)
    return checksumMismatch(path);
  return info;
}

Status saveSession(const std::string &path, const Plan &plan, const KvCache &cache, uint32_t slot,
                   const std::vector<int32_t> &history) {
  const uint32_t slots = cache.slots();
  const uint32_t vocab = plan.def().model()->vocab();
  if (slot >= slots)
    return Status::error("cannot save slot " + str(slot) + ": the plan's --max-batch is " +
                         str(slots) + " (slots 0.." + str(slots - 1) + ")");
  const uint64_t positions = cache.cachedPositions(slot);
  if (history.size() < positions)
    return Status::error("cannot save slot " + str(slot) + ": it holds " + str(positions) +
                         " positions but the history has only " + str(history.size()) + " tokens");
  for (size_t i = 0; i < history.size(); ++i)
    if (history[i] < 0 || static_cast<uint32_t>(history[i]) >= vocab)
      return Status::error("cannot save slot " + str(slot) + ": history token " + str(i) +
                           " is id " + std::to_string(history[i]) + " but the vocabulary has " +
                           str(vocab) + " ids");
  const plan::KvCacheDef &kv = cache.def();
  const uint64_t elementBytes = dtypeBytes(kv.dtype());
  const bool scaled = kvHasRowScales(kv.dtype());

  uint8_t header[kSessionHeaderBytes] = {};
  std::memcpy(header, kMagic, sizeof(kMagic));
  put<uint32_t>(header, 8, kSessionFormatVersion);
  put<uint32_t>(header, 12, kSessionHeaderBytes);
  put<uint64_t>(header, 16, sessionFingerprint(plan));
  put<uint64_t>(header, 24, positions);
  put<uint64_t>(header, 32, history.size());
  header[40] = static_cast<uint8_t>(kv.dtype());
  put<uint32_t>(header, 44, static_cast<uint32_t>(elementBytes));
  put<uint32_t>(header, 48, kv.layers());
  put<uint32_t>(header, 52, kv.kv_heads());
  put<uint32_t>(header, 56, kv.head_dim());

  const std::string name = "session file " + path;
  std::string temporary = path + ".tmp-XXXXXX";
  const int fd = mkstemp(temporary.data());
  if (fd < 0)
    return Status::error("cannot write " + name + ": " + std::strerror(errno));
  File file(fdopen(fd, "wb"), &std::fclose);
  if (!file) {
    const int error = errno;
    close(fd);
    unlink(temporary.c_str());
    return Status::error("cannot write " + name + ": " + std::strerror(error));
  }
  auto failed = [&](int error) {
    file.reset();
    unlink(temporary.c_str());
    return Status::error("cannot write " + name + ": " + std::strerror(error));
  };

  HashState hash;
  if (std::fwrite(header, 1, sizeof(header), file.get()) != sizeof(header) ||
      !writeHashed(file.get(), history.data(), history.size() * sizeof(int32_t), hash))
    return failed(errno);
  KvRowBuffer rows(kv, positions);
  for (uint64_t layer = 0; layer < kv.layers(); ++layer)
    for (bool values : {false, true})
      for (uint64_t head = 0; head < kv.kv_heads(); ++head) {
        for (uint64_t first = 0; first < positions; first += rows.positions) {
          const uint64_t count = std::min(rows.positions, positions - first);
          kernels::copyKvRowsOut(cache.view(), !values, layer, slot, head, first, count,
                                 kv.head_dim(), rows.bytes.data());
          if (!writeHashed(file.get(), rows.bytes.data(), count * rows.rowBytes, hash))
            return failed(errno);
        }
        // A head's scales are consecutive: one write after its rows.
        if (scaled && positions > 0 &&
            !writeHashed(file.get(), cache.scale(values, layer, slot, head, 0),
                         positions * kKvScaleBytes, hash))
          return failed(errno);
      }
  put<uint64_t>(header, 64, XXH64_digest(hash.state));
  // The checksum goes into the header last; the data reach the disk before the rename makes the
  // file visible under its name.
  if (std::fflush(file.get()) != 0 ||
      pwrite(fileno(file.get()), header, sizeof(header), 0) != sizeof(header) ||
      fsync(fileno(file.get())) != 0)
    return failed(errno);
  if (std::fclose(file.release()) != 0)
    return failed(errno);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temporary.c_str());
    return Status::error("cannot write " + name + ": " + std::strerror(error));
  }
  return Status();
}

Result<SessionInfo> restoreSession(const std::string &path, const Plan &plan, KvCache &cache,
                                   uint32_t slot) {
  const uint32_t slots = cache.slots();
  const uint32_t vocab = plan.def().model()->vocab();
  if (slot >= slots)
    return Status::error("cannot restore into slot " + str(slot) + ": the plan's --max-batch is " +
                         str(slots) + " (slots 0.." + str(slots - 1) + ")");
  SessionInfo info;
  uint64_t checksum = 0;
  HashState hash;
  Result<File> file = openSession(path, info, checksum, hash);
  if (!file)
    return file.status();
  const std::string name = "session file " + path;
  const plan::KvCacheDef &kv = cache.def();
  const uint64_t fingerprint = sessionFingerprint(plan);
  if (info.fingerprint != fingerprint) {
    const std::string theirs = kvShapeText(info.kvDtype, info.layers, info.kvHeads, info.headDim);
    const std::string ours = kvShapeText(kv.dtype(), kv.layers(), kv.kv_heads(), kv.head_dim());
    if (theirs == ours)
      return Status::error(name + " was saved with another model or other weights (model " +
                           "fingerprint " + hex(info.fingerprint) + ", this plan's " +
                           hex(fingerprint) + ", both with a KV cache of " + ours + ")");
    return Status::error(name + " was saved with another model: its KV cache is " + theirs +
                         ", this plan's " + ours + " (model fingerprint " + hex(info.fingerprint) +
                         ", this plan's " + hex(fingerprint) + ")");
  }
  // Equal fingerprints cover these; a mismatch here is a file whose header lies.
  if (info.kvDtype != kv.dtype() || info.layers != kv.layers() || info.kvHeads != kv.kv_heads() ||
      info.headDim != kv.head_dim())
    return Status::error(name + " has a corrupt header (KV cache " +
                         kvShapeText(info.kvDtype, info.layers, info.kvHeads, info.headDim) +
                         " under this plan's fingerprint)");
  if (info.positions > cache.maxSeq())
    return Status::error(name + " holds " + str(info.positions) +
                         " positions but the plan's --max-seq is " + str(cache.maxSeq()));
  for (size_t i = 0; i < info.history.size(); ++i)
    if (static_cast<uint32_t>(info.history[i]) >= vocab)
      return Status::error(name + " history token " + str(i) + " is id " +
                           std::to_string(info.history[i]) + " but the vocabulary has " +
                           str(vocab) + " ids (0.." + str(vocab - 1) + ")");

  // From here the slot's rows are overwritten: it holds nothing until all of them are in.
  cache.setCachedPositions(slot, 0);
  const bool scaled = kvHasRowScales(kv.dtype());
  KvRowBuffer rows(kv, info.positions);
  for (uint64_t layer = 0; layer < kv.layers(); ++layer)
    for (bool values : {false, true})
      for (uint64_t head = 0; head < kv.kv_heads(); ++head) {
        bool ok = true;
        for (uint64_t first = 0; ok && first < info.positions; first += rows.positions) {
          const uint64_t count = std::min(rows.positions, info.positions - first);
          ok = readHashed(file->get(), rows.bytes.data(), count * rows.rowBytes, hash);
          if (ok)
            kernels::copyKvRowsIn(cache.view(), !values, layer, slot, head, first, count,
                                  kv.head_dim(), rows.bytes.data());
        }
        if (ok && scaled && info.positions > 0)
          ok = readHashed(file->get(), cache.scale(values, layer, slot, head, 0),
                          info.positions * kKvScaleBytes, hash);
        if (!ok)
          return Status::error("cannot read " + name + ": " +
                               (std::ferror(file->get()) ? std::strerror(errno)
                                                         : "it ended early (changed while read?)"));
      }
  if (XXH64_digest(hash.state) != checksum)
    return checksumMismatch(path);
  cache.setCachedPositions(slot, info.positions);
  return info;
}

} // namespace hetc
