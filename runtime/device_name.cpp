#include "runtime/device_name.h"

#include <charconv>
#include <vector>

#include "runtime/error.h"

namespace weft {

const char* device_type_name(DeviceType type) { return type == DeviceType::CPU ? "CPU" : "GPU"; }

namespace {

[[noreturn]] void bad(std::string_view name, const std::string& why) {
  throw InvalidArgument("[device] cannot parse device name '" + std::string(name) + "': " + why);
}

int parse_int(std::string_view name, std::string_view s, const char* what) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0 || s.empty())
    bad(name, std::string(what) + " '" + std::string(s) + "' is not a non-negative integer");
  return v;
}

std::optional<DeviceType> parse_type(std::string_view t) {
  if (t == "CPU" || t == "cpu") return DeviceType::CPU;
  if (t == "GPU" || t == "gpu" || t == "CUDA" || t == "cuda") return DeviceType::CUDA;
  return std::nullopt;
}

}  // namespace

DeviceSpec DeviceSpec::parse(std::string_view name) {
  DeviceSpec spec;
  if (name.empty()) return spec;
  std::vector<std::string_view> parts;
  size_t start = name.front() == '/' ? 1 : 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    if (slash > start) parts.push_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  for (std::string_view part : parts) {
    size_t colon = part.find(':');
    std::string_view key = part.substr(0, colon);
    std::string_view rest = colon == std::string_view::npos ? std::string_view() : part.substr(colon + 1);
    if (key == "job") {
      if (rest.empty()) bad(name, "empty job");
      spec.job = std::string(rest);
    } else if (key == "replica") {
      spec.replica = parse_int(name, rest, "replica");
    } else if (key == "task") {
      spec.task = parse_int(name, rest, "task");
    } else if (key == "device") {
      size_t c2 = rest.find(':');
      auto t = parse_type(rest.substr(0, c2));
      if (!t) bad(name, "unknown device type '" + std::string(rest.substr(0, c2)) + "'");
      spec.type = t;
      if (c2 != std::string_view::npos && rest.substr(c2 + 1) != "*")
        spec.index = parse_int(name, rest.substr(c2 + 1), "device index");
    } else if (auto t = parse_type(key)) {
      spec.type = t;
      if (!rest.empty() && rest != "*") spec.index = parse_int(name, rest, "device index");
    } else {
      bad(name, "unknown part '" + std::string(part) + "'");
    }
  }
  return spec;
}

std::string DeviceSpec::to_string() const {
  std::string s;
  if (job) s += "/job:" + *job;
  if (replica) s += "/replica:" + std::to_string(*replica);
  if (task) s += "/task:" + std::to_string(*task);
  if (type) {
    s += "/device:";
    s += device_type_name(*type);
    s += ":" + (index ? std::to_string(*index) : std::string("*"));
  }
  return s;
}

bool DeviceSpec::matches(const DeviceSpec& full) const {
  return (!job || job == full.job) && (!replica || replica == full.replica) &&
         (!task || task == full.task) && (!type || type == full.type) &&
         (!index || index == full.index);
}

std::string local_device_name(DeviceType type, int index) {
  return std::string("/job:localhost/replica:0/task:0/device:") + device_type_name(type) + ":" +
         std::to_string(index);
}

}  // namespace weft
