// Which implementation of a kernel runs. Each kernel's implementations form one list, best first,
// each entry naming the CPU features it needs (CpuFeatures.h bits); the first whose features the
// caller allows, and that this build has, is picked, and its name is the label every report
// shows, so a label cannot drift from what runs. The last entry needs no feature (the portable
// one), so a pick always succeeds. oneDNN's implementation lists work the same way.
//
// The caller passes what it allows: the host's features (hostCpuFeatures()), fewer when the
// engine's options ask for the portable kernels, or any mask a test or benchmark wants to see.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetc::codegen {

template <typename Kernel> struct Implementation {
  const char *name;  // the label reports show ("LinearInt8Avx512Vnni")
  uint64_t features; // kCpu* bits the host must have
  Kernel kernel;     // a function, or a set of them; null: not in this build
};

template <typename Kernel, size_t N>
const Implementation<Kernel> &pickImplementation(const Implementation<Kernel> (&list)[N],
                                                 uint64_t allowed) {
  static_assert(N > 0, "an implementation list needs its portable entry");
  for (size_t i = 0; i + 1 < N; ++i)
    if ((list[i].features & allowed) == list[i].features && list[i].kernel)
      return list[i];
  return list[N - 1];
}

} // namespace hetc::codegen
