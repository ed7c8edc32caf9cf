// Built when weft is configured without CUDA: there are simply no GPU devices.
#include "runtime/device.h"

namespace weft {

std::vector<std::unique_ptr<Device>> create_cuda_devices() { return {}; }
bool cuda_compiled_in() { return false; }

}  // namespace weft
