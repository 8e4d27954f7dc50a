#include "codegen/cpu/isa/Amx.h"

#include "codegen/cpu/isa/CpuFeatures.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hetc::codegen {
namespace {

// From the kernel's arch/x86/include/uapi/asm/prctl.h and fpu/xstate.h; older C libraries do
// not define them.
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtileData = 18;

Status askLinuxForAmx() {
  if (!hostHas(kCpuAmxTile))
    return Status::error("host has no AMX (amx-tile is not among " +
                         describeCpuFeatures(hostCpuFeatures()) + ")");
#if defined(__x86_64__) && defined(SYS_arch_prctl)
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0)
    return Status::error(std::string("Linux refused AMX tile data permission "
                                     "(arch_prctl ARCH_REQ_XCOMP_PERM): ") +
                         std::strerror(errno));
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 ||
      !(granted & (1ul << kXfeatureXtileData)))
    return Status::error("AMX tile data permission was requested but is not granted");
  return Status();
#else
  return Status::error("AMX permission can only be requested on x86-64 Linux");
#endif
}

#if defined(__x86_64__)
// The configuration loaded on this thread, compared by value: kernels may keep their own copies.
thread_local TileConfig loadedConfig;
thread_local bool configLoaded = false;

__attribute__((target("amx-tile"))) void loadTileConfigInstruction(const TileConfig *config) {
  _tile_loadconfig(config);
}
__attribute__((target("amx-tile"))) void releaseTilesInstruction() { _tile_release(); }
#endif

} // namespace

Status requestAmxPermission() {
  static const Status outcome = askLinuxForAmx();
  return outcome;
}

bool TileConfig::operator==(const TileConfig &other) const {
  return std::memcmp(this, &other, sizeof(TileConfig)) == 0;
}

void loadTileConfig(const TileConfig &config) {
#if defined(__x86_64__)
  if (configLoaded && loadedConfig == config)
    return;
  loadTileConfigInstruction(&config);
  loadedConfig = config;
  configLoaded = true;
#else
  (void)config;
#endif
}

void releaseTiles() {
#if defined(__x86_64__)
  if (configLoaded)
    releaseTilesInstruction();
  configLoaded = false;
#endif
}

} // namespace hetc::codegen
