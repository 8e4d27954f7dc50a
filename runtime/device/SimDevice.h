// The software device: the device interface on the CPU, for testing every GPU path on a machine
// without one. It checks what a real GPU lets pass silently:
//
// - its memory is its own: arenas at addresses no host pointer has (user space ends below
//   0x8000'0000'0000), filled with 0xFF bytes (a NaN in every float format) when allocated, so a
//   host pointer passed as a device one, a range outside an allocation, or a read of memory
//   nothing wrote fails loudly or poisons the result;
// - ordering: every access (copies, and the ranges a launch declares) is checked against the last
//   conflicting ones with vector clocks: a read or write not ordered after them by stream order or
//   an event fails at enqueue, whatever order the work happens to run in;
// - completion order: work runs when the host synchronizes, the ready streams' next operations
//   picked in a seeded random order, so a result that depends on an order nothing guarantees
//   differs between seeds;
// - a kernel reads only what its launch declared (KernelContext::view refuses the rest).
//
// A virtual clock models time: a copy over the link takes latency + bytes / bandwidth (the
// target's PCIe figures), a launch a fixed overhead, a graph replay one overhead for all of its
// launches; elapsedMicros() is each stream's end.
#pragma once

#include "runtime/device/Device.h"

#include <memory>
#include <random>

namespace hetc::device {

struct SimOptions {
  double linkGBs = 49.8;          // host <-> device (spr-h100's PCIe)
  double linkLatencyMicros = 10;  // per copy over the link
  double deviceGBs = 1733;        // device <-> device copies
  double launchMicros = 4;        // a launch's host and device overhead
  double graphLaunchMicros = 8;   // a replay's, for all its launches
  uint64_t seed = 1;              // the completion order of work on different streams
};

class SimDevice final : public Device {
public:
  explicit SimDevice(SimOptions options = {});
  ~SimDevice() override;

  std::string name() const override;
  bool has(const Kernel &kernel) const override { return kernel.sim != nullptr; }
  Result<DevicePtr> allocate(size_t bytes, size_t alignment = 256) override;
  Result<StreamId> createStream() override;
  Result<EventId> createEvent() override;
  Status record(EventId event, StreamId stream) override;
  Status wait(StreamId stream, EventId event) override;
  Status synchronize(StreamId stream) override;
  Status copyToDevice(StreamId stream, DevicePtr dst, const void *src, size_t bytes) override;
  Status copyToHost(StreamId stream, void *dst, DevicePtr src, size_t bytes) override;
  Status copyOnDevice(StreamId stream, DevicePtr dst, DevicePtr src, size_t bytes) override;
  Status launch(StreamId stream, const Kernel &kernel, const void *args, size_t argsBytes,
                const std::vector<Access> &accesses) override;
  Status beginCapture(StreamId stream) override;
  Result<GraphId> endCapture(StreamId stream) override;
  Status replay(GraphId graph, StreamId stream) override;

  // The virtual time at which everything enqueued on `stream` so far ends, in microseconds.
  double elapsedMicros(StreamId stream) const;
  // Launches executed so far (a replayed graph's count each time).
  uint64_t launches() const;

  struct State;

private:
  std::unique_ptr<State> s_;
};

} // namespace hetc::device
