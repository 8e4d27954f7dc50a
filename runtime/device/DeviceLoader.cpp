#include "runtime/device/DeviceLoader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>

namespace hetc::device {

Result<std::unique_ptr<Device>> openCudaDevice(int ordinal) {
  constexpr const char *kLibrary = "libhetc_cuda.so";
  std::vector<std::string> candidates;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back((self.parent_path() / kLibrary).string());
    candidates.push_back((self.parent_path().parent_path() / "lib" / kLibrary).string());
  }
  candidates.push_back(kLibrary);
  void *library = nullptr;
  std::string tried;
  for (const std::string &path : candidates) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library)
      break;
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : path);
  }
  if (!library)
    return Status::error("no CUDA device: " + std::string(kLibrary) +
                         " does not load (a build without CUDA, or CUDA's libraries missing): " +
                         tried);
  using Create = Device *(*)(int, char *, size_t);
  const auto create = reinterpret_cast<Create>(dlsym(library, "hetc_cuda_create_device"));
  if (!create)
    return Status::error(std::string("no CUDA device: ") + kLibrary +
                         " has no hetc_cuda_create_device");
  char why[512] = "";
  Device *device = create(ordinal, why, sizeof why);
  if (!device)
    return Status::error(std::string("no CUDA device: ") + why);
  // The library stays loaded for the process: the device's code lives in it.
  return std::unique_ptr<Device>(device);
}

} // namespace hetc::device
