// Opening a device: the software device always; CUDA by loading libhetc_cuda.so (HETC_CUDA) only
// when asked, so the runtime links no CUDA library and deploys to CPU-only boxes unchanged.
#pragma once

#include "runtime/device/Device.h"

#include <memory>
#include <string>

namespace hetc::device {

// The CUDA device `ordinal` from libhetc_cuda.so, looked for beside the running program, in
// ../lib from it, then on the loader's path. Fails with one line saying why: the library is not
// there (a build without CUDA), CUDA's libraries or driver are missing, or there is no GPU.
Result<std::unique_ptr<Device>> openCudaDevice(int ordinal = 0);

} // namespace hetc::device
