// A plan's steps on a device (runtime/device/Device.h): every op of the plan launched there, with
// the weights, activations, KV cache and step data in one device allocation made at create().
//
// The engine (Engine.h) validates and packs a step as for the CPU; run() then copies the step's
// block (row count, tokens, positions, slots, the rows asking for logits) to the device in one
// copy, runs the launches of the step's row bucket (decode: at most 8 rows, the GEMVs; prefill:
// any), captured as one graph per bucket at create(), and copies back the logits rows or the
// argmax of the sequences that asked. The kernels read their row counts from the step block, so
// one graph serves every step of its bucket; nothing per step allocates, builds or walks the plan.
//
// This is the executor of plans whose layers live on the device: every op runs there, whatever
// device the plan's cost model chose per op (the split plans, CPU and GPU sublayers together, are
// executed by the CPU engine today). Session files read and write the host's KV cache and are
// refused with a device.
#pragma once

#include "runtime/device/Device.h"
#include "runtime/executor/Op.h"
#include "runtime/format/Plan.h"
#include "runtime/format/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetc {

class DeviceSteps {
public:
  struct Options {
    // Replay one captured graph per bucket (the default) or enqueue each launch every step.
    bool graphs = true;
  };

  // Lays out device memory for `plan` (which must outlive this), copies the weights once and
  // builds the launches; fails naming the op when the device has no kernel it needs.
  static Result<std::unique_ptr<DeviceSteps>> create(std::shared_ptr<device::Device> device,
                                                     const Plan &plan, Options options);
  ~DeviceSteps();
  DeviceSteps(const DeviceSteps &) = delete;
  DeviceSteps &operator=(const DeviceSteps &) = delete;

  // Runs a step the engine validated and packed. Then, for `sequences` sequences: in a logits step
  // the logits buffer's first `sequences` rows are copied to the same rows of `hostArena` (the
  // engine's activation arena, which holds the plan's buffers at the plan's offsets); in an
  // argmax step each asking sequence's answer to argmax[its index in the step].
  Status run(const StepRows &step, size_t sequences, float *hostArena, int32_t *argmax);

  // Copies `bytes` from the host to the device's KV arena at `offset` (the plan's KV layout, as
  // the host's arena has it), enqueued; finishCopies waits for them. Not on the per-token path:
  // benchmarks fill a context this way.
  Status copyToKv(uint64_t offset, const void *host, uint64_t bytes);
  Status finishCopies();

  const device::Device &device() const { return *device_; }
  size_t deviceBytes() const { return deviceBytes_; }
  // The launches of a prefill step, in order: (op kind, kernel name) of each.
  struct LaunchInfo {
    OpKind kind;
    const char *kernel;
  };
  std::vector<LaunchInfo> launches(bool decodeBucket) const;
  // "sim (software device, ...): 12.3 MiB of device memory, 31 launches a decode step and 31 a
  // prefill step, each bucket one graph".
  std::string describe() const;

  struct Launch;
  struct Layout;

private:
  DeviceSteps() = default;
  Status build(const Plan &plan, bool decodeBucket, std::vector<Launch> &launches);
  Status enqueue(const std::vector<Launch> &launches);

  std::shared_ptr<device::Device> device_;
  device::StreamId stream_ = 0;
  Options options_;
  size_t deviceBytes_ = 0;
  std::unique_ptr<Layout> layout_;
  std::vector<Launch> decode_, prefill_;
  device::GraphId decodeGraph_ = 0, prefillGraph_ = 0;
  std::vector<uint8_t> stepBlock_; // the host's copy of the step block, sized at create()
  // The plan's logits buffer: its offset in the activation arena and its rows' bytes.
  uint64_t logitsOffset_ = 0, logitsRowBytes_ = 0, vocab_ = 0;
};

// The kernel rows at most that a decode bucket's step has (the GEMVs' bound).
constexpr uint32_t kDeviceDecodeRows = 8;

} // namespace hetc
