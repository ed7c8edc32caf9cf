// Devices as users see them: listing them and choosing where ops run.
//
//   for (const auto& d : weft::list_devices()) std::cout << d.name << " " << d.memory_bytes << "\n";
//   { weft::DeviceScope s("/gpu:0"); auto y = weft::matmul(a, b); }   // runs on GPU 0
//   weft::set_logical_cpus(4);   // first thing in main: /cpu:0 ... /cpu:3
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device_info.h"  // DeviceInfo

namespace weft {


std::vector<DeviceInfo> list_devices();

// Splits the host into n logical CPU devices, /cpu:0 ... /cpu:n-1, each with its own share of the
// cores (physical cores / n threads, at least one) and all sharing host memory, so placement,
// partitioning and transfers can be exercised without GPUs. Call it before the first op, tensor
// or device lookup; it overrides the environment variable WEFT_LOGICAL_CPUS=n, which does the
// same. InvalidArgument when n is not from 1 to 256; FailedPrecondition when the devices already
// exist with another count (calling it again with the same count is harmless).
// (Defined with the devices, in runtime/cpu_device.cpp; also declared in runtime/device.h.)
void set_logical_cpus(int n);

// Places ops created inside it: eager ops run there; graph ops request it. A GPU that this
// process does not have falls back to the CPU (soft placement), with one notice on stderr.
class DeviceScope {
 public:
  explicit DeviceScope(const std::string& device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  class Device* previous_;
};

// The device name requested by the innermost DeviceScope, "" when none.
std::string current_device_request();

}  // namespace weft
