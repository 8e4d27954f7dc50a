#include "runtime/format/PlanWriter.h"

#include "runtime/format/Plan.h"

#include <flatbuffers/flatbuffers.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace hetc {
namespace {

std::string errnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

bool alignUp(uint64_t value, uint64_t alignment, uint64_t *out) {
  uint64_t bumped;
  if (__builtin_add_overflow(value, alignment - 1, &bumped))
    return false;
  *out = bumped / alignment * alignment;
  return true;
}

// Null entries in the object tree would crash FlatBuffers' Pack; refuse them with a message.
Status checkPackable(const plan::PlanDefT &plan) {
  auto nullEntry = [](const auto &items) {
    for (const auto &item : items)
      if (!item)
        return true;
    return false;
  };
  if (nullEntry(plan.tensors) || nullEntry(plan.buffers) || nullEntry(plan.ops) ||
      nullEntry(plan.sublayers))
    return Status::error("cannot write a plan with a null tensor, buffer, op or sublayer entry");
  for (size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i]->params.type != plan::OpParamsDef::NONE && !plan.ops[i]->params.value)
      return Status::error("cannot write a plan whose op " + std::to_string(i) +
                           " names a params type but carries no params");
  return Status();
}

// Packs `plan` as a size-prefixed FlatBuffer with identifier "HPLN". Every scalar is written,
// defaults included, so the size does not depend on the values (segment offsets among them).
void packPlan(const plan::PlanDefT &plan, flatbuffers::FlatBufferBuilder &builder) {
  builder.Clear();
  builder.ForceDefaults(true);
  plan::FinishSizePrefixedPlanDefBuffer(builder, plan::PlanDef::Pack(builder, &plan));
}

// Places segment i at the first 4096-aligned offset after the FlatBuffer and segment i-1.
bool placeSegments(plan::PlanDefT &plan, uint64_t flatbufferSize) {
  uint64_t end = flatbufferSize;
  for (auto &segment : plan.segments) {
    uint64_t cursor;
    if (!alignUp(end, kSegmentAlignment, &cursor))
      return false;
    segment->offset = cursor;
    if (__builtin_add_overflow(cursor, segment->size, &end))
      return false;
  }
  return true;
}

// An open temporary file that is removed unless commit() renames it into place.
class PendingFile {
public:
  explicit PendingFile(std::string finalPath)
      : finalPath_(std::move(finalPath)), tmpPath_(finalPath_ + ".tmp") {}
  ~PendingFile() {
    if (fd_ >= 0)
      ::close(fd_);
    if (!committed_)
      ::unlink(tmpPath_.c_str());
  }

  Status open() {
    fd_ = ::open(tmpPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      return Status::error("cannot create plan file '" + tmpPath_ + "': " + errnoText(errno));
    return Status();
  }

  Status write(const void *data, uint64_t size) {
    const char *cursor = static_cast<const char *>(data);
    while (size > 0) {
      // Linux writes at most about 2 GiB per call; the loop also covers short writes.
      const size_t chunk = size < (uint64_t{1} << 30) ? size : (size_t{1} << 30);
      const ssize_t written = ::write(fd_, cursor, chunk);
      if (written < 0) {
        if (errno == EINTR)
          continue;
        return Status::error("cannot write plan file '" + tmpPath_ + "': " + errnoText(errno));
      }
      cursor += written;
      size -= static_cast<uint64_t>(written);
    }
    return Status();
  }

  // Overwrites bytes already written (the FlatBuffer, once the checksums are known).
  Status writeAt(uint64_t offset, const void *data, uint64_t size) {
    const char *cursor = static_cast<const char *>(data);
    while (size > 0) {
      const ssize_t written = ::pwrite(fd_, cursor, size, static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR)
          continue;
        return Status::error("cannot write plan file '" + tmpPath_ + "': " + errnoText(errno));
      }
      cursor += written;
      offset += static_cast<uint64_t>(written);
      size -= static_cast<uint64_t>(written);
    }
    return Status();
  }

  Status writeZeros(uint64_t size) {
    static const char kZeros[4096] = {};
    while (size > 0) {
      const uint64_t chunk = size < sizeof(kZeros) ? size : sizeof(kZeros);
      Status status = write(kZeros, chunk);
      if (!status)
        return status;
      size -= chunk;
    }
    return Status();
  }

  // Flushes to disk before the rename so a crash leaves the old file or the whole new one.
  Status commit() {
    if (::fsync(fd_) != 0)
      return Status::error("cannot write plan file '" + tmpPath_ + "': " + errnoText(errno));
    const int closeResult = ::close(fd_);
    fd_ = -1;
    if (closeResult != 0)
      return Status::error("cannot write plan file '" + tmpPath_ + "': " + errnoText(errno));
    if (std::rename(tmpPath_.c_str(), finalPath_.c_str()) != 0)
      return Status::error("cannot rename '" + tmpPath_ + "' to '" + finalPath_ +
                           "': " + errnoText(errno));
    committed_ = true;
    return Status();
  }

private:
  std::string finalPath_;
  std::string tmpPath_;
  int fd_ = -1;
  bool committed_ = false;
};

} // namespace

void setKvLayout(plan::KvCacheDefT &kv, const KvLayout &layout) {
  kv.pos_stride = layout.posStride;
  kv.head_stride = layout.headStride;
  kv.slot_stride = layout.slotStride;
  kv.layer_stride = layout.layerStride;
  kv.k_offset = layout.kOffset;
  kv.v_offset = layout.vOffset;
  kv.arena_size = layout.arenaSize;
  kv.k_scale_offset = layout.kScaleOffset;
  kv.v_scale_offset = layout.vScaleOffset;
  kv.scale_head_stride = layout.scaleHeadStride;
  kv.scale_slot_stride = layout.scaleSlotStride;
  kv.scale_layer_stride = layout.scaleLayerStride;
}

Status writePlanFile(const std::string &path, plan::PlanDefT &plan,
                     const std::vector<WeightPayload> &payloads) {
  Status packable = checkPackable(plan);
  if (!packable)
    return Status::error("plan '" + path + "': " + packable.message());
  if (plan.schema_version == 0)
    plan.schema_version = kPlanSchemaVersion;

  plan.segments.clear();
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i].size > 0 && !payloads[i].data && !payloads[i].produce)
      return Status::error("plan '" + path + "': weight payload " + std::to_string(i) + " has " +
                           std::to_string(payloads[i].size) + " bytes but no data");
    auto segment = std::make_unique<plan::SegmentDefT>();
    segment->size = payloads[i].size;
    plan.segments.push_back(std::move(segment));
  }

  // Offsets depend on the FlatBuffer's size, which with forced defaults depends on neither the
  // offsets nor the checksums (filled in after the segments are written); the loop only guards
  // against that assumption ever failing.
  flatbuffers::FlatBufferBuilder builder(64 * 1024);
  uint64_t flatbufferSize = 0;
  bool settled = false;
  for (int attempt = 0; attempt < 4 && !settled; ++attempt) {
    if (!placeSegments(plan, flatbufferSize))
      return Status::error("plan '" + path + "': weight segments exceed a 64-bit file size");
    packPlan(plan, builder);
    settled = builder.GetSize() == flatbufferSize;
    flatbufferSize = builder.GetSize();
  }
  if (!settled)
    return Status::error("plan '" + path +
                         "': the FlatBuffer size did not settle while placing segments");
  if (flatbufferSize >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return Status::error("plan '" + path + "': the FlatBuffer needs " +
                         std::to_string(flatbufferSize) +
                         " bytes, over the 2 GiB FlatBuffers limit");

  PendingFile file(path);
  Status status = file.open();
  // The FlatBuffer's place is held by its checksum-less version until the real one is known.
  if (status)
    status = file.write(builder.GetBufferPointer(), flatbufferSize);
  uint64_t written = flatbufferSize;
  for (size_t i = 0; status && i < payloads.size(); ++i) {
    const WeightPayload &payload = payloads[i];
    status = file.writeZeros(plan.segments[i]->offset - written);
    if (!status)
      break;
    if (payload.data) {
      plan.segments[i]->xxh64 = XXH64(payload.data, payload.size, 0);
      status = file.write(payload.data, payload.size);
    } else {
      XXH64_state_t *hash = XXH64_createState();
      XXH64_reset(hash, 0);
      uint64_t made = 0;
      status = payload.produce([&](const void *bytes, uint64_t size) {
        if (size > payload.size - made)
          return Status::error("weight payload " + std::to_string(i) + " made more than its " +
                               std::to_string(payload.size) + " bytes");
        made += size;
        XXH64_update(hash, bytes, size);
        return file.write(bytes, size);
      });
      plan.segments[i]->xxh64 = XXH64_digest(hash);
      XXH64_freeState(hash);
      if (status && made != payload.size)
        status = Status::error("weight payload " + std::to_string(i) + " made " +
                               std::to_string(made) + " of its " + std::to_string(payload.size) +
                               " bytes");
      if (!status)
        return Status::error("plan '" + path + "': " + status.message());
    }
    written = plan.segments[i]->offset + payload.size;
  }
  if (status) {
    packPlan(plan, builder);
    if (builder.GetSize() != flatbufferSize)
      return Status::error("plan '" + path + "': the FlatBuffer changed size with its checksums");
    status = file.writeAt(0, builder.GetBufferPointer(), flatbufferSize);
  }
  // A plan without weights still fills the FlatBuffer's last page, as the layout promises.
  if (status && payloads.empty()) {
    uint64_t padded = 0;
    alignUp(flatbufferSize, kSegmentAlignment, &padded);
    status = file.writeZeros(padded - flatbufferSize);
  }
  if (status)
    status = file.commit();
  return status;
}

} // namespace hetc
