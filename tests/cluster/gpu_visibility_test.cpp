// Which GPUs a task sees (cluster/gpu_visibility.h): the spec's indices into what the process was
// started with, the launcher's CUDA_VISIBLE_DEVICES left alone, a machine's GPUs shared out among
// its tasks, and a spec index the process cannot see refused with a message naming the task.
#include "cluster/gpu_visibility.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace weft {
namespace {

std::optional<std::string> visible(GpuVisibilityInputs in) { return cuda_visible_devices_for(in, "/job:worker/task:1"); }

std::string error_of(GpuVisibilityInputs in) {
  try {
    visible(in);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no InvalidArgument)";
}

TEST(GpuVisibility, TheSpecIndexesTheGpusTheProcessWasStartedWith) {
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{1, 0}, .machine_gpus = 4}), "1,0");
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{1, 0}, .visible = "4,5,6", .machine_gpus = 8}), "5,4")
      << "indices into CUDA_VISIBLE_DEVICES, as CUDA numbers them";
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{0}, .visible = "GPU-1a2b,GPU-3c4d"}), "GPU-1a2b") << "UUIDs too";
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{}, .machine_gpus = 4}), "") << "[] hides every GPU";
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{2, 3}, .machine_gpus = -1}), "2,3")
      << "without a driver nothing can be checked; CUDA will see no GPU anyway";
  EXPECT_EQ(visible({.spec_gpus = std::vector<int>{0}, .machine_gpus = 2, .local_rank = 1, .local_size = 2}), "0")
      << "the spec wins over sharing";
}

TEST(GpuVisibility, ASpecIndexTheProcessCannotSeeNamesTheTask) {
  std::string e = error_of({.spec_gpus = std::vector<int>{0, 3}, .machine_gpus = 2});
  EXPECT_NE(e.find("[cluster] the spec gives task /job:worker/task:1 GPU 3, but the machine has 2 GPUs"),
            std::string::npos) << e;
  e = error_of({.spec_gpus = std::vector<int>{1}, .visible = "7", .machine_gpus = 8});
  EXPECT_NE(e.find("GPU 1, but CUDA_VISIBLE_DEVICES=7 leaves it 1 GPU"), std::string::npos) << e;
  e = error_of({.spec_gpus = std::vector<int>{0}, .machine_gpus = 0});
  EXPECT_NE(e.find("but the machine has 0 GPUs"), std::string::npos) << e;
}

TEST(GpuVisibility, TasksSharingAMachineShareItsGpus) {
  EXPECT_EQ(visible({.machine_gpus = 8, .local_rank = 3, .local_size = 8}), "3");
  EXPECT_EQ(visible({.machine_gpus = 8, .local_rank = 1, .local_size = 2}), "4,5,6,7");
  EXPECT_EQ(visible({.machine_gpus = 3, .local_rank = 1, .local_size = 2}), "1") << "an equal share; GPU 2 unused";
  EXPECT_EQ(visible({.machine_gpus = 1, .local_rank = 1, .local_size = 2}), std::nullopt)
      << "fewer GPUs than tasks: every task sees them all";
  EXPECT_EQ(visible({.machine_gpus = 4, .local_rank = 0, .local_size = 1}), std::nullopt) << "alone on its machine";
  EXPECT_EQ(visible({.machine_gpus = -1, .local_rank = 0, .local_size = 4}), std::nullopt) << "no driver";
  EXPECT_EQ(visible({.visible = "2,3", .machine_gpus = 8, .local_rank = 0, .local_size = 2}), std::nullopt)
      << "the launcher's choice stands";
}

}  // namespace
}  // namespace weft
