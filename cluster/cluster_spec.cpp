#include "cluster/cluster_spec.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <unordered_map>

#include "cluster/positioned_json.h"
#include "runtime/device_name.h"
#include "runtime/error.h"
#include "runtime/file_io.h"

namespace weft {

namespace {

constexpr std::array<std::string_view, 2> kJobs = {"chief", "worker"};  // in rank order

// A string from the input, quoted for a message: bounded, with control characters escaped so a
// hostile spec cannot forge lines in a log.
std::string quoted(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out = "'";
  size_t n = 0;
  for (char c : s) {
    if (n >= kMax && (static_cast<unsigned char>(c) & 0xC0) != 0x80) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
    ++n;
  }
  return out + "'";
}

std::string join(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

std::string short_task_name(std::string_view job, int index) {
  return "/job:" + std::string(job) + "/task:" + std::to_string(index);
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

// Checks a parsed spec and builds the ClusterSpec; every failure points at the element.
class ClusterSpecReader {
 public:
  ClusterSpecReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  ClusterSpec read() {
    const JsonNode root = parse_positioned_json(text_, source_, "cluster");
    if (!root.is_object())
      fail(root.offset, "the spec must be a JSON object like {\"cluster\": {\"worker\": [\"host1:2222\"]}}, got " +
                            std::string(json_kind_name(root)));
    check_keys(root, {"cluster", "task", "devices"}, "", "key");
    const JsonNode* cluster = member(root, "cluster");
    if (!cluster)
      fail(root.offset, "the spec has no 'cluster' key: list the tasks, e.g. {\"cluster\": {\"worker\": [\"host1:2222\"]}}");
    read_cluster(*cluster);
    if (const JsonNode* task = member(root, "task")) read_task(*task);
    if (const JsonNode* devices = member(root, "devices")) read_devices(*devices);
    spec_.source_ = std::string(source_);
    spec_.from_spec_ = true;
    return std::move(spec_);
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& problem) const {
    throw InvalidArgument("[cluster] " + std::string(source_) + ":" + json_line_column(text_, offset) + ": " +
                          problem);
  }

  // Unknown and repeated keys are errors; the accepted keys are few, so this stays linear.
  void check_keys(const JsonNode& object, std::initializer_list<std::string_view> accepted,
                  const std::string& where, const char* noun) const {
    std::vector<const JsonMember*> seen(accepted.size(), nullptr);
    for (const JsonMember& m : object.members) {
      auto it = std::find(accepted.begin(), accepted.end(), m.key);
      if (it == accepted.end())
        fail(m.key_offset, std::string("unknown ") + noun + " " + quoted(m.key) +
                               (where.empty() ? "" : " in '" + where + "'") + " (accepted: " + join(accepted) + ")");
      const JsonMember*& first = seen[static_cast<size_t>(it - accepted.begin())];
      if (first)
        fail(m.key_offset, "duplicate " + std::string(noun) + " " + quoted(m.key) + " (also at " +
                               json_line_column(text_, first->key_offset) + ")");
      first = &m;
    }
  }

  static const JsonNode* member(const JsonNode& object, std::string_view key) {
    for (const JsonMember& m : object.members)
      if (m.key == key) return &m.value;
    return nullptr;
  }

  int read_int(const JsonNode& node, int lo, int hi, const std::string& what) const {
    if (!node.is_integer()) {
      const std::string got =
          node.kind == JsonNode::Kind::kFloat ? node.text : std::string(json_kind_name(node));
      fail(node.offset, "'" + what + "' must be an integer, got " + got);
    }
    if (node.integer_saturated || node.integer < lo || node.integer > hi)
      fail(node.offset, "'" + what + "' must be in " + std::to_string(lo) + ".." + std::to_string(hi) +
                            ", got " + node.text);
    return static_cast<int>(node.integer);
  }

  void read_cluster(const JsonNode& cluster) {
    if (!cluster.is_object())
      fail(cluster.offset, "'cluster' must be an object mapping jobs to address lists, like {\"worker\": "
                           "[\"host1:2222\"]}, got " + std::string(json_kind_name(cluster)));
    check_keys(cluster, {"chief", "worker"}, "cluster", "job");
    std::unordered_map<std::string, std::pair<std::string, size_t>> addresses;  // -> task, offset
    for (std::string_view job : kJobs) {
      const JsonNode* list = member(cluster, job);
      if (!list) continue;
      const std::string where = "cluster." + std::string(job);
      if (!list->is_array())
        fail(list->offset, "'" + where + "' must be a list of \"host:port\" addresses, got " +
                               std::string(json_kind_name(*list)));
      if (job == "chief" && list->items.size() > 1)
        fail(list->items[1].offset, "'cluster.chief' has " + std::to_string(list->items.size()) +
                                        " addresses; a cluster has at most one chief");
      for (size_t i = 0; i < list->items.size(); ++i) {
        const JsonNode& address = list->items[i];
        if (spec_.tasks_.size() >= static_cast<size_t>(ClusterSpec::kMaxTasks))
          fail(address.offset, "more than " + std::to_string(ClusterSpec::kMaxTasks) + " tasks in the cluster");
        check_address(address, where);
        const int index = static_cast<int>(i);
        auto [it, fresh] = addresses.try_emplace(address.text, short_task_name(job, index), address.offset);
        if (!fresh)
          fail(address.offset, "duplicate address " + quoted(address.text) + " (also task " + it->second.first +
                                   " at " + json_line_column(text_, it->second.second) + ")");
        spec_.tasks_.push_back(TaskSpec{std::string(job), index, address.text, {}});
      }
    }
    if (spec_.tasks_.empty())
      fail(cluster.offset, "the cluster has no tasks: list at least one address under 'chief' or 'worker'");
  }

  void check_address(const JsonNode& node, const std::string& where) const {
    if (!node.is_string())
      fail(node.offset, "an address in '" + where + "' must be a \"host:port\" string, got " +
                            std::string(json_kind_name(node)));
    const std::string& a = node.text;
    const size_t colon = a.rfind(':');
    if (colon == std::string::npos)
      fail(node.offset, "malformed address " + quoted(a) + ": expected host:port, like \"host1:2222\"");
    const std::string_view host = std::string_view(a).substr(0, colon);
    const std::string_view port = std::string_view(a).substr(colon + 1);
    if (host.empty()) fail(node.offset, "malformed address " + quoted(a) + ": the host is empty");
    for (char c : host)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '/')
        fail(node.offset, "malformed address " + quoted(a) + ": the host has a space, slash or control character");
    int value = 0;
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) {
      if (c < '0' || c > '9') digits = false;
      if (digits) value = value * 10 + (c - '0');
    }
    if (!digits || value < 1 || value > 65535)
      fail(node.offset, "malformed address " + quoted(a) + ": the port " + quoted(port) +
                            " is not a number in 1..65535");
  }

  int first_rank_of_job(std::string_view job, int* count) const {
    int first = -1, n = 0;
    for (size_t r = 0; r < spec_.tasks_.size(); ++r) {
      if (spec_.tasks_[r].job != job) continue;
      if (first < 0) first = static_cast<int>(r);
      ++n;
    }
    *count = n;
    return first;
  }

  void read_task(const JsonNode& task) {
    if (!task.is_object())
      fail(task.offset, "'task' must be an object like {\"type\": \"worker\", \"index\": 0}, got " +
                            std::string(json_kind_name(task)));
    check_keys(task, {"type", "index"}, "task", "key");
    const JsonNode* type = member(task, "type");
    const JsonNode* index = member(task, "index");
    if (!type) fail(task.offset, "'task' has no 'type' (chief or worker)");
    if (!index) fail(task.offset, "'task' has no 'index'");
    if (!type->is_string())
      fail(type->offset, "'task.type' must be a string (chief or worker), got " + std::string(json_kind_name(*type)));
    if (std::find(kJobs.begin(), kJobs.end(), type->text) == kJobs.end())
      fail(type->offset, "'task.type' is " + quoted(type->text) + ", not a job (accepted: chief, worker)");
    int count = 0;
    const int first = first_rank_of_job(type->text, &count);
    if (count == 0) fail(type->offset, "'task.type' is '" + type->text + "', but the cluster has no " + type->text);
    const int i = read_int(*index, 0, INT_MAX, "task.index");
    if (i >= count)
      fail(index->offset, "'task.index' is " + std::to_string(i) + ", but job '" + type->text + "' has " +
                              plural(count, "task", "tasks") + " (indices 0.." + std::to_string(count - 1) + ")");
    spec_.declared_rank_ = first + i;
  }

  void read_devices(const JsonNode& devices) {
    if (!devices.is_object())
      fail(devices.offset, "'devices' must be an object mapping jobs to device settings, got " +
                               std::string(json_kind_name(devices)));
    check_keys(devices, {"chief", "worker"}, "devices", "job");
    for (const JsonMember& m : devices.members) {
      int count = 0;
      const int first = first_rank_of_job(m.key, &count);
      const std::string where = "devices." + m.key;
      if (count == 0) fail(m.key_offset, "'" + where + "' is given, but the cluster has no " + m.key);
      if (m.value.is_object()) {
        const TaskDevices d = read_device_entry(m.value, where);
        for (int i = 0; i < count; ++i) spec_.tasks_[static_cast<size_t>(first + i)].devices = d;
      } else if (m.value.is_array()) {
        if (m.value.items.size() != static_cast<size_t>(count))
          fail(m.value.offset, "'" + where + "' has " + plural(static_cast<int>(m.value.items.size()), "entry", "entries") +
                                   ", but job '" + m.key + "' has " + plural(count, "task", "tasks") +
                                   ": give one object per task, or one object for all");
        for (int i = 0; i < count; ++i)
          spec_.tasks_[static_cast<size_t>(first + i)].devices =
              read_device_entry(m.value.items[static_cast<size_t>(i)], where + "[" + std::to_string(i) + "]");
      } else {
        fail(m.value.offset, "'" + where + "' must be an object (for every task of the job) or a list of one "
                             "object per task, got " + std::string(json_kind_name(m.value)));
      }
    }
  }

  TaskDevices read_device_entry(const JsonNode& entry, const std::string& where) const {
    if (!entry.is_object())
      fail(entry.offset, "'" + where + "' must be an object like {\"logical_cpus\": 2, \"gpus\": [0]}, got " +
                             std::string(json_kind_name(entry)));
    check_keys(entry, {"logical_cpus", "gpus"}, where, "key");
    TaskDevices d;
    if (const JsonNode* cpus = member(entry, "logical_cpus")) d.logical_cpus = read_int(*cpus, 1, 256, where + ".logical_cpus");
    if (const JsonNode* gpus = member(entry, "gpus")) {
      if (!gpus->is_array())
        fail(gpus->offset, "'" + where + ".gpus' must be a list of CUDA device indices, got " +
                               std::string(json_kind_name(*gpus)));
      std::unordered_map<int, size_t> seen;  // index -> offset
      std::vector<int> indices;
      for (const JsonNode& g : gpus->items) {
        const int i = read_int(g, 0, INT_MAX, where + ".gpus[]");
        auto [it, fresh] = seen.try_emplace(i, g.offset);
        if (!fresh)
          fail(g.offset, "duplicate GPU index " + std::to_string(i) + " in '" + where + ".gpus' (also at " +
                             json_line_column(text_, it->second) + ")");
        indices.push_back(i);
      }
      d.gpus = std::move(indices);
    }
    return d;
  }

  std::string_view text_;
  std::string_view source_;
  ClusterSpec spec_;
};

std::string TaskSpec::name() const { return "/job:" + job + "/replica:0/task:" + std::to_string(index); }

ClusterSpec ClusterSpec::parse(std::string_view json_text, std::string_view source_name) {
  if (json_text.size() > kMaxSpecBytes)
    throw InvalidArgument("[cluster] " + std::string(source_name) + ": the spec has " +
                          std::to_string(json_text.size()) + " bytes, more than the limit of " +
                          std::to_string(kMaxSpecBytes) + " (1 MiB)");
  return ClusterSpecReader(json_text, source_name).read();
}

ClusterSpec ClusterSpec::load(const std::string& path) {
  return parse(read_file(path, kMaxSpecBytes, "cluster"), path);
}

ClusterSpec ClusterSpec::without_spec(int world_size) {
  if (world_size < 1 || world_size > kMaxTasks)
    throw InvalidArgument("[cluster] the world size must be in 1.." + std::to_string(kMaxTasks) + ", got " +
                          std::to_string(world_size));
  ClusterSpec spec;
  spec.source_ = "mpirun";
  for (int r = 0; r < world_size; ++r) spec.tasks_.push_back(TaskSpec{"worker", r, "", {}});
  return spec;
}

std::optional<ClusterSpec> ClusterSpec::from_command_line_or_environment(int& argc, char** argv) {
  std::optional<std::string> path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;  // what follows is not weft's
    int used = 0;
    std::string value;
    if (arg.starts_with("--cluster=")) {
      value = arg.substr(10);
      used = 1;
    } else if (arg == "--cluster") {
      if (i + 1 >= argc) throw InvalidArgument("[cluster] --cluster needs a file: --cluster=spec.json");
      value = argv[i + 1];
      used = 2;
    } else {
      continue;
    }
    if (value.empty()) throw InvalidArgument("[cluster] --cluster needs a file: --cluster=spec.json");
    if (path) throw InvalidArgument("[cluster] --cluster is given twice: " + *path + " and " + value);
    path = value;
    // Shift the rest down over the option, the terminating null pointer included.
    for (int j = i; j + used <= argc; ++j) argv[j] = argv[j + used];
    argc -= used;
    --i;
  }
  if (path) return load(*path);
  if (const char* file = std::getenv("WEFT_CLUSTER"); file && *file) return load(file);
  if (const char* text = std::getenv("TF_CONFIG"); text && *text) return parse(text, "TF_CONFIG");
  return std::nullopt;
}

const TaskSpec& ClusterSpec::task(int rank) const {
  if (rank < 0 || rank >= num_tasks())
    throw InvalidArgument("[cluster] rank " + std::to_string(rank) + " is not in 0.." +
                          std::to_string(num_tasks() - 1) + " (" + source_ + ")");
  return tasks_[static_cast<size_t>(rank)];
}

int ClusterSpec::rank_of(std::string_view device_or_task_name) const {
  const DeviceSpec spec = DeviceSpec::parse(device_or_task_name);
  if (!spec.job || (spec.replica && *spec.replica != 0)) return -1;
  int found = -1, in_job = 0;
  for (size_t r = 0; r < tasks_.size(); ++r) {
    if (tasks_[r].job != *spec.job) continue;
    ++in_job;
    if (!spec.task || tasks_[r].index == *spec.task) found = static_cast<int>(r);
    if (spec.task && found >= 0) return found;
  }
  // Without a task part the name is only a task's when its job has just one.
  return !spec.task && in_job == 1 ? found : -1;
}

void ClusterSpec::check_process_count(int processes) const {
  if (processes == num_tasks()) return;
  const std::string started = plural(processes, "process was", "processes were") + " started";
  if (!from_spec_)
    throw InvalidArgument("[cluster] " + source_ + ": expected " + plural(num_tasks(), "process", "processes") +
                          " but " + started);
  int chiefs = 0;
  for (const TaskSpec& t : tasks_) chiefs += t.job == "chief";
  const int workers = num_tasks() - chiefs;
  std::string how = "start it with mpirun -np " + std::to_string(num_tasks());
  how += source_ == "TF_CONFIG" ? ", or set TF_CONFIG to a spec of " + plural(processes, "task", "tasks")
                                : " or weft-launch --cluster=" + source_;
  throw InvalidArgument("[cluster] " + source_ + ": the spec has " + plural(num_tasks(), "task", "tasks") + " (" +
                        (chiefs ? "a chief and " : "") + plural(workers, "worker", "workers") + ") but " + started +
                        "; " + how);
}

}  // namespace weft
