// Device names: "/job:worker/replica:0/task:1/device:GPU:0" and the short forms "/cpu:0",
// "/gpu:1", "/device:CPU:0", "/job:worker/task:1". Parts left out are unset (filled by placement).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;
// "CPU" or "GPU", as device names spell them.
const char* device_type_name(DeviceType type);

struct DeviceSpec {
  std::optional<std::string> job;
  std::optional<int> replica;
  std::optional<int> task;
  std::optional<DeviceType> type;
  std::optional<int> index;

  // Throws InvalidArgument naming the part that does not parse.
  static DeviceSpec parse(std::string_view name);
  std::string to_string() const;
  // True when every part set here equals the same part of `full`.
  bool matches(const DeviceSpec& full) const;
};

// "/job:localhost/replica:0/task:0/device:CPU:0"
std::string local_device_name(DeviceType type, int index);

}  // namespace weft
