// Every allocation in the unit-test binary passes through a counting operator new
// (AllocationCounter.cpp), so a test can assert that a stretch of code allocated nothing.
#pragma once

#include <cstddef>

namespace hetc::test {

// Allocations made by this process so far.
size_t allocationCount();

} // namespace hetc::test
