// The allocation counter sees each way the runtime allocates, so "no allocation per step" checks
// mean what they say.
#include "AllocationCounter.h"
#include "EngineTestSupport.h"
#include "TestPlans.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sys/mman.h>

namespace hetc {
namespace {

// Calls through a volatile pointer, so the compiler cannot pair and drop an allocation and its
// free.
template <typename F> F *opaque(F *f) {
  F *volatile p = f;
  return p;
}

TEST(AllocationCounterTest, CountsEveryAllocator) {
  size_t before = test::allocationCount();
  void *p = opaque(&std::malloc)(64);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "malloc";
  std::free(p);

  before = test::allocationCount();
  p = opaque(&std::aligned_alloc)(64, 256);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "aligned_alloc";
  std::free(p);

  before = test::allocationCount();
  void *q = nullptr;
  ASSERT_EQ(opaque(&posix_memalign)(&q, 64, 256), 0);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "posix_memalign";
  std::free(q);

  before = test::allocationCount();
  p = opaque(&std::calloc)(4, 16);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "calloc";
  std::free(p);

  before = test::allocationCount();
  int *n = new int(7);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "operator new";
  delete n;

  before = test::allocationCount();
  void *mapped = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  EXPECT_EQ(test::allocationCount() - before, 1u) << "anonymous mmap";
  munmap(mapped, 1 << 16);
}

// Creating an engine maps its arenas and allocates its scratch: the counter sees it.
TEST(AllocationCounterTest, SeesTheEnginesAllocations) {
  test::LoadedTinyPlan loaded(test::TinyPlanShape{});
  ASSERT_TRUE(loaded.plan);
  const size_t before = test::allocationCount();
  std::unique_ptr<Engine> engine = loaded.engine(2);
  ASSERT_TRUE(engine);
  EXPECT_GE(test::allocationCount() - before, 2u);
}

} // namespace
} // namespace hetc
