// Fuzz target for the start-up device reports (cluster/startup.h) the chief reads from every task:
// any bytes must decode or raise InvalidArgument naming the task, never std::terminate (an
// escaped nlohmann exception), overflow the stack, or allocate beyond the report's bound.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cluster/startup.h"
#include "runtime/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string task = "/job:worker/replica:0/task:1 (rank 1)";
  try {
    const weft::DeviceReport r = weft::parse_device_report(text, task);
    for (const weft::DeviceInfo& d : r.devices)
      if (d.name.empty() || d.memory_bytes < 0 || d.cores < 0) std::abort();
  } catch (const weft::InvalidArgument& e) {
    if (std::string_view(e.what()).find(task) == std::string_view::npos) std::abort();
  }
  return 0;
}
