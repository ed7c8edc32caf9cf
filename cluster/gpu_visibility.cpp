#include "cluster/gpu_visibility.h"

#include <filesystem>
#include <system_error>

#include "runtime/error.h"

namespace weft {

namespace {

// CUDA_VISIBLE_DEVICES's entries (indices or UUIDs), in order.
std::vector<std::string> entries_of(const std::string& visible) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= visible.size()) {
    const size_t comma = visible.find(',', start);
    const std::string item = visible.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ",") + i;
  return s;
}

}  // namespace

std::optional<std::string> cuda_visible_devices_for(const GpuVisibilityInputs& in, const std::string& task) {
  if (in.spec_gpus) {
    // The GPUs the process sees, as CUDA would number them; unknown without a driver.
    std::optional<std::vector<std::string>> seen;
    std::string seen_how;
    if (in.visible) {
      seen = entries_of(*in.visible);
      seen_how = "CUDA_VISIBLE_DEVICES=" + *in.visible + " leaves it";
    } else if (in.machine_gpus >= 0) {
      seen.emplace();
      for (int i = 0; i < in.machine_gpus; ++i) seen->push_back(std::to_string(i));
      seen_how = "the machine has";
    }
    std::vector<std::string> chosen;
    for (int i : *in.spec_gpus) {
      if (seen && static_cast<size_t>(i) >= seen->size())
        throw InvalidArgument("[cluster] the spec gives task " + task + " GPU " + std::to_string(i) + ", but " + seen_how +
                              " " + std::to_string(seen->size()) + " GPU" + (seen->size() == 1 ? "" : "s"));
      chosen.push_back(seen ? (*seen)[static_cast<size_t>(i)] : std::to_string(i));
    }
    return joined(chosen);
  }
  if (in.visible || in.local_size < 2 || in.machine_gpus < in.local_size) return std::nullopt;
  const int share = in.machine_gpus / in.local_size;
  std::vector<std::string> mine;
  for (int g = in.local_rank * share; g < (in.local_rank + 1) * share; ++g) mine.push_back(std::to_string(g));
  return joined(mine);
}

int machine_gpu_count() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/driver/nvidia/gpus", ec);
  if (ec) return -1;
  int n = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return -1;
    ++n;
  }
  return n;
}

}  // namespace weft
