// The device interface on CUDA's runtime API: the one implementation with vendor headers, built
// into libhetc_cuda.so (HETC_CUDA) and loaded by DeviceLoader only when a plan has GPU work and
// the host has a GPU. Exports one C function, hetc_cuda_create_device.
#include "codegen/cuda/Registry.h"
#include "runtime/device/Device.h"

#include <cuda_runtime.h>

#include <cstring>

#include <cstdio>
#include <memory>
#include <vector>

namespace hetc::device {
namespace {

Status cudaFailed(cudaError_t error, const char *what) {
  return Status::error(std::string(what) + ": " + cudaGetErrorString(error));
}

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {}
  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    for (cudaGraphExec_t graph : graphs_)
      cudaGraphExecDestroy(graph);
    for (cudaEvent_t event : events_)
      cudaEventDestroy(event);
    for (cudaStream_t stream : streams_)
      cudaStreamDestroy(stream);
    for (void *memory : allocations_)
      cudaFree(memory);
  }

  std::string name() const override {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, ordinal_) != cudaSuccess)
      return "CUDA device " + std::to_string(ordinal_);
    char text[320];
    std::snprintf(text, sizeof text, "%s (sm_%d%d, %.0f GiB)", prop.name, prop.major, prop.minor,
                  prop.totalGlobalMem / double(1ull << 30));
    return text;
  }

  Result<DevicePtr> allocate(size_t bytes, size_t alignment) override {
    // cudaMalloc aligns to at least 256 bytes.
    if (alignment == 0 || alignment > 256 || (alignment & (alignment - 1)))
      return Status::error("device alignment " + std::to_string(alignment) +
                           " is not a power of 2 up to 256");
    void *memory = nullptr;
    if (cudaError_t e = cudaMalloc(&memory, bytes); e != cudaSuccess)
      return cudaFailed(e, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
    allocations_.push_back(memory);
    return DevicePtr{reinterpret_cast<uint64_t>(memory)};
  }

  Result<StreamId> createStream() override {
    cudaStream_t stream = nullptr;
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
      return cudaFailed(e, "cudaStreamCreate");
    streams_.push_back(stream);
    return static_cast<StreamId>(streams_.size() - 1);
  }

  Result<EventId> createEvent() override {
    cudaEvent_t event = nullptr;
    if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess)
      return cudaFailed(e, "cudaEventCreate");
    events_.push_back(event);
    return static_cast<EventId>(events_.size() - 1);
  }

  Status record(EventId event, StreamId stream) override {
    if (Status s = check(stream, event); !s)
      return s;
    return call(cudaEventRecord(events_[event], streams_[stream]), "cudaEventRecord");
  }

  Status wait(StreamId stream, EventId event) override {
    if (Status s = check(stream, event); !s)
      return s;
    return call(cudaStreamWaitEvent(streams_[stream], events_[event], 0), "cudaStreamWaitEvent");
  }

  Status synchronize(StreamId stream) override {
    if (Status s = check(stream); !s)
      return s;
    return call(cudaStreamSynchronize(streams_[stream]), "cudaStreamSynchronize");
  }

  Status copyToDevice(StreamId stream, DevicePtr dst, const void *src, size_t bytes) override {
    return copy(stream, pointer(dst), src, bytes, cudaMemcpyHostToDevice);
  }
  Status copyToHost(StreamId stream, void *dst, DevicePtr src, size_t bytes) override {
    return copy(stream, dst, pointer(src), bytes, cudaMemcpyDeviceToHost);
  }
  Status copyOnDevice(StreamId stream, DevicePtr dst, DevicePtr src, size_t bytes) override {
    return copy(stream, pointer(dst), pointer(src), bytes, cudaMemcpyDeviceToDevice);
  }

  bool has(const Kernel &kernel) const override { return entry(kernel) != nullptr; }

  Status launch(StreamId stream, const Kernel &kernel, const void *args, size_t,
                const std::vector<Access> &) override {
    if (Status s = check(stream); !s)
      return s;
    if (const codegen::cuda::CudaKernelEntry *found = entry(kernel))
      return call(found->launch(streams_[stream], args), kernel.name);
    return Status::error(std::string("kernel '") + kernel.name + "' has no CUDA implementation");
  }

  static const codegen::cuda::CudaKernelEntry *entry(const Kernel &kernel) {
    size_t count = 0;
    const codegen::cuda::CudaKernelEntry *const *entries = codegen::cuda::cudaKernels(count);
    for (size_t i = 0; i < count; ++i)
      if (std::strcmp(entries[i]->name, kernel.name) == 0)
        return entries[i];
    return nullptr;
  }

  Status beginCapture(StreamId stream) override {
    if (Status s = check(stream); !s)
      return s;
    return call(cudaStreamBeginCapture(streams_[stream], cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture");
  }

  Result<GraphId> endCapture(StreamId stream) override {
    if (Status s = check(stream); !s)
      return s;
    cudaGraph_t graph = nullptr;
    if (cudaError_t e = cudaStreamEndCapture(streams_[stream], &graph); e != cudaSuccess)
      return cudaFailed(e, "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
      return cudaFailed(e, "cudaGraphInstantiate");
    graphs_.push_back(exec);
    return static_cast<GraphId>(graphs_.size() - 1);
  }

  Status replay(GraphId graph, StreamId stream) override {
    if (Status s = check(stream); !s)
      return s;
    if (graph >= graphs_.size())
      return Status::error("graph " + std::to_string(graph) + " does not exist");
    return call(cudaGraphLaunch(graphs_[graph], streams_[stream]), "cudaGraphLaunch");
  }

private:
  static void *pointer(DevicePtr ptr) { return reinterpret_cast<void *>(ptr.address); }
  static Status call(cudaError_t error, const char *what) {
    return error == cudaSuccess ? Status() : cudaFailed(error, what);
  }
  Status check(StreamId stream, EventId event = 0) const {
    if (stream >= streams_.size())
      return Status::error("stream " + std::to_string(stream) + " does not exist");
    if (!events_.empty() && event >= events_.size())
      return Status::error("event " + std::to_string(event) + " does not exist");
    return Status();
  }
  Status copy(StreamId stream, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (Status s = check(stream); !s)
      return s;
    return call(cudaMemcpyAsync(dst, src, bytes, kind, streams_[stream]), "cudaMemcpyAsync");
  }

  int ordinal_;
  std::vector<void *> allocations_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<cudaGraphExec_t> graphs_;
};

} // namespace
} // namespace hetc::device

// The library's one entry point: the device `ordinal`, or null with `why` (a buffer of
// `whyBytes`) saying why there is none (no driver, no such GPU).
extern "C" __attribute__((visibility("default"))) hetc::device::Device *
hetc_cuda_create_device(int ordinal, char *why, size_t whyBytes) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    std::snprintf(why, whyBytes, "CUDA finds no usable GPU: %s", cudaGetErrorString(e));
    return nullptr;
  }
  if (ordinal < 0 || ordinal >= count) {
    std::snprintf(why, whyBytes, "GPU %d does not exist (CUDA sees %d)", ordinal, count);
    return nullptr;
  }
  if (cudaError_t e = cudaSetDevice(ordinal); e != cudaSuccess) {
    std::snprintf(why, whyBytes, "cudaSetDevice(%d): %s", ordinal, cudaGetErrorString(e));
    return nullptr;
  }
  return new hetc::device::CudaDevice(ordinal);
}
