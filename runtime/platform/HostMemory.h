// How much memory this machine can still give: what the compiler checks a plan against and what a
// benchmark checks each KV fill against, read from one place.
#pragma once

#include <cstdint>
#include <optional>

namespace hetc {

// MemAvailable from /proc/meminfo in bytes, or nothing where it cannot be read.
std::optional<uint64_t> availableMemoryBytes();

} // namespace hetc
