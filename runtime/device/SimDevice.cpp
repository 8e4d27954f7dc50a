#include "runtime/device/SimDevice.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>

namespace hetc::device {
namespace {

// Where the software device's addresses start: above x86-64's user space, so no host pointer is
// ever one of them.
constexpr uint64_t kDeviceBase = 0xD000'0000'0000ull;

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

enum class OpType { CopyIn, CopyOut, CopyDevice, Launch, Record, Wait };

struct Operation {
  OpType type = OpType::Launch;
  DevicePtr dst, src;
  const void *hostSrc = nullptr;
  void *hostDst = nullptr;
  size_t bytes = 0;
  Kernel kernel;
  std::vector<uint8_t> args;
  std::vector<Access> accesses;
  EventId event = 0;
  uint64_t sequence = 0; // a Record's number, which a Wait names
  uint64_t waitFor = 0;  // a Wait: the Record it waits for (0: none was enqueued)
};

// An access already enqueued, for the ordering check: stream `stream` at its tick `tick`.
struct Shadow {
  uint64_t lo, hi;
  StreamId stream;
  uint64_t tick;
  bool write;
  std::string what;
};

using Clock = std::vector<uint64_t>; // a vector clock: ticks per stream

uint64_t tickOf(const Clock &clock, StreamId stream) {
  return stream < clock.size() ? clock[stream] : 0;
}

void join(Clock &into, const Clock &other) {
  if (into.size() < other.size())
    into.resize(other.size(), 0);
  for (size_t i = 0; i < other.size(); ++i)
    into[i] = std::max(into[i], other[i]);
}

std::string describe(const Operation &op) {
  switch (op.type) {
  case OpType::CopyIn:
    return "a copy to the device";
  case OpType::CopyOut:
    return "a copy to the host";
  case OpType::CopyDevice:
    return "a copy on the device";
  case OpType::Launch:
    return std::string("kernel '") + op.kernel.name + "'";
  default:
    return "an event";
  }
}

} // namespace

struct SimDevice::State {
  SimOptions options;
  std::mt19937_64 random;
  struct Arena {
    uint64_t base;
    std::vector<uint8_t> bytes;
  };
  std::vector<Arena> arenas;
  uint64_t nextAddress = kDeviceBase;
  struct Stream {
    std::deque<Operation> queue;
    Clock clock;
    double time = 0;
    bool capturing = false;
    std::vector<Operation> captured;
  };
  std::vector<Stream> streams;
  struct Event {
    Clock clock;
    double time = 0;
    uint64_t lastRecord = 0;
  };
  std::vector<Event> events;
  std::vector<std::vector<Operation>> graphs;
  std::vector<Shadow> shadows;
  std::set<uint64_t> recordsDone;
  uint64_t sequence = 0;
  uint64_t launches = 0;
  Status failure;

  // The host bytes behind [ptr, ptr + bytes), or null when no one allocation holds them.
  uint8_t *translate(DevicePtr ptr, size_t bytes) {
    for (Arena &arena : arenas)
      if (ptr.address >= arena.base && ptr.address - arena.base <= arena.bytes.size() &&
          bytes <= arena.bytes.size() - (ptr.address - arena.base))
        return arena.bytes.data() + (ptr.address - arena.base);
    return nullptr;
  }

  Status checkRange(DevicePtr ptr, size_t bytes, const std::string &what) {
    if (!translate(ptr, bytes))
      return Status::error(what + ": [" + hex(ptr.address) + ", +" + std::to_string(bytes) +
                           ") is not device memory (a host pointer, or outside every allocation)");
    return Status();
  }

  // The ordering check of one access by an operation of `stream` whose clock is `clock`: every
  // conflicting access before it (a write, or any access when this one writes) must happen before
  // it. Then it is recorded, and what it makes redundant dropped.
  Status order(const Access &access, StreamId stream, const Clock &clock,
               const std::string &what) {
    const uint64_t lo = access.ptr.address, hi = lo + access.bytes;
    for (const Shadow &earlier : shadows) {
      if (earlier.hi <= lo || hi <= earlier.lo || (!earlier.write && !access.write))
        continue;
      if (earlier.tick > tickOf(clock, earlier.stream))
        return Status::error(what + " on stream " + std::to_string(stream) +
                             (access.write ? " writes [" : " reads [") + hex(lo) + ", +" +
                             std::to_string(access.bytes) + "), which " + earlier.what +
                             " on stream " + std::to_string(earlier.stream) +
                             (earlier.write ? " writes" : " reads") +
                             ", with neither stream order nor an event between them");
    }
    const uint64_t tick = tickOf(clock, stream);
    // An access within this one that happens before it adds nothing a later check needs: what
    // must follow it must follow this one too (a write covers both kinds, a read covers reads).
    shadows.erase(std::remove_if(shadows.begin(), shadows.end(),
                                 [&](const Shadow &earlier) {
                                   return earlier.lo >= lo && earlier.hi <= hi &&
                                          earlier.tick <= tickOf(clock, earlier.stream) &&
                                          (access.write || !earlier.write);
                                 }),
                  shadows.end());
    shadows.push_back(Shadow{lo, hi, stream, tick, access.write, what});
    return Status();
  }

  // Enqueues `op` on `stream` (or adds it to the stream's capture): the ordering checks, the
  // virtual clock, the queue. `inGraph`: a replayed launch, whose overhead the replay paid.
  Status enqueue(StreamId stream, Operation op, bool inGraph = false) {
    if (stream >= streams.size())
      return Status::error("stream " + std::to_string(stream) + " does not exist");
    Stream &s = streams[stream];
    if (s.capturing) {
      s.captured.push_back(std::move(op));
      return Status();
    }
    if (s.clock.size() <= stream)
      s.clock.resize(stream + 1, 0);
    ++s.clock[stream];
    const std::string what = describe(op);
    std::vector<Access> touched = op.accesses;
    if (op.type == OpType::CopyIn || op.type == OpType::CopyDevice)
      touched.push_back(Access{op.dst, op.bytes, true});
    if (op.type == OpType::CopyOut || op.type == OpType::CopyDevice)
      touched.push_back(Access{op.src, op.bytes, false});
    for (const Access &access : touched) {
      if (Status st = checkRange(access.ptr, access.bytes, what); !st)
        return st;
      if (Status st = order(access, stream, s.clock, what); !st)
        return st;
    }
    switch (op.type) {
    case OpType::CopyIn:
    case OpType::CopyOut:
      s.time += options.linkLatencyMicros + op.bytes / (options.linkGBs * 1e3);
      break;
    case OpType::CopyDevice:
      s.time += op.bytes / (options.deviceGBs * 1e3);
      break;
    case OpType::Launch:
      s.time += inGraph ? 0 : options.launchMicros;
      break;
    case OpType::Record: {
      Event &e = events[op.event];
      e.clock = s.clock;
      e.time = s.time;
      op.sequence = ++sequence;
      e.lastRecord = op.sequence;
      break;
    }
    case OpType::Wait: {
      const Event &e = events[op.event];
      join(s.clock, e.clock);
      s.time = std::max(s.time, e.time);
      op.waitFor = e.lastRecord;
      break;
    }
    }
    s.queue.push_back(std::move(op));
    return Status();
  }

  class Context final : public KernelContext {
  public:
    Context(State &state, const std::vector<Access> &accesses)
        : state_(state), accesses_(accesses) {}
    void *view(DevicePtr ptr, size_t bytes) override {
      for (const Access &access : accesses_)
        if (ptr.address >= access.ptr.address &&
            ptr.address + bytes <= access.ptr.address + access.bytes)
          return state_.translate(ptr, bytes);
      refused = "[" + hex(ptr.address) + ", +" + std::to_string(bytes) +
                ") is not among the launch's declared accesses";
      return nullptr;
    }
    std::string refused;

  private:
    State &state_;
    const std::vector<Access> &accesses_;
  };

  void execute(Operation &op) {
    switch (op.type) {
    case OpType::CopyIn:
      std::memcpy(translate(op.dst, op.bytes), op.hostSrc, op.bytes);
      break;
    case OpType::CopyOut:
      std::memcpy(op.hostDst, translate(op.src, op.bytes), op.bytes);
      break;
    case OpType::CopyDevice:
      std::memmove(translate(op.dst, op.bytes), translate(op.src, op.bytes), op.bytes);
      break;
    case OpType::Launch: {
      Context context(*this, op.accesses);
      op.kernel.sim(context, op.args.data());
      ++launches;
      if (!context.refused.empty() && failure.ok())
        failure = Status::error("kernel '" + std::string(op.kernel.name) + "': " + context.refused);
      break;
    }
    case OpType::Record:
      recordsDone.insert(op.sequence);
      break;
    case OpType::Wait:
      break;
    }
  }

  bool runnable(const Stream &s) const {
    if (s.queue.empty())
      return false;
    const Operation &head = s.queue.front();
    return head.type != OpType::Wait || head.waitFor == 0 || recordsDone.count(head.waitFor);
  }

  // Runs work, the ready streams' next operations in a random order, until `stream` is empty.
  Status drain(StreamId stream) {
    std::vector<size_t> ready;
    while (!streams[stream].queue.empty()) {
      ready.clear();
      for (size_t i = 0; i < streams.size(); ++i)
        if (runnable(streams[i]))
          ready.push_back(i);
      if (ready.empty())
        return Status::error("stream " + std::to_string(stream) +
                             " waits for an event no stream will record");
      Stream &s = streams[ready[random() % ready.size()]];
      Operation op = std::move(s.queue.front());
      s.queue.pop_front();
      execute(op);
      if (!failure.ok())
        return failure;
    }
    return Status();
  }
};

SimDevice::SimDevice(SimOptions options) : s_(std::make_unique<State>()) {
  s_->options = options;
  s_->random.seed(options.seed);
}

SimDevice::~SimDevice() = default;

std::string SimDevice::name() const {
  char text[96];
  std::snprintf(text, sizeof text, "sim (software device, link %.1f GB/s)", s_->options.linkGBs);
  return text;
}

Result<DevicePtr> SimDevice::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    return Status::error("device alignment " + std::to_string(alignment) + " is not a power of 2");
  // Allocations are 64 KiB apart, so a range that runs past one never lands in the next.
  const uint64_t base = (s_->nextAddress + alignment - 1) & ~uint64_t(alignment - 1);
  s_->nextAddress = base + ((bytes + (64u << 10) - 1) & ~uint64_t((64u << 10) - 1)) + (64u << 10);
  s_->arenas.push_back(State::Arena{base, std::vector<uint8_t>(bytes, 0xFF)});
  return DevicePtr{base};
}

Result<StreamId> SimDevice::createStream() {
  s_->streams.emplace_back();
  return static_cast<StreamId>(s_->streams.size() - 1);
}

Result<EventId> SimDevice::createEvent() {
  s_->events.emplace_back();
  return static_cast<EventId>(s_->events.size() - 1);
}

Status SimDevice::record(EventId event, StreamId stream) {
  if (event >= s_->events.size())
    return Status::error("event " + std::to_string(event) + " does not exist");
  Operation op;
  op.type = OpType::Record;
  op.event = event;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::wait(StreamId stream, EventId event) {
  if (event >= s_->events.size())
    return Status::error("event " + std::to_string(event) + " does not exist");
  Operation op;
  op.type = OpType::Wait;
  op.event = event;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::synchronize(StreamId stream) {
  if (stream >= s_->streams.size())
    return Status::error("stream " + std::to_string(stream) + " does not exist");
  if (s_->streams[stream].capturing)
    return Status::error("stream " + std::to_string(stream) + " is capturing a graph");
  return s_->drain(stream);
}

Status SimDevice::copyToDevice(StreamId stream, DevicePtr dst, const void *src, size_t bytes) {
  Operation op;
  op.type = OpType::CopyIn;
  op.dst = dst;
  op.hostSrc = src;
  op.bytes = bytes;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::copyToHost(StreamId stream, void *dst, DevicePtr src, size_t bytes) {
  Operation op;
  op.type = OpType::CopyOut;
  op.hostDst = dst;
  op.src = src;
  op.bytes = bytes;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::copyOnDevice(StreamId stream, DevicePtr dst, DevicePtr src, size_t bytes) {
  Operation op;
  op.type = OpType::CopyDevice;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::launch(StreamId stream, const Kernel &kernel, const void *args,
                         size_t argsBytes, const std::vector<Access> &accesses) {
  if (!kernel.sim)
    return Status::error(std::string("kernel '") + kernel.name +
                         "' has no implementation for the software device");
  Operation op;
  op.type = OpType::Launch;
  op.kernel = kernel;
  op.args.assign(static_cast<const uint8_t *>(args), static_cast<const uint8_t *>(args) + argsBytes);
  op.accesses = accesses;
  return s_->enqueue(stream, std::move(op));
}

Status SimDevice::beginCapture(StreamId stream) {
  if (stream >= s_->streams.size())
    return Status::error("stream " + std::to_string(stream) + " does not exist");
  State::Stream &s = s_->streams[stream];
  if (s.capturing)
    return Status::error("stream " + std::to_string(stream) + " is already capturing");
  s.capturing = true;
  s.captured.clear();
  return Status();
}

Result<GraphId> SimDevice::endCapture(StreamId stream) {
  if (stream >= s_->streams.size() || !s_->streams[stream].capturing)
    return Status::error("stream " + std::to_string(stream) + " is not capturing");
  State::Stream &s = s_->streams[stream];
  s.capturing = false;
  s_->graphs.push_back(std::move(s.captured));
  s.captured.clear();
  return static_cast<GraphId>(s_->graphs.size() - 1);
}

Status SimDevice::replay(GraphId graph, StreamId stream) {
  if (graph >= s_->graphs.size())
    return Status::error("graph " + std::to_string(graph) + " does not exist");
  if (stream >= s_->streams.size())
    return Status::error("stream " + std::to_string(stream) + " does not exist");
  s_->streams[stream].time += s_->options.graphLaunchMicros;
  for (const Operation &op : s_->graphs[graph])
    if (Status st = s_->enqueue(stream, op, /*inGraph=*/true); !st)
      return st;
  return Status();
}

double SimDevice::elapsedMicros(StreamId stream) const {
  return stream < s_->streams.size() ? s_->streams[stream].time : 0;
}

uint64_t SimDevice::launches() const { return s_->launches; }

} // namespace hetc::device
