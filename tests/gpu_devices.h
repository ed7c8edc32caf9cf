// The GPUs of this test process, for the checks that run on the CPU and then on each GPU present
// (none without CUDA or a GPU, so those parts are skipped).
#pragma once

#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft {

inline const std::vector<std::string>& gpu_device_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const DeviceInfo& d : list_devices())
      if (d.type == "GPU") out.push_back(d.name);
    return out;
  }();
  return names;
}

}  // namespace weft
