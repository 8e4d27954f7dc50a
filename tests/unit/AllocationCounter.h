// Every allocation in the unit-test binary is counted (AllocationCounter.cpp): operator new and
// the C allocators (malloc, calloc, realloc, aligned_alloc, posix_memalign, memalign), which the
// binary defines over glibc's, and anonymous mmap, which the engine's arenas use. A test asserts
// that a stretch of code allocated nothing.
#pragma once

#include <cstddef>

namespace hetc::test {

// Allocations made by this process so far.
size_t allocationCount();

} // namespace hetc::test
