// The software device: its memory is its own and poisoned, every access is ordered or refused,
// results do not depend on the completion order it picks, kernels read only what they declare,
// and a captured graph replayed with new step data equals the same work enqueued directly.
#include "runtime/device/SimDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hetc::device {
namespace {

// y[i] = x[i] * scale + bias[step], over n floats: a kernel that reads a per-step value from
// device memory, as graphs do.
struct AxpbArgs {
  DevicePtr x, y, step;
  size_t n;
  float scale;
};

void axpbSim(KernelContext &context, const void *raw) {
  const auto &a = *static_cast<const AxpbArgs *>(raw);
  const auto *x = static_cast<const float *>(context.view(a.x, a.n * sizeof(float)));
  auto *y = static_cast<float *>(context.view(a.y, a.n * sizeof(float)));
  const auto *step = static_cast<const float *>(context.view(a.step, sizeof(float)));
  if (!x || !y || !step)
    return;
  for (size_t i = 0; i < a.n; ++i)
    y[i] = x[i] * a.scale + *step;
}

const Kernel kAxpb{"axpb", axpbSim};

Status launchAxpb(SimDevice &device, StreamId stream, const AxpbArgs &args) {
  return device.launch(stream, kAxpb, &args, sizeof args,
                       {{args.x, args.n * sizeof(float), false},
                        {args.step, sizeof(float), false},
                        {args.y, args.n * sizeof(float), true}});
}

TEST(SimDevice, CopiesAndKernelsOnPoisonedMemory) {
  SimDevice device;
  const StreamId s = *device.createStream();
  const size_t n = 37;
  const DevicePtr x = *device.allocate(n * sizeof(float));
  const DevicePtr y = *device.allocate(n * sizeof(float));
  const DevicePtr step = *device.allocate(sizeof(float));
  std::vector<float> host(n), out(n);
  for (size_t i = 0; i < n; ++i)
    host[i] = static_cast<float>(i) - 5.5f;
  const float bias = 0.25f;
  ASSERT_TRUE(device.copyToDevice(s, x, host.data(), n * sizeof(float)));
  ASSERT_TRUE(device.copyToDevice(s, step, &bias, sizeof bias));
  ASSERT_TRUE(launchAxpb(device, s, {x, y, step, n, 2.0f}));
  ASSERT_TRUE(device.copyToHost(s, out.data(), y, n * sizeof(float)));
  ASSERT_TRUE(device.synchronize(s));
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(out[i], host[i] * 2.0f + bias);
  // Memory nothing wrote reads as NaN.
  const DevicePtr fresh = *device.allocate(4 * sizeof(float));
  float poison[4] = {};
  ASSERT_TRUE(device.copyToHost(s, poison, fresh, sizeof poison));
  ASSERT_TRUE(device.synchronize(s));
  for (float value : poison)
    EXPECT_TRUE(std::isnan(value));
}

TEST(SimDevice, RefusesHostPointersAndRangesOutsideAllocations) {
  SimDevice device;
  const StreamId s = *device.createStream();
  const DevicePtr x = *device.allocate(64);
  std::vector<float> host(16);
  const DevicePtr hostAsDevice{reinterpret_cast<uint64_t>(host.data())};
  Status st = device.copyToDevice(s, hostAsDevice, host.data(), 64);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("not device memory"), std::string::npos) << st.message();
  EXPECT_FALSE(device.copyToDevice(s, x + 32, host.data(), 64)); // runs past the allocation
  EXPECT_FALSE(device.copyToHost(s, host.data(), x + 65, 4));
  EXPECT_TRUE(device.copyToDevice(s, x, host.data(), 64));
}

TEST(SimDevice, UnorderedAccessesOnTwoStreamsAreRefused) {
  SimDevice device;
  const StreamId a = *device.createStream(), b = *device.createStream();
  const EventId written = *device.createEvent(), read = *device.createEvent();
  const size_t n = 8;
  const DevicePtr x = *device.allocate(n * sizeof(float));
  const DevicePtr y = *device.allocate(n * sizeof(float));
  const DevicePtr step = *device.allocate(sizeof(float));
  std::vector<float> host(n, 1.0f);
  float zero = 0;
  ASSERT_TRUE(device.copyToDevice(a, step, &zero, sizeof zero));
  ASSERT_TRUE(device.copyToDevice(a, x, host.data(), n * sizeof(float)));
  // b reads x, which a writes, with nothing between them: read after write.
  Status st = launchAxpb(device, b, {x, y, step, n, 1.0f});
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("neither stream order nor an event"), std::string::npos)
      << st.message();
  // Ordered by an event, it is accepted.
  ASSERT_TRUE(device.record(written, a));
  ASSERT_TRUE(device.wait(b, written));
  ASSERT_TRUE(launchAxpb(device, b, {x, y, step, n, 1.0f}));
  // a overwrites x while b may still read it: write after read, refused until b's read is
  // ordered before it.
  EXPECT_FALSE(device.copyToDevice(a, x, host.data(), n * sizeof(float)));
  ASSERT_TRUE(device.record(read, b));
  ASSERT_TRUE(device.wait(a, read));
  EXPECT_TRUE(device.copyToDevice(a, x, host.data(), n * sizeof(float)));
  EXPECT_TRUE(device.synchronize(a));
  EXPECT_TRUE(device.synchronize(b));
}

// Two streams, a producer and two consumers joined by events: the same bytes whatever order the
// device completes the streams' work in.
TEST(SimDevice, ResultsDoNotDependOnCompletionOrder) {
  std::vector<float> first;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SimOptions options;
    options.seed = seed;
    SimDevice device(options);
    const StreamId main = *device.createStream(), side = *device.createStream();
    const EventId ready = *device.createEvent(), done = *device.createEvent();
    const size_t n = 16;
    const DevicePtr x = *device.allocate(n * sizeof(float));
    const DevicePtr y = *device.allocate(n * sizeof(float));
    const DevicePtr z = *device.allocate(n * sizeof(float));
    const DevicePtr step = *device.allocate(sizeof(float));
    std::vector<float> host(n), out(2 * n);
    for (size_t i = 0; i < n; ++i)
      host[i] = 0.5f * static_cast<float>(i);
    const float bias = 1.0f;
    ASSERT_TRUE(device.copyToDevice(main, x, host.data(), n * sizeof(float)));
    ASSERT_TRUE(device.copyToDevice(main, step, &bias, sizeof bias));
    ASSERT_TRUE(device.record(ready, main));
    ASSERT_TRUE(device.wait(side, ready));
    ASSERT_TRUE(launchAxpb(device, side, {x, z, step, n, 3.0f}));
    ASSERT_TRUE(launchAxpb(device, main, {x, y, step, n, -1.0f}));
    ASSERT_TRUE(device.record(done, side));
    ASSERT_TRUE(device.wait(main, done));
    ASSERT_TRUE(device.copyToHost(main, out.data(), y, n * sizeof(float)));
    ASSERT_TRUE(device.copyToHost(main, out.data() + n, z, n * sizeof(float)));
    ASSERT_TRUE(device.synchronize(main));
    if (first.empty())
      first = out;
    EXPECT_EQ(out, first) << "seed " << seed;
    EXPECT_EQ(out[n + 3], host[3] * 3.0f + bias);
  }
}

TEST(SimDevice, AKernelReadsOnlyWhatItDeclared) {
  SimDevice device;
  const StreamId s = *device.createStream();
  const size_t n = 4;
  const DevicePtr x = *device.allocate(n * sizeof(float));
  const DevicePtr y = *device.allocate(n * sizeof(float));
  const DevicePtr step = *device.allocate(sizeof(float));
  const AxpbArgs args{x, y, step, n, 1.0f};
  // The step value is read but not declared.
  ASSERT_TRUE(device.launch(s, kAxpb, &args, sizeof args,
                            {{x, n * sizeof(float), false}, {y, n * sizeof(float), true}}));
  const Status st = device.synchronize(s);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("not among the launch's declared accesses"), std::string::npos)
      << st.message();
}

// One step captured (its data read from a device block), replayed with new step data each time:
// the same results as the work enqueued directly, and the replay's launch overhead paid once.
TEST(SimDevice, ReplayedGraphEqualsDirectWork) {
  const size_t n = 24, launchesPerStep = 6;
  auto runSteps = [&](bool graph, double &micros) {
    SimDevice device;
    const StreamId s = *device.createStream();
    const DevicePtr x = *device.allocate(n * sizeof(float));
    const DevicePtr y = *device.allocate(n * sizeof(float));
    const DevicePtr step = *device.allocate(sizeof(float));
    std::vector<float> host(n), out, all;
    for (size_t i = 0; i < n; ++i)
      host[i] = static_cast<float>(i % 7) - 3.0f;
    EXPECT_TRUE(device.copyToDevice(s, x, host.data(), n * sizeof(float)));
    float stepValue = 0;
    auto enqueueStep = [&] {
      for (size_t k = 0; k < launchesPerStep; ++k)
        EXPECT_TRUE(launchAxpb(device, s, {k % 2 ? y : x, k % 2 ? x : y, step, n, 0.5f}));
    };
    GraphId id = 0;
    if (graph) {
      EXPECT_TRUE(device.beginCapture(s));
      enqueueStep();
      id = *device.endCapture(s);
    }
    const double start = device.elapsedMicros(s);
    for (int t = 0; t < 5; ++t) {
      stepValue = 0.125f * static_cast<float>(t + 1);
      // The step block refreshed by one copy, then the step.
      EXPECT_TRUE(device.copyToDevice(s, step, &stepValue, sizeof stepValue));
      if (graph)
        EXPECT_TRUE(device.replay(id, s));
      else
        enqueueStep();
      out.assign(n, 0);
      EXPECT_TRUE(device.copyToHost(s, out.data(), x, n * sizeof(float)));
      EXPECT_TRUE(device.synchronize(s)); // the host reads out and writes stepValue again
      all.insert(all.end(), out.begin(), out.end());
    }
    micros = device.elapsedMicros(s) - start;
    EXPECT_EQ(device.launches(), 5 * launchesPerStep);
    return all;
  };
  double direct = 0, replayed = 0;
  const std::vector<float> a = runSteps(false, direct), b = runSteps(true, replayed);
  EXPECT_EQ(a, b);
  EXPECT_FALSE(std::isnan(a.back()));
  EXPECT_LT(replayed, direct);
}

TEST(SimDevice, CopiesTakeTheLinksTime) {
  SimOptions options;
  options.linkGBs = 10;
  options.linkLatencyMicros = 5;
  SimDevice device(options);
  const StreamId s = *device.createStream();
  const size_t bytes = 1 << 20;
  const DevicePtr x = *device.allocate(bytes);
  std::vector<uint8_t> host(bytes);
  ASSERT_TRUE(device.copyToDevice(s, x, host.data(), bytes));
  EXPECT_NEAR(device.elapsedMicros(s), 5 + bytes / 10e3, 1e-6);
}

} // namespace
} // namespace hetc::device
