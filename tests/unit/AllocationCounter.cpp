#include "AllocationCounter.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HETC_ASAN_ALLOCATOR 1
#endif
#endif

#ifdef HETC_ASAN_ALLOCATOR
// AddressSanitizer's allocator serves malloc and operator new and must free what it allocated:
// the allocations are counted through its hook instead of replacing the allocators.
#include <dlfcn.h>
#include <pthread.h>
#include <sanitizer/allocator_interface.h>
#else
// glibc's own allocator entry points: the definitions below replace malloc and friends for the
// whole process (the executable's symbols come first) and forward here.
extern "C" {
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t count, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t alignment, size_t size);
void __libc_free(void *p);
}
#endif

namespace {
std::atomic<size_t> gAllocations{0};

void count() { gAllocations.fetch_add(1, std::memory_order_relaxed); }
} // namespace

size_t hetc::test::allocationCount() { return gAllocations.load(); }

#ifdef HETC_ASAN_ALLOCATOR
namespace {
thread_local int tSanitizerThreadStart = 0;
void countAllocation(const volatile void *, size_t) {
  if (!tSanitizerThreadStart)
    count();
}
void ignoreFree(const volatile void *) {}
const int gHooksInstalled = __sanitizer_install_malloc_and_free_hooks(countAllocation, ignoreFree);
} // namespace

// AddressSanitizer starts each thread by asking glibc for its stack (pthread_getattr_np, which
// allocates) while the thread's creator goes on: those allocations, at a time no test controls,
// are the sanitizer's, not the code's under test.
extern "C" int pthread_getattr_np(pthread_t thread, pthread_attr_t *attr) {
  using Real = int (*)(pthread_t, pthread_attr_t *);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_getattr_np"));
  ++tSanitizerThreadStart;
  const int result = real(thread, attr);
  --tSanitizerThreadStart;
  return result;
}
#endif

extern "C" {

#ifndef HETC_ASAN_ALLOCATOR
void *malloc(size_t size) {
  count();
  return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
  count();
  return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size) {
  count();
  return __libc_realloc(p, size);
}

void free(void *p) { __libc_free(p); }

void *memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  count();
  if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0)
    return EINVAL;
  void *p = __libc_memalign(alignment, size);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}
#endif

// Anonymous mappings are allocations (the engine's arenas); file mappings are not (a plan).
void *mmap(void *address, size_t length, int protection, int flags, int fd, off_t offset) {
  if (flags & MAP_ANONYMOUS)
    count();
  const long result = syscall(SYS_mmap, address, length, protection, flags, fd, offset);
  if (result < 0 && result > -4096) {
    errno = static_cast<int>(-result);
    return MAP_FAILED;
  }
  return reinterpret_cast<void *>(result);
}

} // extern "C"

#ifndef HETC_ASAN_ALLOCATOR
namespace {
void *newAllocation(size_t size, size_t alignment) {
  if (size == 0)
    size = 1;
  void *p = alignment > alignof(std::max_align_t)
                ? aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
                : malloc(size);
  if (!p)
    throw std::bad_alloc();
  return p;
}
} // namespace

void *operator new(size_t size) { return newAllocation(size, 0); }
void *operator new[](size_t size) { return newAllocation(size, 0); }
void *operator new(size_t size, std::align_val_t a) {
  return newAllocation(size, static_cast<size_t>(a));
}
void *operator new[](size_t size, std::align_val_t a) {
  return newAllocation(size, static_cast<size_t>(a));
}
void operator delete(void *p) noexcept { free(p); }
void operator delete[](void *p) noexcept { free(p); }
void operator delete(void *p, size_t) noexcept { free(p); }
void operator delete[](void *p, size_t) noexcept { free(p); }
void operator delete(void *p, std::align_val_t) noexcept { free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { free(p); }
void operator delete(void *p, size_t, std::align_val_t) noexcept { free(p); }
void operator delete[](void *p, size_t, std::align_val_t) noexcept { free(p); }
#endif
