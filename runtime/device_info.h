// What a user may know of a device without its machinery: its description (DeviceInfo), and the
// logical-CPU setting. The Device class itself, with its allocator and pools, is in
// runtime/device.h, which the public header does not include.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

class Device;

struct DeviceInfo {
  std::string name;         // "/job:localhost/replica:0/task:0/device:CPU:0"
  std::string type;         // "CPU" or "GPU"
  int64_t memory_bytes = 0;
  int cores = 0;            // physical cores, or streaming multiprocessors on a GPU
  std::string description;
};
// This process's devices as DeviceInfo, under their local names.
std::vector<DeviceInfo> local_device_infos();

// Splits the host into n logical CPU devices, /cpu:0 ... /cpu:n-1, each with its own intra-op
// pool of usable_cores / n threads (at least one) and all sharing the host allocator, so
// placement, partitioning and transfers run on machines without GPUs. Call it before the devices
// are first used; it overrides WEFT_LOGICAL_CPUS. InvalidArgument when n is outside
// [1, kMaxLogicalCpus]; FailedPrecondition when the devices already exist with another count.
void set_logical_cpus(int n);
inline constexpr int kMaxLogicalCpus = 256;

}  // namespace weft
