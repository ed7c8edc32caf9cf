// Which GPUs a task uses, decided at cluster::init before CUDA starts, as the CUDA_VISIBLE_DEVICES
// value its CUDA runtime (and so NCCL and cuBLAS) will see. A task's GPUs are then GPU:0, GPU:1,
// ... in the order given, as TensorFlow numbers the GPUs a process may see.
//
//   - The spec's "gpus" for the task (cluster_spec.h): indices into the GPUs the process was
//     started with (CUDA_VISIBLE_DEVICES when set, else the machine's); [] hides every GPU.
//   - Without one, when the process was started with CUDA_VISIBLE_DEVICES: left as it is.
//   - Otherwise, when several tasks share a machine that has at least one GPU for each: each takes
//     an equal share, in local-rank order (8 GPUs, 8 tasks: one each; 8 GPUs, 2 tasks: four each),
//     as Horovod's users pin one GPU per local rank. DataParallel then has one GPU per task and
//     goes through NCCL. With fewer GPUs than tasks, every task sees them all, as before.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace weft {

struct GpuVisibilityInputs {
  std::optional<std::vector<int>> spec_gpus;  // the task's "gpus" in the spec
  std::optional<std::string> visible;         // CUDA_VISIBLE_DEVICES as the process was started
  int machine_gpus = -1;                      // the driver's GPUs; -1: unknown (no driver)
  int local_rank = 0, local_size = 1;         // this task among the job's processes on its machine
};

// The CUDA_VISIBLE_DEVICES value for the task, or nullopt to leave the environment alone.
// InvalidArgument naming `task` for a spec index the process cannot see.
std::optional<std::string> cuda_visible_devices_for(const GpuVisibilityInputs& in, const std::string& task);

// The GPUs the NVIDIA driver reports (/proc/driver/nvidia/gpus), read without starting CUDA;
// -1 where there is no driver.
int machine_gpu_count();

}  // namespace weft
