#include "runtime/collectives.h"

#include <set>

#include "runtime/device.h"
#include "runtime/device_name.h"
#include "runtime/error.h"

namespace weft {

std::vector<std::string> parse_group_members(std::string_view joined, std::string_view op) {
  const std::string where = "[" + std::string(op) + "] ";
  if (joined.empty()) throw InvalidArgument(where + "group_members is empty");
  std::vector<std::string> out;
  std::set<std::string_view> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = joined.find(',', start);
    const std::string_view name = joined.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (name.empty())
      throw InvalidArgument(where + "group_members \"" + std::string(joined) + "\" has an empty name (member " +
                            std::to_string(out.size()) + ")");
    if (!seen.insert(name).second)
      throw InvalidArgument(where + "group_members names " + std::string(name) + " twice");
    out.emplace_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string task_of_device(std::string_view device, std::string_view op) {
  DeviceSpec spec;
  try {
    spec = DeviceSpec::parse(device);
  } catch (const Error& e) {
    throw InvalidArgument("[" + std::string(op) + "] group member " + std::string(device) + ": " + e.what());
  }
  // A short name ("/cpu:1") or the process's own names (job localhost) are this process's devices.
  if ((!spec.job && !spec.task) || (spec.job == "localhost" && spec.task.value_or(0) == 0)) return local_task_name();
  if (!spec.job || !spec.task)
    throw InvalidArgument("[" + std::string(op) + "] group member " + std::string(device) +
                          " names a task only partly (give its job and task)");
  return "/job:" + *spec.job + "/replica:" + std::to_string(spec.replica.value_or(0)) + "/task:" + std::to_string(*spec.task);
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string encode_nccl_id(const NcclIdBytes& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kNcclIdBytes);
  for (uint8_t b : id) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

NcclIdBytes decode_nccl_id(std::string_view hex, std::string_view op) {
  const std::string where = "[" + std::string(op) + "] ";
  if (hex.size() != 2 * kNcclIdBytes)
    throw InvalidArgument(where + "nccl_id must be " + std::to_string(2 * kNcclIdBytes) + " hex digits (NCCL's " +
                          std::to_string(kNcclIdBytes) + "-byte unique id), got " + std::to_string(hex.size()) +
                          " characters");
  NcclIdBytes id{};
  for (size_t i = 0; i < kNcclIdBytes; ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      const size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      throw InvalidArgument(where + "nccl_id must be hex digits; character " + std::to_string(at) + " is '" +
                            std::string(1, hex[at]) + "'");
    }
    id[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

// NCCL comes with every CUDA build (the build refuses to configure CUDA without it).
#ifdef WEFT_RUNTIME_WITH_CUDA
bool nccl_compiled_in() { return true; }
#else
bool nccl_compiled_in() { return false; }
#endif

}  // namespace weft
