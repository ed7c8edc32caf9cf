#include "api/devices.h"

#include <atomic>
#include <iostream>

#include "api/context.h"
#include "cluster/cluster.h"
#include "runtime/device.h"

namespace weft {

std::vector<DeviceInfo> list_devices() {
  if (const std::vector<DeviceInfo>* all = cluster_devices()) return *all;
  return local_device_infos();
}

DeviceScope::DeviceScope(const std::string& device) {
  EagerContext& ctx = eager_context();
  previous_ = ctx.scoped_device;
  DeviceSpec spec = DeviceSpec::parse(device);  // throws on a malformed name
  Device* found = find_device(device);
  if (!found && (!spec.job || *spec.job == "localhost") && (!spec.task || *spec.task == 0)) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      std::cerr << "weft: device " << device << " is not available here; running on "
                << cpu_device()->name() << " instead (soft placement)\n";
    found = cpu_device();
  }
  ctx.device_stack.push_back(device);
  ctx.scoped_device = found;
}

DeviceScope::~DeviceScope() {
  EagerContext& ctx = eager_context();
  ctx.device_stack.pop_back();
  ctx.scoped_device = previous_;
}

std::string current_device_request() {
  const EagerContext& ctx = eager_context();
  return ctx.device_stack.empty() ? std::string() : ctx.device_stack.back();
}

}  // namespace weft
