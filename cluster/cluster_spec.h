// The cluster spec: which tasks a weft cluster has, in rank order, with their addresses and the
// devices each may use. Without a spec, rank r of mpirun is "/job:worker/replica:0/task:r". A spec
// comes from --cluster=FILE, the file named by WEFT_CLUSTER, or the JSON text of TF_CONFIG, in
// TensorFlow's TF_CONFIG shape plus weft's own "devices":
//
//   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]},
//    "task": {"type": "worker", "index": 0},
//    "devices": {"chief": {"logical_cpus": 2}, "worker": [{"gpus": [0]}, {"gpus": []}]}}
//
//   std::optional<ClusterSpec> spec = ClusterSpec::from_command_line_or_environment(argc, argv);
//   ClusterSpec cluster = spec ? *spec : ClusterSpec::without_spec(world_size);
//   cluster.check_process_count(world_size);  // InvalidArgument saying how to start it
//   // With the spec above:
//   cluster.task(1).name();                               // "/job:worker/replica:0/task:0"
//   cluster.rank_of("/job:worker/task:1/device:GPU:0");   // 2
//   cluster.declared_rank();                              // 1
//
// Ranks follow the spec's order, chief first. A spec is untrusted input: anything wrong with it is
// an InvalidArgument naming the source, the line and column of the offending element and the
// problem: "[cluster] spec.json:4:17: duplicate address 'host1:2222' (also task
// /job:worker/task:0 at 3:16)".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

// What a task may use; unset parts are left to device discovery.
struct TaskDevices {
  std::optional<int> logical_cpus;       // 1..256
  std::optional<std::vector<int>> gpus;  // indices into the GPUs the process sees, distinct (gpu_visibility.h)
};

struct TaskSpec {
  std::string job;      // "chief" or "worker"
  int index = 0;        // within the job
  std::string address;  // "host:port"; "" without a spec
  TaskDevices devices;

  std::string name() const;  // "/job:worker/replica:0/task:1"
};

class ClusterSpec {
 public:
  static constexpr size_t kMaxSpecBytes = size_t{1} << 20;
  static constexpr int kMaxTasks = 65536;

  // source_name is the file's path or "TF_CONFIG"; messages name it.
  static ClusterSpec parse(std::string_view json_text, std::string_view source_name);
  // Reads at most kMaxSpecBytes; NotFound or InvalidArgument naming the path.
  static ClusterSpec load(const std::string& path);
  // Rank r is /job:worker/replica:0/task:r; task 0 is the chief.
  static ClusterSpec without_spec(int world_size);
  // --cluster=FILE or --cluster FILE (removed from argv), else WEFT_CLUSTER (a file), else
  // TF_CONFIG (JSON text); nullopt when none is given. Empty variables count as not given.
  static std::optional<ClusterSpec> from_command_line_or_environment(int& argc, char** argv);

  const std::vector<TaskSpec>& tasks() const { return tasks_; }  // in rank order, chief first
  int num_tasks() const { return static_cast<int>(tasks_.size()); }
  const TaskSpec& task(int rank) const;  // InvalidArgument when out of range
  int chief_rank() const { return 0; }

  // The rank owning a task or device name in any form: "/job:worker/task:1",
  // "/job:worker/replica:0/task:1/device:CPU:0", or "/job:chief" (a job of one task); -1 when no
  // task of this cluster owns it. InvalidArgument when the name does not parse.
  int rank_of(std::string_view device_or_task_name) const;

  // InvalidArgument unless the spec has exactly `processes` tasks, saying how to start it.
  void check_process_count(int processes) const;

  const std::string& source() const { return source_; }  // the file, "TF_CONFIG", or "mpirun"
  std::optional<int> declared_rank() const { return declared_rank_; }  // from "task"

 private:
  friend class ClusterSpecReader;
  ClusterSpec() = default;

  std::vector<TaskSpec> tasks_;
  std::string source_;
  bool from_spec_ = false;
  std::optional<int> declared_rank_;
};

}  // namespace weft
