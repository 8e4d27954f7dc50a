#include "AllocationCounter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<size_t> gAllocations{0};

void *countedAllocation(size_t size, size_t alignment) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0)
    size = 1;
  void *p = alignment > alignof(std::max_align_t)
                ? std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
                : std::malloc(size);
  if (!p)
    throw std::bad_alloc();
  return p;
}
} // namespace

size_t hetc::test::allocationCount() { return gAllocations.load(); }

void *operator new(size_t size) { return countedAllocation(size, 0); }
void *operator new[](size_t size) { return countedAllocation(size, 0); }
void *operator new(size_t size, std::align_val_t a) {
  return countedAllocation(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a) {
  return countedAllocation(size, static_cast<size_t>(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, size_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { std::free(p); }
