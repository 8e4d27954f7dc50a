// The device interface: what the runtime asks of an accelerator, with no vendor header in it. Two
// implementations: CUDA (a library loaded only when a plan has GPU work and a GPU is present) and
// the software device (SimDevice.h), which runs on the CPU and checks what a GPU would not: every
// access ordered, every pointer the device's own.
//
// The model is CUDA's, reduced to what a plan needs:
// - memory: device addresses (DevicePtr) in arenas allocated when an engine is created, never on
//   the per-token path; the host never dereferences them;
// - streams: each runs its work in the order it was enqueued; work on different streams is
//   unordered unless an event orders it (record on one stream, wait on another);
// - copies between host and device (host memory registered once, never per token) and on the
//   device;
// - launches of a kernel, a device implementation of an op, with an argument block copied at the
//   launch and the memory it reads and writes declared;
// - graphs: the work enqueued on a stream between beginCapture and endCapture, replayed as one
//   unit; what varies per step lives in device memory the step's first copy refreshes.
#pragma once

#include "runtime/format/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hetc::device {

// A device address. Host code carries it and does arithmetic on it; only the device reads
// through it.
struct DevicePtr {
  uint64_t address = 0;
  DevicePtr operator+(uint64_t offset) const { return DevicePtr{address + offset}; }
  bool operator==(const DevicePtr &other) const { return address == other.address; }
};

using StreamId = uint32_t;
using EventId = uint32_t;
using GraphId = uint32_t;

// A range of device memory a launch reads or writes (the software device checks each is ordered
// after the last conflicting access).
struct Access {
  DevicePtr ptr;
  size_t bytes = 0;
  bool write = false;
};

class Device;

// Where a launched kernel finds its memory: device addresses translated for the kernel's code.
// The software device hands its kernels host views of its arena; CUDA kernels use the addresses.
class KernelContext {
public:
  virtual ~KernelContext() = default;
  // The bytes at `ptr` as the kernel's code reads them; null (and the launch fails) for an
  // address outside the device's memory or a range not declared in the launch's accesses.
  virtual void *view(DevicePtr ptr, size_t bytes) = 0;
};

// A device implementation of an op: the software device runs `sim` (portable CPU code over the
// context's views); the CUDA device launches the kernel of the same name in libhetc_cuda.so
// (codegen/cuda/Registry.h).
struct Kernel {
  const char *name = "";
  void (*sim)(KernelContext &context, const void *args) = nullptr;
};

class Device {
public:
  virtual ~Device() = default;
  // "sim (software device, PCIe 49.8 GB/s)", "NVIDIA H100 80GB HBM3 (sm_90)".
  virtual std::string name() const = 0;
  // Whether this device implements `kernel` (the software device: a sim function; CUDA: a kernel
  // of that name in libhetc_cuda.so).
  virtual bool has(const Kernel &kernel) const = 0;

  // Device memory, allocated when an engine is created; freed with the device.
  virtual Result<DevicePtr> allocate(size_t bytes, size_t alignment = 256) = 0;

  virtual Result<StreamId> createStream() = 0;
  virtual Result<EventId> createEvent() = 0;
  // The event completes when everything enqueued on `stream` before it has.
  virtual Status record(EventId event, StreamId stream) = 0;
  // Work enqueued on `stream` after this waits for the event's last record.
  virtual Status wait(StreamId stream, EventId event) = 0;
  // The host waits for everything enqueued on `stream`.
  virtual Status synchronize(StreamId stream) = 0;

  virtual Status copyToDevice(StreamId stream, DevicePtr dst, const void *src, size_t bytes) = 0;
  virtual Status copyToHost(StreamId stream, void *dst, DevicePtr src, size_t bytes) = 0;
  virtual Status copyOnDevice(StreamId stream, DevicePtr dst, DevicePtr src, size_t bytes) = 0;
  // `args` (argsBytes, copied now) is what the kernel receives; `accesses` the memory it touches.
  virtual Status launch(StreamId stream, const Kernel &kernel, const void *args, size_t argsBytes,
                        const std::vector<Access> &accesses) = 0;

  virtual Status beginCapture(StreamId stream) = 0;
  virtual Result<GraphId> endCapture(StreamId stream) = 0;
  virtual Status replay(GraphId graph, StreamId stream) = 0;
};

} // namespace hetc::device
